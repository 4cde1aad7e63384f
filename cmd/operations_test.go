package cmd_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestOperationsDoc runs every sh block of docs/OPERATIONS.md, in order,
// in one empty directory, with the commands built from this module first
// in PATH: each block must exit 0 (bash -e, pipefail).
func TestOperationsDoc(t *testing.T) {
	for _, tool := range []string{"jq", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("docs/OPERATIONS.md's commands need %s", tool)
		}
	}
	blocks := shBlocks(t, filepath.Join("..", "docs", "OPERATIONS.md"))
	if len(blocks) < 10 {
		t.Fatalf("docs/OPERATIONS.md has %d sh blocks", len(blocks))
	}
	bin := t.TempDir()
	for _, tool := range []string{"offmap", "offqueue"} {
		if out, err := exec.Command("go", "build", "-o", filepath.Join(bin, tool), "./"+tool).CombinedOutput(); err != nil {
			t.Fatalf("build %s: %v\n%s", tool, err, out)
		}
	}
	work := t.TempDir()
	for _, b := range blocks {
		cmd := exec.Command("bash", "-e", "-o", "pipefail", "-c", b.text)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("docs/OPERATIONS.md:%d: %v\n%s\noutput:\n%s", b.line, err, b.text, out)
		}
	}
}

type shBlock struct {
	line int // of the opening fence
	text string
}

// shBlocks returns the contents of the ```sh blocks of the file at path.
func shBlocks(t *testing.T, path string) []shBlock {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var blocks []shBlock
	var cur *shBlock
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		switch {
		case cur == nil && line == "```sh":
			cur = &shBlock{line: n}
		case cur != nil && line == "```":
			blocks = append(blocks, *cur)
			cur = nil
		case cur != nil:
			cur.text += line + "\n"
		}
	}
	if cur != nil {
		t.Fatalf("%s:%d: an sh block is not closed", path, cur.line)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for _, b := range blocks {
		if strings.TrimSpace(b.text) == "" {
			t.Fatalf("%s:%d: an empty sh block", path, b.line)
		}
	}
	return blocks
}
