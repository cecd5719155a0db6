package console_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/console"
	"github.com/payrecon/payrecon/repo/postgres"
)

var viewerRe = regexp.MustCompile(`<b id="viewer">([^<]*)</b>`)

// TestIdentityIsNormalised: the proxy's header is read through identity.Normalize. Spellings
// of a listed person are that person; a look-alike is someone else (403); what is no address
// (two @, a non-ASCII domain, a trailing dot) is no identity (401); *@domain is that domain
// exactly.
func TestIdentityIsNormalised(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name, header string
		want         int
		as           string // the viewer the page names
	}{
		{"upper case", "ANN@Example.COM", http.StatusOK, ann},
		{"fullwidth", "ＡＮＮ@example.com", http.StatusOK, ann},
		{"zero-width space", "ann@example.com\u200b", http.StatusOK, ann},
		{"BOM and RTL override", "\ufeff\u202eann@example.com", http.StatusOK, ann},
		{"domain approver in upper case", "kim@AUDIT.example.com", http.StatusOK, aud},
		{"Cyrillic а: another person, on no list", "\u0430nn@example.com", http.StatusForbidden, ""},
		{"Cyrillic а in the domain", "ann@ex\u0430mple.com", http.StatusUnauthorized, ""},
		{"two @ ending in the approvers' domain", "eve@evil.com@audit.example.com", http.StatusUnauthorized, ""},
		{"a subdomain of the approvers' domain", "eve@x.audit.example.com", http.StatusForbidden, ""},
		{"a domain ending like the approvers'", "eve@evilaudit.example.com", http.StatusForbidden, ""},
		{"trailing dot", "cfo@example.com.", http.StatusUnauthorized, ""},
		{"no @", "cfo", http.StatusUnauthorized, ""},
		{"only invisible characters", "\u200b\u200d", http.StatusUnauthorized, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := f.do(t, request{method: "GET", path: "/review/", peer: trusted, who: tc.header})
			if w.Code != tc.want {
				t.Fatalf("HTTP %d, want %d\n%s", w.Code, tc.want, w.Body.String())
			}
			if tc.as != "" {
				if m := viewerRe.FindStringSubmatch(w.Body.String()); m == nil || m[1] != tc.as {
					t.Errorf("signed in as %q, want %q", m, tc.as)
				}
			}
			if tc.want == http.StatusForbidden && !strings.Contains(w.Body.String(), `"\u0430nn@example.com"`) && strings.HasPrefix(tc.header, "\u0430") {
				t.Errorf("the refusal does not show the look-alike escaped:\n%s", w.Body.String())
			}
		})
	}
}

// TestNormalisedPersonIsWhatIsStored: the review records and compares the normalised
// address, so another spelling of the proposer is still the proposer.
func TestNormalisedPersonIsWhatIsStored(t *testing.T) {
	f := newFixture(t)
	post := func(who, action string, id int64, form map[string]string) int {
		form["csrf"] = f.tokenFor(t, who)
		return f.do(t, request{method: "POST", path: actionPath(id, action), peer: trusted, who: who, form: form}).Code
	}
	if c := post("ANN@Example.COM\u200b", "acknowledge", f.amount, map[string]string{"version": "1"}); c != http.StatusSeeOther {
		t.Fatalf("ack: HTTP %d", c)
	}
	if c := post("KIM@audit.example.com", "resolve", f.unknown, map[string]string{"version": "1", "resolution": "refunded"}); c != http.StatusSeeOther {
		t.Fatalf("kim proposes: HTTP %d", c)
	}
	if c := post("kim@audit.example.com\u200b", "approve", f.unknown, map[string]string{"version": "1"}); c != http.StatusForbidden {
		t.Errorf("kim approving her own proposal under another spelling: HTTP %d, want 403", c)
	}
	var actors []string
	must(t, f.db.Select(&actors, `SELECT actor FROM reconcile_mismatch_audit ORDER BY id`))
	if strings.Join(actors, ",") != ann+","+aud {
		t.Errorf("audit actors %q, want the normalised %s and %s only", actors, ann, aud)
	}
	var proposer string
	must(t, f.db.Get(&proposer, `SELECT proposed_by FROM reconcile_mismatches WHERE id = $1`, f.unknown))
	if proposer != aud {
		t.Errorf("proposed_by %q, want %q", proposer, aud)
	}
}

