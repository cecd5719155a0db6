package console_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/console"
	"github.com/payrecon/payrecon/repo/postgres"
)

// TestBytesThatAreNotTextAreRefusedPolitely: a NUL byte or invalid UTF-8 in any query
// parameter of any page (the list's filters and search, the report's period, the statements'
// period, a finding's flash), in its value or its name, is a 400 saying so in the page's
// language, logged at info level at most: never a 500 from PostgreSQL refusing the bytes, and
// never an error line. The same pages with clean values answer as usual.
func TestBytesThatAreNotTextAreRefusedPolitely(t *testing.T) {
	f := newFixture(t)
	var logs bytes.Buffer
	cfg, err := console.FromSettings(consoleSettings(), shanghai, zerolog.New(&logs))
	must(t, err)
	cfg.Now = func() time.Time { return base.Add(6 * time.Hour) }
	h := console.New(cfg, postgres.NewReview(asReviewer(t, f.db)))
	f.h = h

	// Each route with X where the bad bytes go, and the status the clean value "x" gets.
	routes := []struct {
		name, path string
		clean      int
	}{
		{"list: merchant search", "/review/?merchant=X", http.StatusOK},
		{"list: kind", "/review/?kind=X", http.StatusBadRequest}, // "x" is no kind: refused by the form's own check
		{"list: status", "/review/?status=X", http.StatusBadRequest},
		{"list: from", "/review/?from=X&to=2026-11-28", http.StatusBadRequest},
		{"list: min", "/review/?min=X", http.StatusBadRequest},
		{"list: a parameter's name", "/review/?X=1", http.StatusOK},
		{"report: from", "/review/report?format=csv&from=X&to=2026-11-28", http.StatusBadRequest},
		{"report: format", "/review/report?format=X&from=2026-11-22&to=2026-11-28", http.StatusBadRequest},
		{"statements: from", "/review/statements?from=X&to=2026-11-28", http.StatusBadRequest},
		{"statements: to", "/review/statements?from=2026-11-22&to=X", http.StatusBadRequest},
		{"finding: done", findingPath(f.amount) + "?done=X", http.StatusOK},
	}
	bad := map[string]string{
		"NUL":                      "%00",
		"NUL inside a word":        "ORD%00-1001",
		"lone 0xff":                "%ff",
		"overlong slash":           "%c0%af",
		"overlong NUL":             "%e0%80%80",
		"UTF-16 surrogate":         "%ed%a0%80",
		"cut-off Chinese":          "%e6%94",
		"valid Chinese, then 0xff": "%e6%94%af%ff",
	}
	wantMsg := map[string]string{"en": "not text (a NUL byte or invalid UTF-8)", "zh": "空字节或无效的 UTF-8 编码"}
	for _, rt := range routes {
		// The clean value first: the route is live, so a 400 below is the bytes' doing.
		if w := f.do(t, request{method: "GET", path: strings.Replace(rt.path, "X", "x", 1), peer: trusted, who: ann}); w.Code != rt.clean {
			t.Errorf("%s with a clean value: HTTP %d, want %d\n%s", rt.name, w.Code, rt.clean, w.Body.String())
		}
		for what, b := range bad {
			for lang, msg := range wantMsg {
				t.Run(rt.name+"/"+what+"/"+lang, func(t *testing.T) {
					logs.Reset()
					path := strings.Replace(rt.path, "X", b, 1)
					w := f.do(t, request{method: "GET", path: path, peer: trusted, who: ann, lang: lang})
					if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), msg) {
						t.Errorf("GET %s: HTTP %d %q, want 400 saying %q", path, w.Code, w.Body.String(), msg)
					}
					for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
						if strings.Contains(line, `"level":"error"`) || strings.Contains(line, `"level":"warn"`) {
							t.Errorf("GET %s logged above info: %s", path, line)
						}
					}
					if !strings.Contains(logs.String(), `"level":"info"`) || !strings.Contains(logs.String(), "not text refused") {
						t.Errorf("GET %s: no info line saying why it was refused: %s", path, logs.String())
					}
				})
			}
		}
	}
}

// TestFormFieldsThatAreNotTextAreRefusedPolitely: a posted note or resolution with a NUL
// byte or invalid UTF-8 is the same polite 400 as a query, and no move is made.
func TestFormFieldsThatAreNotTextAreRefusedPolitely(t *testing.T) {
	f := newFixture(t)
	for _, field := range []string{"note", "resolution", "version"} {
		for what, b := range map[string]string{"NUL": "a\x00b", "invalid UTF-8": "a\xffb"} {
			t.Run(field+"/"+what, func(t *testing.T) {
				form := map[string]string{"csrf": f.tokenFor(t, ann), "version": "1", "resolution": "accepted", "note": "fine"}
				form[field] = b
				w := f.do(t, request{method: "POST", path: actionPath(f.amount, "resolve"), peer: trusted, who: ann, form: form})
				if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "not text") {
					t.Fatalf("HTTP %d %q, want 400 saying the form is not text", w.Code, w.Body.String())
				}
				var n int
				must(t, f.db.Get(&n, `SELECT count(*) FROM reconcile_mismatch_audit WHERE mismatch_id = $1`, f.amount))
				if n != 0 {
					t.Fatalf("a refused form made %d moves", n)
				}
			})
		}
	}
}
