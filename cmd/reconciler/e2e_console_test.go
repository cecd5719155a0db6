package main

import (
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// startConsole starts `reconciler console` and waits for /readyz; it returns its port's base
// URL.
func (e *e2eEnv) startConsole(extra ...string) (*e2eProc, string) {
	e.t.Helper()
	addr := e2eFreeAddr(e.t)
	p := e.start(append([]string{"RECONCILER_ADMIN_LISTEN=" + addr}, extra...), "console")
	base := "http://" + addr
	e.waitReady(p, "console", base)
	return p, base
}

// TestE2EConsoleServesTheReviewAndServeDoesNot: `reconciler console` serves the review
// console to a listed person named by a loopback peer, with /metrics and the probes beside
// it, although the platform keys and the accounts file it was pointed at do not exist (it
// reads no such setting); `serve` answers 404 for /review/ on both its ports. Both stop with
// exit 0 on SIGTERM; `console --help` lists the console's settings and no worker's, and
// `serve --help` none of the console's.
func TestE2EConsoleServesTheReviewAndServeDoesNot(t *testing.T) {
	t.Parallel()
	e := newE2EEnv(t)
	serve, base := e.startServe("RECONCILER_REVIEWERS=ann@example.com")
	cons, consoleURL := e.startConsole("RECONCILER_REVIEWERS=ann@example.com",
		"RECONCILER_ACCOUNTS_FILE=/nonexistent/accounts.yaml", "RECONCILER_ALIPAY_PRIVATE_KEY_FILE=/nonexistent/key.pem")
	get := func(url, who string) (int, string) { return getAs(t, url, who) }
	for _, c := range []struct {
		url, who string
		want     int
		body     string
	}{
		{consoleURL + "/review/", "ann@example.com", http.StatusOK, "ann@example.com"},
		{consoleURL + "/review/", "", http.StatusUnauthorized, ""},
		{consoleURL + "/metrics", "", http.StatusOK, "go_goroutines"},
		{consoleURL + "/healthz", "", http.StatusOK, "ok"},
		{serve.admin + "/review/", "ann@example.com", http.StatusNotFound, ""},
		{base + "/review/", "ann@example.com", http.StatusNotFound, ""},
	} {
		if code, body := get(c.url, c.who); code != c.want || !strings.Contains(body, c.body) {
			t.Errorf("GET %s as %q: %d, want %d with %q\n%s", c.url, c.who, code, c.want, c.body, e2eTail(body, 2000))
		}
	}
	for _, p := range []*e2eProc{cons, serve} {
		p.signal(t, syscall.SIGTERM)
		p.wait(t, 30*time.Second)
		p.expect(t, 0)
	}

	help := e.run(nil, "console", "--help")
	help.expect(t, 0)
	out := help.stderr.String()
	for _, want := range []string{"--admin-listen", "--reviewers", "--database-url"} {
		if !strings.Contains(out, want) {
			t.Errorf("console --help lacks %s:\n%s", want, out)
		}
	}
	for _, not := range []string{"--listen ", "--redis-url", "--accounts-file", "--alipay-", "--schedule"} {
		if strings.Contains(out, not) {
			t.Errorf("console --help offers %s, a setting it must not take:\n%s", not, out)
		}
	}
	serveHelp := e.run(nil, "serve", "--help")
	serveHelp.expect(t, 0)
	for _, not := range []string{"--reviewers", "--approvers", "--admin-csrf-key-file", "--admin-trusted-proxies", "--admin-identity-header"} {
		if strings.Contains(serveHelp.stderr.String(), not) {
			t.Errorf("serve --help offers %s: serve takes no review console setting", not)
		}
	}
}
