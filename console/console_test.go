package console_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"

	"github.com/payrecon/payrecon/config"
)

const (
	trusted   = "127.0.0.1:40001"
	trusted6  = "[::1]:40002"
	untrusted = "192.0.2.10:40003" // a pod on the cluster network, not the sidecar
)

func consoleSettings() config.Console {
	return config.Console{IdentityHeader: "X-Forwarded-Email",
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")},
		Reviewers:      []string{ann, bob}, Approvers: []string{cfo, "*@audit.example.com"}}
}

func urlQuery(s string) string             { return url.QueryEscape(s) }
func findingPath(id int64) string          { return fmt.Sprintf("/review/findings/%d", id) }
func actionPath(id int64, a string) string { return fmt.Sprintf("/review/findings/%d/%s", id, a) }

// TestEveryPageNeedsATrustedIdentity: each page, without an identity, from an untrusted peer,
// as someone on neither list, and as a reviewer from the sidecar (IPv4 and IPv6 loopback).
func TestEveryPageNeedsATrustedIdentity(t *testing.T) {
	f := newFixture(t)
	pages := map[string]string{
		"list":          "/review/",
		"list filtered": "/review/?status=OPEN&kind=AMOUNT_MISMATCH&platform=alipay&merchant=2021000000000001&from=2026-11-28&to=2026-11-28&min=1&max=1000000&sort=at_stake&dir=asc",
		"finding":       findingPath(f.amount),
		"report csv":    "/review/report?from=2026-11-22&to=2026-11-28&format=csv",
		"report xlsx":   "/review/report?from=2026-11-22&to=2026-11-28&format=xlsx",
		"report html":   "/review/report?from=2026-11-22&to=2026-11-28&format=html",
		"statements":    "/review/statements?from=2026-11-22&to=2026-11-28",
	}
	cases := []struct {
		name, peer, who string
		want            int
	}{
		{"no identity from the sidecar", trusted, "", http.StatusUnauthorized},
		{"identity from an untrusted peer", untrusted, cfo, http.StatusUnauthorized},
		{"identity from an untrusted IPv6 peer", "[2001:db8::5]:4000", cfo, http.StatusUnauthorized},
		{"signed in but not listed", trusted, eve, http.StatusForbidden},
		{"reviewer via IPv4 loopback", trusted, ann, http.StatusOK},
		{"approver by domain via IPv6 loopback", trusted6, aud, http.StatusOK},
	}
	for page, path := range pages {
		for _, c := range cases {
			t.Run(page+"/"+c.name, func(t *testing.T) {
				w := f.do(t, request{method: "GET", path: path, peer: c.peer, who: c.who})
				if w.Code != c.want {
					t.Fatalf("GET %s: HTTP %d, want %d\n%s", path, w.Code, c.want, w.Body.String())
				}
				if c.want != http.StatusOK && strings.Contains(w.Body.String(), "ORD-1001") {
					t.Errorf("a refused request saw a finding")
				}
				if w.Header().Get("Cache-Control") != "no-store" || !strings.Contains(w.Header().Get("Content-Security-Policy"), "default-src 'none'") {
					t.Errorf("security headers missing: %v", w.Header())
				}
			})
		}
	}
}

