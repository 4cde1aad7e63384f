// Package doccheck finds documentation that speaks of what a package's
// users cannot see: unexported identifiers, internal packages and source
// file names. The packages' tests run it, so that their godoc keeps to
// what a caller can use.
package doccheck

import (
	"fmt"
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"os"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// Test fails t with every problem Problems finds in the package in dir.
func Test(t testing.TB, dir string) {
	t.Helper()
	problems, err := Problems(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Errorf("the documentation names what callers cannot see:\n%s", strings.Join(problems, "\n"))
	}
}

// Problems parses the package in dir (its non-test files, for every
// platform) and returns one line for each place where the documentation
// of its exported API names something unexported. A name counts when it
// cannot be read as plain English: written as Type.name or pkg.Name of an
// internal package, called as name(...), or spelled like code (camelCase,
// snake_case, digits); a file name (x.go) and an internal/ path count too.
func Problems(dir string) ([]string, error) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []*ast.File
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, dir+"/"+name, nil, parser.ParseComments)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("doccheck: no Go files in %s", dir)
	}
	hidden := collect(files)

	// doc.NewFromFiles drops unexported declarations, fields and methods
	// from the AST it keeps, so what is left is what go doc shows.
	pkg, err := doc.NewFromFiles(fset, files, "example.com/"+files[0].Name.Name)
	if err != nil {
		return nil, err
	}
	c := checker{hidden: hidden}
	c.text("package doc", pkg.Doc)
	c.values("", pkg.Consts)
	c.values("", pkg.Vars)
	c.funcs("", pkg.Funcs)
	for _, t := range pkg.Types {
		c.text(t.Name, t.Doc)
		c.decl(t.Name, t.Decl)
		c.values(t.Name, t.Consts)
		c.values(t.Name, t.Vars)
		c.funcs("", t.Funcs)
		c.funcs(t.Name+".", t.Methods)
	}
	sort.Strings(c.problems)
	return c.problems, nil
}

// names is what a package hides from its users.
type names struct {
	unexported map[string]bool // top-level names, methods and fields
	members    map[string]bool // "Type.name" for unexported methods and fields
	exported   map[string]bool // exported type names, which qualify members
	internal   map[string]bool // names of the internal packages imported
}

func collect(files []*ast.File) names {
	n := names{map[string]bool{}, map[string]bool{}, map[string]bool{}, map[string]bool{}}
	field := func(typ string, fl *ast.FieldList) {
		if fl == nil {
			return
		}
		for _, f := range fl.List {
			for _, id := range f.Names {
				if !id.IsExported() && id.Name != "_" {
					n.unexported[id.Name] = true
					n.members[typ+"."+id.Name] = true
				}
			}
		}
	}
	for _, f := range files {
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			if strings.Contains(p, "/internal/") || strings.HasPrefix(p, "internal/") {
				name := path.Base(p)
				if imp.Name != nil {
					name = imp.Name.Name
				}
				n.internal[name] = true
			}
		}
		for _, d := range f.Decls {
			switch d := d.(type) {
			case *ast.FuncDecl:
				if d.Recv != nil && len(d.Recv.List) == 1 {
					recv := recvName(d.Recv.List[0].Type)
					if !d.Name.IsExported() {
						n.unexported[d.Name.Name] = true
						n.members[recv+"."+d.Name.Name] = true
					}
					continue
				}
				if !d.Name.IsExported() && d.Name.Name != "init" && d.Name.Name != "main" {
					n.unexported[d.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, s := range d.Specs {
					switch s := s.(type) {
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							n.exported[s.Name.Name] = true
						} else {
							n.unexported[s.Name.Name] = true
						}
						switch t := s.Type.(type) {
						case *ast.StructType:
							field(s.Name.Name, t.Fields)
						case *ast.InterfaceType:
							field(s.Name.Name, t.Methods)
						}
					case *ast.ValueSpec:
						for _, id := range s.Names {
							if !id.IsExported() && id.Name != "_" {
								n.unexported[id.Name] = true
							}
						}
					}
				}
			}
		}
	}
	return n
}

