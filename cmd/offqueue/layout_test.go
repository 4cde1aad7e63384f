package main

import (
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/offmap/offmap/queue"
)

// trade is a typed message: fixed layout, its padding explicit (as
// values.Codec requires), an array of floats.
type trade struct {
	ID     uint64
	Price  int64
	Qty    int32
	Side   uint8
	Venue  [8]byte
	Flags  uint8
	_      [2]byte
	Levels [3]float32
	Seq    uint16
	_      [2]byte
}

const tradeLayout = "ID:uint64,Price:int64,Qty:int32,Side:uint8,Venue:[8]byte,Flags:uint8,_:[2]byte,Levels:[3]float32,Seq:uint16,_:[2]byte"

// TestLayoutMatchesGo: the layout's offsets and size are Go's.
func TestLayoutMatchesGo(t *testing.T) {
	l, err := parseLayout(tradeLayout)
	if err != nil {
		t.Fatal(err)
	}
	var v trade
	offs := map[string]uintptr{"ID": unsafe.Offsetof(v.ID), "Price": unsafe.Offsetof(v.Price), "Qty": unsafe.Offsetof(v.Qty),
		"Side": unsafe.Offsetof(v.Side), "Venue": unsafe.Offsetof(v.Venue), "Flags": unsafe.Offsetof(v.Flags),
		"Levels": unsafe.Offsetof(v.Levels), "Seq": unsafe.Offsetof(v.Seq)}
	for _, f := range l.fields {
		if want, ok := offs[f.name]; ok && uintptr(f.off) != want {
			t.Errorf("field %s at %d, Go puts it at %d", f.name, f.off, want)
		}
	}
	// Implicit padding, as in a struct of Go's own: the same offsets.
	l2, err := parseLayout("A:uint8,B:int64,C:[3]uint16,D:int32")
	var w struct {
		A uint8
		B int64
		C [3]uint16
		D int32
	}
	if err != nil || l2.fields[1].off != int(unsafe.Offsetof(w.B)) || l2.fields[3].off != int(unsafe.Offsetof(w.D)) ||
		l2.size != int(unsafe.Sizeof(w)) {
		t.Errorf("implicit padding: %+v, %v", l2, err)
	}
	if uintptr(l.size) != unsafe.Sizeof(v) {
		t.Fatalf("layout of %d bytes, Go's struct %d", l.size, unsafe.Sizeof(v))
	}
	for _, bad := range []string{"x", "x:int128", "x:[0]byte", ":int8", "x:[3]"} {
		if _, err := parseLayout(bad); err == nil {
			t.Errorf("layout %q accepted", bad)
		}
	}
}

// TestDumpLayout: dump --layout prints typed messages as their fields,
// and a message of another size as it is.
func TestDumpLayout(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "q")
	q, err := queue.Open(dir, queue.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a, err := queue.NewAppender[trade](q)
	if err != nil {
		t.Fatal(err)
	}
	v := trade{ID: 7, Price: -1500, Qty: 3, Side: 1, Venue: [8]byte{'X', 'N', 'A', 'S'}, Flags: 1,
		Levels: [3]float32{1.5, float32(math.Inf(1)), -2}, Seq: 65535}
	if _, err := a.Append(&v); err != nil {
		t.Fatal(err)
	}
	q.Append([]byte("not a trade"))
	q.Close()

	out, errOut, code := offqueue(t, "", "dump", "--layout", tradeLayout, dir)
	want := `0:0	48	{"ID":7,"Price":-1500,"Qty":3,"Side":1,"Venue":"XNAS","Flags":1,"Levels":[1.5,"+Inf",-2],"Seq":65535}` + "\n" +
		"0:1\t11\t\"not a trade\"\n"
	if code != 0 || out != want {
		t.Fatalf("dump --layout: %q (%s), want %q", out, errOut, want)
	}
	out, _, code = offqueue(t, "", "dump", "--json", "--layout", tradeLayout, dir)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if code != 0 || len(lines) != 2 {
		t.Fatalf("dump --json --layout: %q", out)
	}
	var m struct {
		Fields      map[string]any `json:"fields"`
		LayoutError string         `json:"layout_error"`
		Payload     string         `json:"payload"`
	}
	if err := json.Unmarshal([]byte(lines[0]), &m); err != nil || m.Fields["Venue"] != "XNAS" || m.Fields["ID"] != 7.0 {
		t.Fatalf("first message: %q, %v", lines[0], err)
	}
	m.Fields = nil
	if err := json.Unmarshal([]byte(lines[1]), &m); err != nil || m.Fields != nil || m.Payload != "not a trade" ||
		!strings.Contains(m.LayoutError, "11-byte message, the layout is 48 bytes") {
		t.Fatalf("second message: %q, %v", lines[1], err)
	}
	_, errOut, code = offqueue(t, "", "dump", "--layout", "x:int128", dir)
	if code != 2 || !strings.Contains(errOut, "unknown type") {
		t.Fatalf("a bad layout: %d %q", code, errOut)
	}
}
