// Package houserules holds the repository's Go source to the house rules a reviewer would
// otherwise check by hand: no non-test function over 80 lines, and every folder importing
// only what docs/architecture.md's map allows it.
package houserules

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
)

// walkSource parses every non-test .go file under root (skipping testdata and hidden
// folders) in the given mode and hands each to visit with its path relative to root.
func walkSource(root string, mode parser.Mode, visit func(rel string, fset *token.FileSet, f *ast.File)) error {
	fset := token.NewFileSet()
	return filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, mode)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		visit(filepath.ToSlash(rel), fset, f)
		return nil
	})
}
