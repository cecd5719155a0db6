package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/repotest"
	"github.com/payrecon/payrecon/sandbox"
)

// The accounts the multi-account tests play beside the sandbox's defaults: Alipay in
// certificate mode, WeChat Pay on platform certificates only, and a WeChat Pay merchant
// migrating from certificates to the public key. Generated once per test binary.
var (
	e2eAccountsOnce sync.Once
	e2eAccountsSet  sandbox.Accounts
	e2eAccountsErr  error
)

const (
	e2eMigratingMchID = "1900000003"
)

func e2eExtraAccounts(t *testing.T) sandbox.Accounts {
	t.Helper()
	e2eAccountsOnce.Do(func() {
		if e2eAccountsSet, e2eAccountsErr = sandbox.SecondAccounts(2048); e2eAccountsErr != nil {
			return
		}
		var mig sandbox.WechatAccount
		mig, e2eAccountsErr = sandbox.GenerateWechatAccount(e2eMigratingMchID, "wxd678efh567hg6789", sandbox.WechatModeMigrating, 2048)
		e2eAccountsSet.WechatPay = append(e2eAccountsSet.WechatPay, mig)
	})
	if e2eAccountsErr != nil {
		t.Fatal(e2eAccountsErr)
	}
	return e2eAccountsSet
}

// e2eAccount is one merchant account of the multi-account world.
type e2eAccount struct {
	platform reconcile.Platform
	merchant string
	mode     string
}

// newE2EAccountsEnv is a world with five accounts configured only through the accounts
// file: two Alipay apps (public key, certificate) and three WeChat Pay merchants (public key,
// platform certificates, migrating).
func newE2EAccountsEnv(t *testing.T) (*e2eEnv, []e2eAccount, string) {
	t.Helper()
	e, accountsFile := newE2EAccountsWorld(t, e2eExtraAccounts(t), 2000)
	id := e.sb.Identity()
	accounts := []e2eAccount{
		{reconcile.Alipay, id.AlipayAppID, "public key"},
		{reconcile.Alipay, sandbox.SecondAlipayAppID, "certificate"},
		{reconcile.WechatPay, id.WechatMchID, "public key"},
		{reconcile.WechatPay, sandbox.SecondWechatMchID, "platform certificates"},
		{reconcile.WechatPay, e2eMigratingMchID, "migrating"},
	}
	return e, accounts, accountsFile
}

// newE2EAccountsWorld is a world configured only through the accounts file the sandbox
// writes for its default accounts and extra, each with a budget of qps.
func newE2EAccountsWorld(t *testing.T, extra sandbox.Accounts, qps float64) (*e2eEnv, string) {
	t.Helper()
	e := &e2eEnv{t: t, bin: e2eBinary(t), db: repotest.NewDB(t), redis: repotest.NewRedis(t)}
	sb, err := sandbox.New(sandbox.Options{Keys: e2eKeys(t), Accounts: extra})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sb)
	e.sb, e.sbURL = sb, srv.URL
	accountsFile, err := sb.WriteAccountsFile(t.TempDir(), srv.URL, qps)
	if err != nil {
		t.Fatal(err)
	}
	e.base = e.accountsBase(accountsFile, 4)
	t.Cleanup(func() {
		for _, p := range e.procs {
			p.kill()
		}
		for _, p := range e.procs {
			if strings.Contains(p.stderr.String(), "WARNING: DATA RACE") || t.Failed() {
				t.Logf("---- %s (exit %d)\nstdout:\n%s\nstderr:\n%s", p.name, p.exitCode(), e2eTail(p.stdout.String(), 3000), e2eTail(p.stderr.String(), 8000))
			}
			if strings.Contains(p.stderr.String(), "WARNING: DATA RACE") {
				t.Errorf("%s: data race", p.name)
			}
			if key, line := repeatedLogKey(p.stderr.String()); key != "" {
				t.Errorf("%s: a log line names %q twice:\n%s", p.name, key, line)
			}
		}
		sb.Close()
		srv.Close()
	})
	return e, accountsFile
}

// accountsBase is the settings of a world configured only through an accounts file: the
// test's database, Redis claim and budget prefixes, JSON logs.
func (e *e2eEnv) accountsBase(accountsFile string, concurrency int) []string {
	return append(sandbox.AccountsEnv(accountsFile),
		"RECONCILER_DATABASE_URL="+e.db.URL,
		"RECONCILER_REDIS_URL="+e.redis.URL,
		"RECONCILER_CLAIM_PREFIX="+e.redis.Prefix,
		"RECONCILER_RATE_PREFIX="+e.redis.Prefix+"rate:",
		"RECONCILER_LOG_FORMAT=json",
		fmt.Sprintf("RECONCILER_CONCURRENCY=%d", concurrency),
	)
}

