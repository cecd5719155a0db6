package houserules

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path"
	"sort"
	"strings"
)

// Module is the module path every internal import starts with.
const Module = "github.com/payrecon/payrecon"

// Imports reads the non-test Go files under root and returns, per folder (relative to root,
// slash-separated), the module's own packages it imports (relative to the module).
func Imports(root string) (map[string][]string, error) {
	seen := map[string]map[string]bool{}
	err := walkSource(root, parser.ImportsOnly, func(rel string, _ *token.FileSet, f *ast.File) {
		dir := path.Dir(rel)
		if seen[dir] == nil {
			seen[dir] = map[string]bool{}
		}
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if rest, ok := strings.CutPrefix(p, Module+"/"); ok {
				seen[dir][rest] = true
			}
		}
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
