package main

import (
	"archive/zip"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestEscape(t *testing.T) {
	for in, want := range map[string]string{
		"github.com/offmap/offmap":      "github.com/offmap/offmap",
		"github.com/PowerDNS/lmdb-go":   "github.com/!power!d!n!s/lmdb-go",
		"github.com/VictoriaMetrics/fc": "github.com/!victoria!metrics/fc",
		"v0.1.0-RC1":                    "v0.1.0-!r!c1",
	} {
		got, err := escape(in)
		if err != nil || got != want {
			t.Errorf("escape(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"a!b", "é"} {
		if _, err := escape(bad); err == nil {
			t.Errorf("escape(%q) succeeded", bad)
		}
	}
}

func TestModulePath(t *testing.T) {
	for in, want := range map[string]string{
		"module example.com/a\n\ngo 1.26\n":           "example.com/a",
		"// comment\nmodule \"example.com/b\" // x\n": "example.com/b",
		"go 1.26\nmodule\texample.com/c\n":            "example.com/c",
	} {
		got, err := modulePath([]byte(in))
		if err != nil || got != want {
			t.Errorf("modulePath(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"go 1.26\n", "modules x\n", "module\n"} {
		if p, err := modulePath([]byte(bad)); err == nil {
			t.Errorf("modulePath(%q) = %q, want an error", bad, p)
		}
	}
}

// TestBuild lays out a proxy for a tree (not a git working tree) with a
// nested module, a vendor directory and version-control metadata, and
// checks every file the go command reads from it.
func TestBuild(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{
		"go.mod":               "module example.com/Root\n\ngo 1.26.0\n",
		"LICENSE":              "the licence\n",
		"a.go":                 "package root\n",
		"sub/b.go":             "package sub\n",
		"sub/testdata/x.txt":   "data\n",
		"vendor/modules.txt":   "# vendored\n",
		"vendor/x.org/y/y.go":  "package y\n",
		"sub/vendor/v/v.go":    "package v\n",
		".git/config":          "[core]\n",
		".gitignore":           "/bin/\n",
		"nested/go.mod":        "module example.com/Root/nested\n\ngo 1.26.0\n\nrequire example.com/Root v1.2.3\n",
		"nested/n.go":          "package nested\n",
		"nested/deep/d.go":     "package deep\n",
		"nested/inner/go.mod":  "module example.com/Root/nested/inner\n",
		"nested/inner/i.go":    "package inner\n",
		"nested/inner/LICENSE": "inner's own\n",
	}
	for name, data := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("a.go", filepath.Join(root, "link.go")); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	when := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	mods, err := build(root, out, "v1.2.3", when)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range mods {
		got = append(got, m.path+" "+m.dir)
	}
	want := []string{"example.com/Root .", "example.com/Root/nested nested", "example.com/Root/nested/inner nested/inner"}
	if !slices.Equal(got, want) {
		t.Fatalf("modules %q, want %q", got, want)
	}

	check := func(escPath, modPath string, wantFiles map[string]string) {
		t.Helper()
		vdir := filepath.Join(out, filepath.FromSlash(escPath), "@v")
		list, err := os.ReadFile(filepath.Join(vdir, "list"))
		if err != nil || string(list) != "v1.2.3\n" {
			t.Errorf("%s list: %q, %v", escPath, list, err)
		}
		var info struct {
			Version string
			Time    time.Time
		}
		data, err := os.ReadFile(filepath.Join(vdir, "v1.2.3.info"))
		if err != nil || json.Unmarshal(data, &info) != nil || info.Version != "v1.2.3" || !info.Time.Equal(when) {
			t.Errorf("%s info: %s, %v", escPath, data, err)
		}
		mod, err := os.ReadFile(filepath.Join(vdir, "v1.2.3.mod"))
		if err != nil || string(mod) != wantFiles["go.mod"] {
			t.Errorf("%s mod: %q, %v", escPath, mod, err)
		}
		zr, err := zip.OpenReader(filepath.Join(vdir, "v1.2.3.zip"))
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		seen := map[string]bool{}
		for _, f := range zr.File {
			rel, ok := strings.CutPrefix(f.Name, modPath+"@v1.2.3/")
			if !ok {
				t.Errorf("%s: %s lacks the prefix %s@v1.2.3/", escPath, f.Name, modPath)
				continue
			}
			seen[rel] = true
			want, ok := wantFiles[rel]
			if !ok {
				t.Errorf("%s: %s should not be in the zip", escPath, rel)
				continue
			}
			rc, err := f.Open()
			if err != nil {
				t.Fatal(err)
			}
			buf := make([]byte, len(want)+1)
			n, _ := rc.Read(buf)
			rc.Close()
			if string(buf[:n]) != want {
				t.Errorf("%s: %s holds %q, want %q", escPath, rel, buf[:n], want)
			}
		}
		for rel := range wantFiles {
			if !seen[rel] {
				t.Errorf("%s: %s missing from the zip", escPath, rel)
			}
		}
	}
	check("example.com/!root", "example.com/Root", map[string]string{
		"go.mod":             files["go.mod"],
		"LICENSE":            files["LICENSE"],
		"a.go":               files["a.go"],
		"sub/b.go":           files["sub/b.go"],
		"sub/testdata/x.txt": files["sub/testdata/x.txt"],
		".gitignore":         files[".gitignore"],
		"vendor/modules.txt": files["vendor/modules.txt"], // kept by the go command too
	})
	check("example.com/!root/nested", "example.com/Root/nested", map[string]string{
		"go.mod":    files["nested/go.mod"],
		"LICENSE":   files["LICENSE"], // the repository's, as the go command adds it
		"n.go":      files["nested/n.go"],
		"deep/d.go": files["nested/deep/d.go"],
	})
	check("example.com/!root/nested/inner", "example.com/Root/nested/inner", map[string]string{
		"go.mod":  files["nested/inner/go.mod"],
		"LICENSE": files["nested/inner/LICENSE"],
		"i.go":    files["nested/inner/i.go"],
	})
}

// TestCaseClash refuses two files whose paths differ only in case, which
// the go command would refuse to extract.
func TestCaseClash(t *testing.T) {
	root := t.TempDir()
	for _, name := range []string{"go.mod", "A.go", "a.go"} {
		if err := os.WriteFile(filepath.Join(root, name), []byte("module example.com/x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "A.GO")); err == nil {
		t.Skip("case-insensitive file system")
	}
	if _, err := build(root, t.TempDir(), "v1.0.0", time.Now()); err == nil || !strings.Contains(err.Error(), "differ only in case") {
		t.Fatalf("build: %v, want an error about case", err)
	}
}

// TestGitIgnored leaves out, in a git working tree, the files git ignores
// (build outputs, a demo's data file), as a module fetched from the
// repository at a tag would.
func TestGitIgnored(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	root := t.TempDir()
	for name, data := range map[string]string{
		"go.mod":       "module example.com/g\n",
		".gitignore":   "/bin/\n*.map\n",
		"g.go":         "package g\n",
		"untracked.go": "package g\n",
		"bin/tool":     "binary",
		"demo.map":     "data",
	} {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "go.mod", ".gitignore", "g.go"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	got, err := listFiles(root)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{".gitignore", "g.go", "go.mod", "untracked.go"}; !slices.Equal(got, want) {
		t.Fatalf("files %q, want %q", got, want)
	}
}