// seedPaidFor inserts a PENDING order of one account, paid at that account's platform side.
func (e *e2eEnv) seedPaidFor(a e2eAccount, otn string, amount int64, created time.Time) {
	e.t.Helper()
	e.sb.SetScenario(a.platform, otn, sandbox.Scenario{MerchantID: a.merchant, State: sandbox.StatePaid, AmountMinor: amount})
	repotest.InsertOrder(e.t, e.db, repotest.Order{Platform: string(a.platform), MerchantID: a.merchant, OutTradeNo: otn, AmountMinor: amount,
		Status: "PENDING", CreatedAt: created})
}

// expectPaidOnce checks an order moved to PAID exactly once, under its own account.
func (e *e2eEnv) expectPaidOnce(a e2eAccount, otn string) {
	e.t.Helper()
	r := e.order(a.platform, otn)
	if r.Status != "PAID" || r.PaidEvents != 1 || r.Events != 1 || r.Outbox != 1 {
		e.t.Errorf("%s (%s %s, %s): status %s, %d events (%d PAID), %d outbox rows; want PAID once",
			otn, a.platform, a.merchant, a.mode, r.Status, r.Events, r.PaidEvents, r.Outbox)
	}
}

// Every account in both credential modes is repaired exactly once by run, by backfill and
// through serve's callbacks (found by app_id, by the signing serial, or by the URL), while
// orders of an account nobody configured are left alone and counted.
func TestE2EAccountsInBothModesRepairedOnce(t *testing.T) {
	t.Parallel()
	e, accounts, _ := newE2EAccountsEnv(t)
	for i, a := range accounts {
		for n := range 3 {
			e.seedPaidFor(a, fmt.Sprintf("run-%d-%d", i, n), int64(1000+n), e2eAgo(10*time.Minute))
			// Older than the lookback: only a backfill takes them.
			e.seedPaidFor(a, fmt.Sprintf("bf-%d-%d", i, n), int64(2000+n), e2eAgo(100*time.Hour))
			// Left for the callbacks: too young for a pass.
			e.seedPaidFor(a, fmt.Sprintf("cb-%d-%d", i, n), int64(3000+n), e2eAgo(10*time.Second))
		}
	}
	repotest.InsertOrder(t, e.db, repotest.Order{Platform: "alipay", MerchantID: "2021009999999999", OutTradeNo: "nobodys", AmountMinor: 100,
		Status: "PENDING", CreatedAgo: 10 * time.Minute})

	run := e.run(nil, "run")
	run.expect(t, 0)
	e.expectRun(e.lastRun(), "succeeded", e2eCounts{scanned: 15, repaired: 15, closed: 0, unchanged: 0, stillPending: 0, mismatches: 0, claimedElsewhere: 0, errors: 0})
	if !strings.Contains(run.stderr.String(), "not configured") || !strings.Contains(run.stderr.String(), `"merchant_id":"2021009999999999","orders":1`) {
		t.Errorf("the run does not say one order of an unconfigured account waits:\n%s", e2eTail(run.stderr.String(), 3000))
	}
	if r := e.order(reconcile.Alipay, "nobodys"); r.Status != "PENDING" || r.LeaseOwner.Valid {
		t.Errorf("an unconfigured account's order was touched: %+v", r)
	}

	from, to := time.Now().Add(-101*time.Hour).UTC().Format(time.RFC3339), time.Now().Add(-99*time.Hour).UTC().Format(time.RFC3339)
	e.run(nil, "backfill", "--from", from, "--to", to).expect(t, 0)

	// Callbacks: duplicated, shuffled, to the shared endpoints and to each account's own URL.
	serve, base := e.startServe()
	var deliveries []*sandbox.Delivery
	for i, a := range accounts {
		var cbs []sandbox.Callback
		for n := range 3 {
			cbs = append(cbs, sandbox.Callback{Platform: a.platform, OutTradeNo: fmt.Sprintf("cb-%d-%d", i, n)})
		}
		url := base + "/notify/" + string(a.platform)
		if i%2 == 1 {
			url += "/" + a.merchant
		}
		d, err := e.sb.Deliver(context.Background(), sandbox.DeliveryOptions{URL: url, Copies: 4, Shuffle: true, TimeScale: 1000, MaxAttempts: 3}, cbs...)
		if err != nil {
			t.Fatal(err)
		}
		deliveries = append(deliveries, d)
	}
	for i, d := range deliveries {
		waitAllAcked(t, context.Background(), d, accounts[i].mode+" "+accounts[i].merchant)
	}
	serve.signal(t, syscall.SIGTERM)
	serve.wait(t, 30*time.Second)
	serve.expect(t, 0)

	for i, a := range accounts {
		for n := range 3 {
			for _, kind := range []string{"run", "bf", "cb"} {
				e.expectPaidOnce(a, fmt.Sprintf("%s-%d-%d", kind, i, n))
			}
		}
	}
	if n := e.count(`SELECT count(*) FROM reconcile_mismatches`); n != 0 {
		t.Errorf("%d findings; every answer belonged to its own account", n)
	}
	e.invariants()
}

