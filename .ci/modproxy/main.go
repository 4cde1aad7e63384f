// Command modproxy lays out a file-system module proxy (GOPROXY=file://DIR)
// that serves every module of this repository's working tree at one
// version, as a module proxy would serve them once they are tagged
// (vX.Y.Z for the root module, SUBDIR/vX.Y.Z for a nested one).
//
//	go run ./.ci/modproxy -version v0.1.0 -out DIR
//
// For each module (the root and every directory below it with a go.mod)
// it writes, under DIR and the module's escaped path:
//
//	@v/list          the version
//	@v/VERSION.info  {"Version": ..., "Time": ...}
//	@v/VERSION.mod   the module's go.mod
//	@v/VERSION.zip   the module's files, each named MODULE@VERSION/PATH
//
// The zip holds what `go mod download` would take from the repository at
// the tag: the files git tracks or would track (not those it ignores),
// without the directories of nested modules, vendor directories or
// version-control metadata, and with the repository's LICENSE in a nested
// module that has none of its own. Module paths and versions are escaped
// as the module proxy protocol says (an upper-case letter is '!' and its
// lower case).
package main

import (
	"archive/zip"
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
)

func main() {
	version := flag.String("version", "", "the version to serve every module at, e.g. v0.1.0")
	out := flag.String("out", "", "the proxy's directory (created if missing)")
	root := flag.String("root", ".", "the repository's root: the directory of the root module's go.mod")
	flag.Parse()
	if *version == "" || *out == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: modproxy -version VERSION -out DIR [-root DIR]")
		os.Exit(2)
	}
	mods, err := build(*root, *out, *version, time.Now().UTC().Truncate(time.Second))
	if err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
	for _, m := range mods {
		fmt.Printf("%s@%s: %d files\n", m.path, *version, m.files)
	}
}

// A module is one go.mod of the repository and what was written for it.
type module struct {
	path  string // module path, from its go.mod
	dir   string // its directory, relative to the repository's root ("." for the root)
	files int    // files in its zip
}

// build writes the proxy for every module under root into out.
func build(root, out, version string, t time.Time) ([]module, error) {
	if !strings.HasPrefix(version, "v") {
		return nil, fmt.Errorf("version %q does not start with v", version)
	}
	files, err := listFiles(root)
	if err != nil {
		return nil, err
	}
	// The modules are the directories that hold a go.mod.
	var dirs []string
	for _, f := range files {
		if path.Base(f) == "go.mod" {
			dirs = append(dirs, path.Dir(f))
		}
	}
	if !slices.Contains(dirs, ".") {
		return nil, fmt.Errorf("%s: no go.mod", root)
	}
	sort.Strings(dirs)
	license, err := os.ReadFile(filepath.Join(root, "LICENSE"))
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var mods []module
	for _, dir := range dirs {
		gomod, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(dir), "go.mod"))
		if err != nil {
			return nil, err
		}
		modPath, err := modulePath(gomod)
		if err != nil {
			return nil, fmt.Errorf("%s/go.mod: %v", dir, err)
		}
		own := filesOf(dir, dirs, files)
		var extra map[string][]byte
		if dir != "." && license != nil && !slices.Contains(own, "LICENSE") {
			extra = map[string][]byte{"LICENSE": license}
		}
		escPath, err := escape(modPath)
		if err != nil {
			return nil, err
		}
		escVersion, err := escape(version)
		if err != nil {
			return nil, err
		}
		vdir := filepath.Join(out, filepath.FromSlash(escPath), "@v")
		if err := os.MkdirAll(vdir, 0o755); err != nil {
			return nil, err
		}
		n, err := writeZip(filepath.Join(vdir, escVersion+".zip"), modPath+"@"+version,
			filepath.Join(root, filepath.FromSlash(dir)), own, extra)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", modPath, err)
		}
		info, _ := json.Marshal(struct {
			Version string
			Time    time.Time
		}{version, t})
		for name, data := range map[string][]byte{
			escVersion + ".mod":  gomod,
			escVersion + ".info": info,
			"list":               []byte(version + "\n"),
		} {
			if err := os.WriteFile(filepath.Join(vdir, name), data, 0o644); err != nil {
				return nil, err
			}
		}
		mods = append(mods, module{path: modPath, dir: dir, files: n})
	}
	return mods, nil
}

