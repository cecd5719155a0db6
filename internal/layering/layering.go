// Package layering holds the module's folders to the imports docs/architecture.md allows
// them: the domain imports no adapter, no package imports the binary, and each new folder
// stays on its side of the map.
package layering

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"sort"
	"strings"
)

// Module is the module path every internal import starts with.
const Module = "github.com/payrecon/payrecon"

// Imports reads the non-test Go files under root and returns, per folder (relative to root,
// slash-separated), the module's own packages it imports (relative to the module).
func Imports(root string) (map[string][]string, error) {
	seen := map[string]map[string]bool{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
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
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		dir, _ := filepath.Rel(root, filepath.Dir(path))
		dir = filepath.ToSlash(dir)
		if seen[dir] == nil {
			seen[dir] = map[string]bool{}
		}
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if rest, ok := strings.CutPrefix(p, Module+"/"); ok {
				seen[dir][rest] = true
			}
		}
		return nil
	})
	out := map[string][]string{}
	for dir, imps := range seen {
		list := []string{}
		for p := range imps {
			list = append(list, p)
		}
		sort.Strings(list)
		out[dir] = list
	}
	return out, err
}