// An answer signed by another account's key is never applied: one merchant configured with
// another's public key gets only bad signatures, while every other account is repaired.
func TestE2EAnswerSignedByAnotherAccountIsNeverApplied(t *testing.T) {
	t.Parallel()
	e, accounts, accountsFile := newE2EAccountsEnv(t)
	victim, other := accounts[2], accounts[4] // WeChat Pay public key, migrating
	doc, err := os.ReadFile(accountsFile)
	if err != nil {
		t.Fatal(err)
	}
	mine, theirs := "wechatpay_"+victim.merchant+"_pub_key.pem", "wechatpay_"+other.merchant+"_pub_key.pem"
	if !strings.Contains(string(doc), mine) {
		t.Fatalf("accounts file lacks %s:\n%s", mine, doc)
	}
	if err := os.WriteFile(accountsFile, []byte(strings.Replace(string(doc), mine, theirs, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, a := range accounts {
		e.seedPaidFor(a, fmt.Sprintf("x-%d", i), 5000, e2eAgo(10*time.Minute))
	}
	e.run(nil, "run").expect(t, 0)
	for i, a := range accounts {
		otn := fmt.Sprintf("x-%d", i)
		if a == victim {
			if r := e.order(a.platform, otn); r.Status != "PENDING" || r.Events != 0 || r.Outbox != 0 {
				t.Errorf("an answer verified with another account's key was applied: %+v", r)
			}
			continue
		}
		e.expectPaidOnce(a, otn)
	}
	e.expectRun(e.lastRun(), "succeeded", e2eCounts{scanned: 5, repaired: 4, closed: 0, unchanged: 0, stillPending: 0, mismatches: 0, claimedElsewhere: 0, errors: 1})
	e.invariants()
}

// A bad accounts file is exit 2 with a message that names the file, the account and the
// field, and says nothing of a key.
func TestE2EBadAccountsFileExitsTwo(t *testing.T) {
	t.Parallel()
	e, _, accountsFile := newE2EAccountsEnv(t)
	good, err := os.ReadFile(accountsFile)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(accountsFile)
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydA==\n-----END CERTIFICATE-----\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	second := sandbox.SecondAlipayAppID
	field := func(name string) string { // the path one field names in the good file
		for _, line := range strings.Split(string(good), "\n") {
			if k, v, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "- "), ": "); ok && k == name {
				return v
			}
		}
		t.Fatalf("no %s in the accounts file", name)
		return ""
	}
	indentOf := func(text string) string { // the indentation of the line holding text
		for _, line := range strings.Split(string(good), "\n") {
			if i := strings.Index(line, text); i >= 0 {
				return strings.Repeat(" ", i)
			}
		}
		t.Fatalf("no %q in the accounts file", text)
		return ""
	}
	cases := []struct {
		name, old, new string
		want           []string
	}{
		{"certificate that does not parse", field("alipay_cert_file"), garbage, []string{`alipay account "` + second + `"`, "alipay_cert_file", "garbage.pem"}},
		{"root chain that does not parse", field("alipay_root_cert_file"), garbage, []string{`alipay account "` + second + `"`, "alipay_root_cert_file"}},
		{"key that does not parse", field("private_key_file"), garbage, []string{`alipay account "`, "private_key_file", "garbage.pem"}},
		{"missing key file", field("apiv3_key_file"), filepath.Join(dir, "nope.key"), []string{`wechatpay account "`, "apiv3_key_file", "nope.key"}},
		{"unknown field", "qps: 2000\n", "qps: 2000\n" + indentOf("qps: 2000") + "qpz: 1\n", []string{"unknown field qpz"}},
		{"does not parse", "alipay:", "alipay: [", []string{"does not parse"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !strings.Contains(string(good), tc.old) {
				t.Fatalf("accounts file lacks %q", tc.old)
			}
			bad := filepath.Join(t.TempDir(), "accounts.yaml")
			if err := os.WriteFile(bad, []byte(strings.Replace(string(good), tc.old, tc.new, 1)), 0o644); err != nil {
				t.Fatal(err)
			}
			p := e.run([]string{"RECONCILER_ACCOUNTS_FILE=" + bad}, "run")
			p.expect(t, 2)
			msg := p.stderr.String()
			for _, w := range append([]string{"RECONCILER_ACCOUNTS_FILE", bad}, tc.want...) {
				if !strings.Contains(msg, w) {
					t.Errorf("message does not name %q:\n%s", w, e2eTail(msg, 2000))
				}
			}
			if strings.Contains(msg, "PRIVATE KEY") {
				t.Errorf("message quotes key material:\n%s", msg)
			}
		})
	}
	if n := e.count(`SELECT count(*) FROM reconcile_runs`); n != 0 {
		t.Errorf("%d runs recorded: a configuration error stops before the pass", n)
	}
}