// listFiles returns the regular files under root that belong in a module
// zip, as slash-separated paths relative to root: in a git working tree,
// those git tracks or would track (ignored files left out); elsewhere,
// every file. Version-control metadata and vendor directories are never
// listed.
func listFiles(root string) ([]string, error) {
	var names []string
	cmd := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "-z")
	cmd.Dir = root
	if outb, err := cmd.Output(); err == nil && isTop(root) {
		for _, n := range strings.Split(string(outb), "\x00") {
			if n != "" {
				names = append(names, n)
			}
		}
	} else {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, p)
			if d.IsDir() {
				switch d.Name() {
				case ".git", ".hg", ".svn", ".bzr":
					return filepath.SkipDir
				}
				return nil
			}
			names = append(names, filepath.ToSlash(rel))
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	var files []string
	for _, n := range names {
		if excluded(n) {
			continue
		}
		fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(n)))
		if err != nil || !fi.Mode().IsRegular() {
			continue // deleted from the working tree, a symlink, ...
		}
		files = append(files, n)
	}
	sort.Strings(files)
	return files, nil
}

// isTop reports whether root is the top of its git working tree, so that
// git's paths are relative to it.
func isTop(root string) bool {
	cmd := exec.Command("git", "rev-parse", "--show-prefix")
	cmd.Dir = root
	out, err := cmd.Output()
	return err == nil && strings.TrimSpace(string(out)) == ""
}

// excluded reports whether a file never goes into a module zip: one
// inside version-control metadata, or a vendored package's (a file in a
// vendor directory, other than one right in the root's vendor/, such as
// vendor/modules.txt, which the go command keeps).
func excluded(name string) bool {
	elems := strings.Split(name, "/")
	for i, elem := range elems {
		switch {
		case elem == ".git" || elem == ".hg" || elem == ".svn" || elem == ".bzr":
			return true // a worktree's .git is a file
		case elem == "vendor" && i < len(elems)-1 && (i > 0 || len(elems) > 2):
			return true
		}
	}
	return false
}

// filesOf returns the files of the module in dir, relative to dir: those
// under dir and not under the directory of another module nested in it.
func filesOf(dir string, dirs, files []string) []string {
	var own []string
	for _, f := range files {
		rel := f
		if dir != "." {
			if !strings.HasPrefix(f, dir+"/") {
				continue
			}
			rel = strings.TrimPrefix(f, dir+"/")
		}
		nested := false
		for _, d := range dirs {
			if d != dir && (dir == "." || strings.HasPrefix(d, dir+"/")) && strings.HasPrefix(f, d+"/") {
				nested = true
				break
			}
		}
		if !nested {
			own = append(own, rel)
		}
	}
	return own
}

// writeZip writes the module zip of the files (relative to dir) and the
// extra ones to name, every path prefixed with prefix+"/", and returns how
// many files it holds. It refuses what the go command would refuse: two
// paths that differ only in case, and more than 500 MB in all.
func writeZip(name, prefix, dir string, files []string, extra map[string][]byte) (int, error) {
	const maxSize = 500 << 20
	f, err := os.Create(name)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	zw := zip.NewWriter(f)
	seen := map[string]string{}
	var total int64
	add := func(rel string, data []byte) error {
		if prev, ok := seen[strings.ToLower(rel)]; ok {
			return fmt.Errorf("%s and %s differ only in case", prev, rel)
		}
		seen[strings.ToLower(rel)] = rel
		if total += int64(len(data)); total > maxSize {
			return fmt.Errorf("more than %d bytes of files", maxSize)
		}
		w, err := zw.Create(prefix + "/" + rel)
		if err != nil {
			return err
		}
		_, err = w.Write(data)
		return err
	}
	for _, rel := range files {
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(rel)))
		if err != nil {
			return 0, err
		}
		if err := add(rel, data); err != nil {
			return 0, err
		}
	}
	for rel, data := range extra {
		if err := add(rel, data); err != nil {
			return 0, err
		}
	}
	if err := zw.Close(); err != nil {
		return 0, err
	}
	return len(files) + len(extra), f.Close()
}

// modulePath returns the path in a go.mod's module directive.
func modulePath(gomod []byte) (string, error) {
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if i := strings.Index(line, "//"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if rest, ok := strings.CutPrefix(line, "module"); ok && rest != "" && (rest[0] == ' ' || rest[0] == '\t') {
			p := strings.Trim(strings.TrimSpace(rest), "\"`")
			if p == "" {
				break
			}
			return p, nil
		}
	}
	return "", errors.New("no module directive")
}

// escape escapes a module path or version for a proxy's file names: each
// upper-case letter becomes '!' followed by its lower case
// (github.com/PowerDNS/lmdb-go is github.com/!power!d!n!s/lmdb-go).
func escape(s string) (string, error) {
	var b strings.Builder
	for _, r := range s {
		switch {
		case r == '!' || r >= 0x80:
			return "", fmt.Errorf("%q: cannot escape %q", s, r)
		case 'A' <= r && r <= 'Z':
			b.WriteByte('!')
			b.WriteRune(r + 'a' - 'A')
		default:
			b.WriteRune(r)
		}
	}
	return b.String(), nil
}
