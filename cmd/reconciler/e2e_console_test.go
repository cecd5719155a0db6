package main

import (
	"net/http"
	"os"
	"path/filepath"
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

// e2eConsoleAccounts is the accounts file the console is given: a WeChat Pay service
// provider and an Alipay third-party app with a sub-merchant each, every key, certificate,
// API v3 key and token file of which is absent, as in the console's pod (no key Secret).
const e2eConsoleAccounts = `
alipay:
  - app_id: "2021000000000009"
    private_key_file: /nonexistent/isv.pem
    public_key_file: /nonexistent/isv-alipay.pem
    sub_merchants:
      - auth_app_id: "2021000000000101"
        app_auth_token_file: /nonexistent/2021000000000101.token
wechatpay:
  - sp_mchid: "1900000109"
    serial_no: 3775B6A45ACD588826D15E583A95F5DD00000001
    private_key_file: /nonexistent/sp.pem
    apiv3_key_file: /nonexistent/sp-v3.key
    sub_merchants:
      - sub_mchid: "1900000201"
`

// writeE2EFile writes content to a file of its own and returns its path.
func writeE2EFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestE2EConsoleServesTheReviewAndServeDoesNot: `reconciler console` serves the review
// console to a listed person named by a loopback peer, with /metrics and the probes beside
// it, although the platform keys it was pointed at do not exist (it reads no such setting)
// and neither do the key and token files of its accounts file, of which it reads the
// structure alone: the findings list names a sub-merchant's provider. An accounts file that
// does not parse stops it with exit 2 naming RECONCILER_ACCOUNTS_FILE. `serve` answers 404
// for /review/ on both its ports. Both stop with exit 0 on SIGTERM; `console --help` lists
// the console's settings and no worker's, and `serve --help` none of the console's.
func TestE2EConsoleServesTheReviewAndServeDoesNot(t *testing.T) {
	t.Parallel()
	e := newE2EEnv(t)
	if _, err := e.db.Exec(`INSERT INTO reconcile_mismatches (platform, merchant_id, out_trade_no, kind, platform_amount_minor)
		VALUES ('wechatpay', '1900000201', 'SUB-1', 'UNKNOWN_ORDER', 500)`); err != nil {
		t.Fatal(err)
	}
	accounts := writeE2EFile(t, "accounts.yaml", e2eConsoleAccounts)
	bad := e.run([]string{"RECONCILER_ACCOUNTS_FILE=" + writeE2EFile(t, "accounts.yaml", "wechatpay: [")}, "console")
	bad.expect(t, 2)
	if msg := bad.stderr.String(); !strings.Contains(msg, "RECONCILER_ACCOUNTS_FILE") || !strings.Contains(msg, "does not parse") {
		t.Errorf("a console given an accounts file that does not parse says:\n%s", msg)
	}
	serve, base := e.startServe("RECONCILER_REVIEWERS=ann@example.com")
	cons, consoleURL := e.startConsole("RECONCILER_REVIEWERS=ann@example.com",
		"RECONCILER_ACCOUNTS_FILE="+accounts, "RECONCILER_ALIPAY_PRIVATE_KEY_FILE=/nonexistent/key.pem")
	get := func(url, who string) (int, string) { return getAs(t, url, who) }
	for _, c := range []struct {
		url, who string
		want     int
		body     string
	}{
		{consoleURL + "/review/", "ann@example.com", http.StatusOK, "ann@example.com"},
		{consoleURL + "/review/?provider=1900000109", "ann@example.com", http.StatusOK, "via provider 1900000109"},
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
	for _, want := range []string{"--admin-listen", "--reviewers", "--database-url", "--accounts-file"} {
		if !strings.Contains(out, want) {
			t.Errorf("console --help lacks %s:\n%s", want, out)
		}
	}
	for _, not := range []string{"--listen ", "--redis-url", "--alipay-", "--wechatpay-", "--schedule"} {
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
