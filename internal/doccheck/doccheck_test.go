package doccheck

import (
	"strings"
	"testing"
)

func TestProblemsFindsEachKind(t *testing.T) {
	problems, err := Problems("testdata/bad")
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(problems, "\n")
	for _, want := range []string{
		`package doc: "txn.go" is a source file name`,
		`package doc: "internal/shm" is an internal package`,
		`Thing: "Thing.ring" is unexported`,
		`Thing: "rollDue" is unexported`, // in a field's comment
		`Thing.Wait: "shm.SpinYield" is in an internal package`,
		`Thing.Wait: "helper" is unexported`,
		`A: "b_c" is unexported`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("missing %s; got:\n%s", want, got)
		}
	}
	if len(problems) != 7 {
		t.Errorf("%d problems, want 7:\n%s", len(problems), got)
	}
}

func TestProblemsAllowsEnglish(t *testing.T) {
	problems, err := Problems("testdata/good")
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) != 0 {
		t.Errorf("plain words reported as unexported names:\n%s", strings.Join(problems, "\n"))
	}
}

func TestProblemsEmptyDir(t *testing.T) {
	if _, err := Problems(t.TempDir()); err == nil {
		t.Error("a directory with no Go files gave no error")
	}
}