// TestListEntriesAreChecked: a list entry that is no address or *@domain stops the console
// from starting, naming the setting and the entry.
func TestListEntriesAreChecked(t *testing.T) {
	for _, tc := range []struct {
		setting   string
		list      []string
		wantEntry string
	}{
		{"RECONCILER_APPROVERS", []string{"cfo@example.com", "*@evil.com@approvers.example.com"}, "*@evil.com@approvers.example.com"},
		{"RECONCILER_APPROVERS", []string{"*@approvers.example.com."}, "approvers.example.com."},
		{"RECONCILER_REVIEWERS", []string{"ann@ex\u0430mple.com"}, `\u0430`},
		{"RECONCILER_REVIEWERS", []string{"ann@example.com", "bob"}, "entry 2"},
	} {
		s := consoleSettings()
		if tc.setting == "RECONCILER_APPROVERS" {
			s.Approvers = tc.list
		} else {
			s.Reviewers = tc.list
		}
		_, err := console.FromSettings(s, shanghai, zerolog.Nop())
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Setting != tc.setting || !strings.Contains(err.Error(), tc.wantEntry) {
			t.Errorf("%s=%q: error %v, want a config error naming %s and %q", tc.setting, tc.list, err, tc.setting, tc.wantEntry)
		}
	}
}

// clock is a console time tests can move.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time            { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *clock) Set(t time.Time)           { c.mu.Lock(); defer c.mu.Unlock(); c.now = t }
func (c *clock) Add(d time.Duration)       { c.Set(c.Now().Add(d)) }
func (c *clock) At(d time.Duration) *clock { c.Set(base.Add(d)); return c }

// TestFormTokensExpire: a form token is good for 12 hours after its page was served and for
// its person only; an older one, one from the future, a tampered one and one of the old
// never-expiring kind are refused with 403 and told to reload, in the reader's language.
func TestFormTokensExpire(t *testing.T) {
	f := newFixture(t)
	key := []byte("0123456789abcdef0123456789abcdef")
	clk := &clock{now: base}
	cfg, err := console.FromSettings(consoleSettings(), shanghai, zerolog.New(zerolog.NewTestWriter(t)))
	must(t, err)
	cfg.CSRFKey, cfg.Now = key, clk.Now
	f.h = console.New(cfg, postgres.NewReview(asReviewer(t, f.db)))

	annTok := f.token(t, ann, f.amount) // issued at base
	bobTok := f.token(t, bob, f.amount)
	clk.Add(time.Second)
	if again := f.token(t, ann, f.amount); again == annTok {
		t.Errorf("a page served a second later carries the same token")
	}
	m := hmac.New(sha256.New, key)
	m.Write([]byte("payrecon review console csrf\x00" + ann))
	oldStyle := base64.RawURLEncoding.EncodeToString(m.Sum(nil))
	tampered := annTok[:len(annTok)-2] + map[bool]string{true: "AA", false: "AB"}[strings.HasSuffix(annTok, "AB")]
	clk.At(2 * time.Minute)
	future := f.token(t, ann, f.amount)

	post := func(tok, lang string) *httptest.ResponseRecorder {
		return f.do(t, request{method: "POST", path: actionPath(f.amount, "acknowledge"), peer: trusted, who: ann, lang: lang,
			form: map[string]string{"version": "1", "csrf": tok}})
	}
	refusals := []struct {
		name  string
		token string
		at    time.Duration // the console's clock, after base
		lang  string
		say   string
	}{
		{"12 h and 1 s old", annTok, 12*time.Hour + time.Second, "", "reload the page"},
		{"12 h and 1 s old, in Chinese", annTok, 12*time.Hour + time.Second, "zh-CN", "刷新页面"},
		{"from 2 minutes in the future", future, 0, "", "reload the page"},
		{"another person's", bobTok, time.Hour, "", "reload the page"},
		{"tampered", tampered, time.Hour, "", "reload the page"},
		{"old-style bare HMAC", oldStyle, time.Hour, "", "reload the page"},
	}
	for _, r := range refusals {
		clk.At(r.at)
		if w := post(r.token, r.lang); w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), r.say) {
			t.Errorf("%s: HTTP %d, want 403 saying %q\n%s", r.name, w.Code, r.say, w.Body.String())
		}
	}
	var n int
	must(t, f.db.Get(&n, `SELECT count(*) FROM reconcile_mismatch_audit`))
	if n != 0 {
		t.Fatalf("refused posts wrote %d audit rows", n)
	}
	clk.At(11 * time.Hour)
	if w := post(annTok, ""); w.Code != http.StatusSeeOther {
		t.Fatalf("an 11-hour-old token of ann's: HTTP %d, want 303\n%s", w.Code, w.Body.String())
	}
}