func recvName(e ast.Expr) string {
	for {
		switch t := e.(type) {
		case *ast.StarExpr:
			e = t.X
		case *ast.IndexExpr:
			e = t.X
		case *ast.IndexListExpr:
			e = t.X
		case *ast.Ident:
			return t.Name
		default:
			return ""
		}
	}
}

type checker struct {
	hidden   names
	problems []string
}

func (c *checker) funcs(prefix string, fs []*doc.Func) {
	for _, f := range fs {
		c.text(prefix+f.Name, f.Doc)
	}
}

func (c *checker) values(owner string, vs []*doc.Value) {
	for _, v := range vs {
		where := strings.Join(v.Names, ", ")
		if owner != "" {
			where = owner + " " + where
		}
		c.text(where, v.Doc)
		c.decl(where, v.Decl)
	}
}

// decl checks the comments inside a declaration that go doc prints with
// it: those of struct fields, interface methods and grouped specs.
func (c *checker) decl(where string, d *ast.GenDecl) {
	if d == nil {
		return
	}
	ast.Inspect(d, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.Field:
			c.group(where, n.Doc)
			c.group(where, n.Comment)
		case *ast.ValueSpec:
			c.group(where, n.Doc)
			c.group(where, n.Comment)
		case *ast.TypeSpec:
			c.group(where, n.Doc)
			c.group(where, n.Comment)
		}
		return true
	})
}

func (c *checker) group(where string, g *ast.CommentGroup) {
	if g != nil {
		c.text(where, g.Text())
	}
}

var (
	fileName  = regexp.MustCompile(`\b[A-Za-z0-9_]+\.go\b`)
	internal  = regexp.MustCompile(`\binternal/[A-Za-z0-9_/]+`)
	qualified = regexp.MustCompile(`\b([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)`)
	word      = regexp.MustCompile(`\b[A-Za-z_][A-Za-z0-9_]*(\()?`)
	// Abbreviations whose letters would read as a qualified name.
	abbrev = strings.NewReplacer("e.g.", "", "i.e.", "", "E.g.", "", "I.e.", "", "vs.", "", "etc.", "")
)

func (c *checker) text(where, text string) {
	text = abbrev.Replace(text)
	report := func(what, why string) {
		c.problems = append(c.problems, fmt.Sprintf("%s: %q %s", where, what, why))
	}
	for _, m := range fileName.FindAllString(text, -1) {
		report(m, "is a source file name")
	}
	for _, m := range internal.FindAllString(text, -1) {
		report(m, "is an internal package")
	}
	for _, m := range qualified.FindAllStringSubmatch(text, -1) {
		switch {
		case c.hidden.internal[m[1]]:
			report(m[0], "is in an internal package")
		case c.hidden.members[m[0]]:
			report(m[0], "is unexported")
		case c.hidden.exported[m[1]] && c.hidden.unexported[m[2]]:
			report(m[0], "names an unexported member")
		}
	}
	for _, idx := range word.FindAllStringSubmatchIndex(text, -1) {
		w := text[idx[2*0]:idx[1]]
		called := idx[2] >= 0
		if called {
			w = w[:len(w)-1]
		}
		if idx[0] > 0 && text[idx[0]-1] == '.' {
			continue // the member of a qualified name, checked above
		}
		if !c.hidden.unexported[w] {
			continue
		}
		if called || codeLike(w) {
			report(w, "is unexported")
		}
	}
}

// codeLike reports whether w is spelled as no English word is: with an
// upper-case letter after the first, an underscore or a digit.
func codeLike(w string) bool {
	for i, r := range w {
		if r == '_' || unicode.IsDigit(r) || (i > 0 && unicode.IsUpper(r)) {
			return true
		}
	}
	return false
}
