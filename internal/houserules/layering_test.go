package houserules

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// importMap is docs/architecture.md's map read by readImportMap: per folder, what it may
// import ("*": everything but its except list). A folder (and its sub-folders, unless listed
// apart) may also import its own sub-folders.
type importMap struct {
	allowed map[string][]string
	except  map[string][]string
}

// readImportMap reads the table under "## The map" in docs/architecture.md: the first cell a
// folder in backticks, the last what it may import. That cell allows every backticked folder
// of the map it names (other backticked words, `golang.org/x/text` or `ParseYuan`, are not
// folders of the map and allow nothing); "everything" allows all, and the backticked folders
// after "but" are the exceptions. The table is the one copy: a change to it is a change to
// the rule.
func readImportMap(t *testing.T) importMap {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(repoRoot, "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "\n## The map\n")
	if !ok {
		t.Fatal(`docs/architecture.md has no "## The map" section`)
	}
	table, _, _ = strings.Cut(table, "\n## ")
	cells := map[string]string{}
	var order []string
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		parts := strings.Split(strings.Trim(line, "| "), " | ")
		folder := strings.Trim(parts[0], "`")
		cells[folder] = parts[len(parts)-1]
		order = append(order, folder)
	}
	m := importMap{allowed: map[string][]string{}, except: map[string][]string{}}
	for _, folder := range order {
		cell := cells[folder]
		if rest, ok := strings.CutPrefix(cell, "everything"); ok {
			m.allowed[folder] = []string{"*"}
			m.except[folder] = backticked(rest) // a folder or a folder's parent (`cmd`)
			continue
		}
		m.allowed[folder] = []string{} // on the map, even allowing nothing of ours
		for _, w := range backticked(cell) {
			if _, ok := cells[w]; ok {
				m.allowed[folder] = append(m.allowed[folder], w)
			}
		}
	}
	return m
}

// backticked is the words in backticks in s.
func backticked(s string) []string {
	var out []string
	parts := strings.Split(s, "`")
	for i := 1; i < len(parts); i += 2 {
		out = append(out, parts[i])
	}
	return out
}

// rule finds the entry of the map that governs dir: the longest listed prefix.
func (m importMap) rule(dir string) (string, bool) {
	best := ""
	for k := range m.allowed {
		if (dir == k || strings.HasPrefix(dir, k+"/")) && len(k) > len(best) {
			best = k
		}
	}
	return best, best != ""
}

func under(p, folder string) bool { return p == folder || strings.HasPrefix(p, folder+"/") }

func TestEveryFolderImportsOnlyWhatTheMapAllows(t *testing.T) {
	m := readImportMap(t)
	imports, err := Imports(repoRoot)
	readEnough(t, err, len(imports), 15, "folders")
	for dir, imps := range imports {
		key, ok := m.rule(dir)
		if !ok {
			t.Errorf("%s is not on the map: add it to docs/architecture.md's table", dir)
			continue
		}
		for _, imp := range imps {
			if !m.may(key, imp) {
				t.Errorf("%s imports %s, which the map does not allow it", dir, imp)
			}
		}
	}
}

func (m importMap) may(key, imp string) bool {
	if under(imp, key) {
		return true // its own sub-folders
	}
	for _, no := range m.except[key] {
		if under(imp, no) {
			return false
		}
	}
	for _, ok := range m.allowed[key] {
		if ok == "*" || under(imp, ok) {
			return true
		}
	}
	return false
}

// TestMayReadsTheMap pins how the table reads: a listed folder covers its sub-folders,
// "everything but" keeps its exceptions out, a sub-folder listed apart has its own rule, and
// nothing else gets through.
func TestMayReadsTheMap(t *testing.T) {
	m := readImportMap(t)
	cases := []struct {
		key, imp string
		want     bool
	}{
		{"reconcile", "repo", false},
		{"platformclient", "platformclient/alipay", true},
		{"platformclient", "reconcile", true},
		{"platformclient", "repo", false},
		{"httpapi", "platformclient/wechatpay", true},
		{"httpapi", "worker", false},
		{"worker", "httpapi", true},
		{"worker", "cmd/reconciler", false},
		{"demo", "worker", true},
		{"config", "repo", false},
		{"config", "reconcile", true},
		{"platformclient", "statement", false},
		{"sandbox", "statement", true},
		{"sandbox", "repo/postgres", false},
		{"platformclient", "sandbox", false},
		{"repo/repotest", "config", true},
		{"repo/postgres", "config", false},
		{"repo/redis", "repo/postgres", false},
		{"repo/postgres", "repo/redis", false},
		{"console", "platformclient", false},
		{"statement", "repo/postgres", false},
		{"cmd/reconciler", "demo", true},
	}
	for _, tc := range cases {
		if got := m.may(tc.key, tc.imp); got != tc.want {
			t.Errorf("may(%q, %q) = %v, want %v", tc.key, tc.imp, got, tc.want)
		}
	}
}
