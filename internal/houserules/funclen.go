package houserules

import (
	"go/ast"
	"go/parser"
	"go/token"
	"sort"
)

// Limit is the most lines a non-test function may have, its signature and closing brace
// included.
const Limit = 80

// Func is one function (or method) and its length in lines.
type Func struct {
	Name  string // Recv.Name for a method
	File  string // relative to the root
	Line  int
	Lines int
}

// Measure parses every non-test .go file under root (skipping testdata and hidden folders)
// and returns its functions, longest first.
func Measure(root string) ([]Func, error) {
	var out []Func
	err := walkSource(root, parser.SkipObjectResolution, func(rel string, fset *token.FileSet, f *ast.File) {
		for _, decl := range f.Decls {
			if fn, ok := decl.(*ast.FuncDecl); ok && fn.Body != nil {
				start, end := fset.Position(fn.Pos()), fset.Position(fn.End())
				out = append(out, Func{Name: funcName(fn), File: rel, Line: start.Line, Lines: end.Line - start.Line + 1})
			}
		}
	})
	sort.SliceStable(out, func(i, j int) bool { return out[i].Lines > out[j].Lines })
	return out, err
}

func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	t := fn.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if g, ok := t.(*ast.IndexExpr); ok {
		t = g.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fn.Name.Name
	}
	return fn.Name.Name
}
