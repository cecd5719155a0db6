package houserules

import (
	"strings"
	"testing"
)

// allowed is docs/architecture.md's "may import" column for the module's own packages: a
// folder (and its sub-folders, unless listed apart) may import these and its own sub-folders.
// "*" allows everything but what except names.
var allowed = map[string][]string{
	"reconcile":              {},
	"reconcile/identity":     {},
	"config":                 {"reconcile"},
	"platformclient":         {"reconcile"},
	"platformclient/sandbox": {"reconcile", "platformclient", "statement"},
	"repo":                   {"reconcile", "statement"},
	"repo/repotest":          {"repo", "config"},
	"relay":                  {"reconcile", "repo", "config"},
	"statement":              {"reconcile"},
	"statementrun":           {"reconcile", "repo", "statement", "platformclient"},
	"render":                 {"reconcile", "repo"},
	"httpapi":                {"reconcile", "platformclient"},
	"console":                {"reconcile", "repo", "render", "config", "platformclient"},
	"metrics":                {"reconcile", "platformclient", "relay"},
	"worker":                 {"*"},
	"demo":                   {"*"},
	"cmd":                    {"*"},
	"internal/faultproxy":    {},
	"internal/houserules":    {},
	"internal/sim":           {"reconcile", "repo"},
	"deploy":                 {},
}

// except lists what a "*" folder still may not import.
var except = map[string][]string{
	"worker": {"cmd", "demo"},
	"demo":   {"cmd"},
}

// rule finds the entry of the map that governs dir: the longest listed prefix.
func rule(dir string) (string, bool) {
	best := ""
	for k := range allowed {
		if (dir == k || strings.HasPrefix(dir, k+"/")) && len(k) > len(best) {
			best = k
		}
	}
	return best, best != ""
}

func under(p, folder string) bool { return p == folder || strings.HasPrefix(p, folder+"/") }

func TestEveryFolderImportsOnlyWhatTheMapAllows(t *testing.T) {
	imports, err := Imports(repoRoot)
	readEnough(t, err, len(imports), 15, "folders")
	for dir, imps := range imports {
		key, ok := rule(dir)
		if !ok {
			t.Errorf("%s is not on the map: add it to docs/architecture.md and to this test", dir)
			continue
		}
		for _, imp := range imps {
			if !may(key, imp) {
				t.Errorf("%s imports %s, which the map does not allow it", dir, imp)
			}
		}
	}
}

func may(key, imp string) bool {
	if under(imp, key) {
		return true // its own sub-folders
	}
	for _, no := range except[key] {
		if under(imp, no) {
			return false
		}
	}
	for _, ok := range allowed[key] {
		if ok == "*" || under(imp, ok) {
			return true
		}
	}
	return false
}

// TestMayReadsTheMap pins how a rule reads: a listed folder covers its sub-folders, "*" is
// limited by except, and nothing else gets through.
func TestMayReadsTheMap(t *testing.T) {
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
	}
	for _, tc := range cases {
		if got := may(tc.key, tc.imp); got != tc.want {
			t.Errorf("may(%q, %q) = %v, want %v", tc.key, tc.imp, got, tc.want)
		}
	}
}