// TestEveryActionNeedsIdentityAndToken: each POST without an identity, from an untrusted
// peer, without a token, with another person's token, and with the right one.
func TestEveryActionNeedsIdentityAndToken(t *testing.T) {
	f := newFixture(t)
	annTok, bobTok := f.token(t, ann, f.amount), f.token(t, bob, f.amount)
	type step struct {
		action string
		who    string
		form   map[string]string
	}
	// The happy path through every action: ann acknowledges and proposes, cfo rejects, ann
	// proposes again, kim (an approver by domain) approves.
	happy := []step{
		{"acknowledge", ann, map[string]string{"version": "1", "note": "looking"}},
		{"resolve", ann, map[string]string{"version": "1", "resolution": "refunded", "note": "refund 100"}},
		{"reject", cfo, map[string]string{"version": "1", "note": "refund the buyer the whole 100 first"}},
		{"resolve", ann, map[string]string{"version": "1", "resolution": "refunded", "note": "refunded 100"}},
		{"approve", aud, map[string]string{"version": "1", "note": "checked the refund"}},
	}
	for _, s := range happy {
		path := actionPath(f.amount, s.action)
		tok := f.tokenFor(t, s.who)
		refusals := []struct {
			name, peer, who, token string
			want                   int
		}{
			{"no identity", trusted, "", tok, http.StatusUnauthorized},
			{"untrusted peer", untrusted, s.who, tok, http.StatusUnauthorized},
			{"no token", trusted, s.who, "", http.StatusForbidden},
			{"another person's token", trusted, s.who, map[bool]string{true: bobTok, false: annTok}[s.who == ann], http.StatusForbidden},
			{"not listed", trusted, eve, tok, http.StatusForbidden},
		}
		for _, r := range refusals {
			form := copyForm(s.form)
			if r.token != "" {
				form["csrf"] = r.token
			}
			w := f.do(t, request{method: "POST", path: path, peer: r.peer, who: r.who, form: form})
			if w.Code != r.want {
				t.Fatalf("%s by %s, %s: HTTP %d, want %d\n%s", s.action, s.who, r.name, w.Code, r.want, w.Body.String())
			}
		}
		var n int
		must(t, f.db.Get(&n, `SELECT count(*) FROM reconcile_mismatch_audit WHERE mismatch_id = $1`, f.amount))
		form := copyForm(s.form)
		form["csrf"] = tok
		w := f.do(t, request{method: "POST", path: path, peer: trusted, who: s.who, form: form})
		if w.Code != http.StatusSeeOther || w.Header().Get("Location") != findingPath(f.amount)+"?done="+auditAction(s) {
			t.Fatalf("%s by %s: HTTP %d to %q, want 303 to the finding\n%s", s.action, s.who, w.Code, w.Header().Get("Location"), w.Body.String())
		}
		var m int
		must(t, f.db.Get(&m, `SELECT count(*) FROM reconcile_mismatch_audit WHERE mismatch_id = $1`, f.amount))
		if m != n+1 {
			t.Fatalf("%s: the refused posts or the accepted one wrote %d audit rows, want exactly 1", s.action, m-n)
		}
	}
	var st, by, approved string
	must(t, f.db.QueryRow(`SELECT review_status, resolved_by, approved_by FROM reconcile_mismatches WHERE id = $1`, f.amount).Scan(&st, &by, &approved))
	if st != "RESOLVED" || by != ann || approved != aud {
		t.Errorf("after the happy path: %s by %s approved by %s", st, by, approved)
	}
	w := f.do(t, request{method: "GET", path: findingPath(f.amount), peer: trusted, who: ann})
	for _, want := range []string{"acknowledged", "proposed", "rejected", "approved", ann, cfo, aud, "refund the buyer the whole 100 first"} {
		if !strings.Contains(w.Body.String(), want) {
			t.Errorf("audit history lacks %q", want)
		}
	}
}

func auditAction(s struct {
	action string
	who    string
	form   map[string]string
}) string {
	if s.action == "resolve" && s.form["resolution"] == "refunded" {
		return "propose"
	}
	return s.action
}

func copyForm(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = v
	}
	return out
}

// tokenFor reads who's token from the first finding page that shows them a form.
func (f *fixture) tokenFor(t *testing.T, who string) string {
	t.Helper()
	for _, id := range []int64{f.unknown, f.amount, f.pac} {
		w := f.do(t, request{method: "GET", path: findingPath(id), peer: trusted, who: who})
		if m := csrfRe.FindStringSubmatch(w.Body.String()); m != nil {
			return m[1]
		}
	}
	t.Fatalf("no page shows %s a form", who)
	return ""
}

// TestForgedForwardingIsNotTrusted: only the TCP peer counts. An untrusted caller naming a
// loopback address in X-Forwarded-For or X-Real-IP is still 401, and so is a trusted peer
// sending two identities (which of them would be the person?).
func TestForgedForwardingIsNotTrusted(t *testing.T) {
	f := newFixture(t)
	for _, c := range []struct {
		name   string
		peer   string
		header map[string][]string
	}{
		{"X-Forwarded-For loopback", untrusted, map[string][]string{"X-Forwarded-Email": {cfo}, "X-Forwarded-For": {"127.0.0.1"}}},
		{"X-Real-IP loopback", untrusted, map[string][]string{"X-Forwarded-Email": {cfo}, "X-Real-Ip": {"::1"}}},
		{"two identities", trusted, map[string][]string{"X-Forwarded-Email": {ann, cfo}}},
		{"blank identity", trusted, map[string][]string{"X-Forwarded-Email": {"  "}}},
	} {
		r := httptest.NewRequest("GET", "/review/", nil)
		r.RemoteAddr = c.peer
		for k, vs := range c.header {
			for _, v := range vs {
				r.Header.Add(k, v)
			}
		}
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, r)
		if w.Code != http.StatusUnauthorized {
			t.Errorf("%s: HTTP %d, want 401", c.name, w.Code)
		}
	}
}
