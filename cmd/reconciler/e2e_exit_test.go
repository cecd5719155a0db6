package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/sandbox"
)

// Exit codes of the contract: 2 for bad usage or configuration (naming the setting), 1 when
// the pass cannot run at all.
func TestE2EExitCodes(t *testing.T) {
	t.Parallel()
	e := newE2EEnv(t)
	e.seed(e2eOrder{platform: reconcile.Alipay, otn: "A-1", amount: 100, createdAt: e2eAgo(10 * time.Minute)})
	e.paidAtPlatform(reconcile.Alipay, "A-1", 100)
	cases := []struct {
		name     string
		env      []string
		args     []string
		code     int
		stderr   string
		maxTaken time.Duration
	}{
		{"negative claim ttl", []string{"RECONCILER_CLAIM_TTL=-5m"}, []string{"run"}, 2, "RECONCILER_CLAIM_TTL", 0},
		{"claim ttl below the lease", []string{"RECONCILER_CLAIM_TTL=30s"}, []string{"run"}, 2, "RECONCILER_CLAIM_TTL", 0},
		{"bad flag value wins over env", []string{"RECONCILER_CONCURRENCY=4"}, []string{"run", "--concurrency", "0"}, 2, "--concurrency", 0},
		{"bad shard", nil, []string{"run", "--shard", "2/2"}, 2, "RECONCILER_SHARD", 0},
		{"missing database url", []string{"RECONCILER_DATABASE_URL="}, []string{"run"}, 2, "RECONCILER_DATABASE_URL", 0},
		{"unknown flag", nil, []string{"run", "--no-such-flag"}, 2, "no-such-flag", 0},
		{"unknown command", nil, []string{"reconcile-everything"}, 2, `unknown command "reconcile-everything"`, 0},
		{"backfill without a window", nil, []string{"backfill"}, 2, "--from and --to", 0},
		{"backfill with a bad date", nil, []string{"backfill", "--from", "yesterday", "--to", "2030-01-01"}, 2, "--from", 0},
		{"backfill window backwards", nil, []string{"backfill", "--from", "2030-01-02", "--to", "2030-01-01"}, 2, "must be before", 0},
		{"shards without a completion index", nil, []string{"run", "--shards", "2"}, 2, "JOB_COMPLETION_INDEX", 0},
		{"missing key file", []string{"RECONCILER_ALIPAY_PRIVATE_KEY_FILE=/nonexistent/key.pem"}, []string{"run"}, 2, "RECONCILER_ALIPAY_PRIVATE_KEY_FILE", 0},
		{"database unreachable", []string{"RECONCILER_DATABASE_URL=postgres://postgres@127.0.0.1:1/x?sslmode=disable"}, []string{"run"}, 1, "database", 15 * time.Second},
		{"schedule of a zone alone", nil, []string{"serve", "--schedule", "TZ=UTC"}, 2, "--schedule", 0},
		{"schedule that is not one", []string{"RECONCILER_SCHEDULE=nonsense"}, []string{"serve"}, 2, "nonsense", 0},
		{"schedule in an unknown zone", nil, []string{"serve", "--schedule", "CRON_TZ=Mars/Olympus 0 9 * * *"}, 2, "--schedule", 0},
		{"database url file missing", []string{"RECONCILER_DATABASE_URL=", "RECONCILER_DATABASE_URL_FILE=/nonexistent/db-url"}, []string{"run"}, 2, "RECONCILER_DATABASE_URL_FILE", 0},
		{"help", nil, []string{"run", "--help"}, 0, "RECONCILER_RECHECK_MIN", 0},
	}
	for _, c := range cases {
		p := e.run(c.env, c.args...)
		if p.exitCode() != c.code {
			t.Errorf("%s: exit %d, want %d\nstderr:\n%s", c.name, p.exitCode(), c.code, e2eTail(p.stderr.String(), 2000))
			continue
		}
		if !strings.Contains(p.stderr.String()+p.stdout.String(), c.stderr) {
			t.Errorf("%s: output does not name %q:\nstdout:\n%s\nstderr:\n%s", c.name, c.stderr, p.stdout.String(), e2eTail(p.stderr.String(), 2000))
		}
		if c.maxTaken > 0 && p.took > c.maxTaken {
			t.Errorf("%s: took %s", c.name, p.took)
		}
	}
	// None of them ran a pass or touched an order.
	if rs := e.runs(); len(rs) != 0 {
		t.Errorf("%d run rows written by failing commands: %v", len(rs), rs)
	}
	if q := e.sb.PlatformQueryCount(reconcile.Alipay); q != 0 {
		t.Errorf("failing commands asked the platform %d times", q)
	}
	if got := e.order(reconcile.Alipay, "A-1"); got.Status != "PENDING" {
		t.Errorf("order %s after failing commands", got.Status)
	}
}

// Another process holding the shard's lock: log it, exit 0, write nothing.
func TestE2ELockHeldExitsZero(t *testing.T) {
	t.Parallel()
	e := newE2EEnv(t)
	e.seed(e2eOrder{platform: reconcile.WechatPay, otn: "W-slow", amount: 100, createdAt: e2eAgo(10 * time.Minute)})
	e.paidAtPlatform(reconcile.WechatPay, "W-slow", 100)
	e.sb.SetFault(reconcile.WechatPay, sandbox.Fault{Latency: sandbox.Duration(6 * time.Second)})
	holder := e.start(nil, "run")
	// The lock is taken before the run row is written, and the platform call is slow.
	e2eEventually(t, 20*time.Second, "the first run to start its pass", func() bool {
		return holder.exited() || e.count(`SELECT count(*) FROM reconcile_runs WHERE status = 'running'`) == 1
	})
	second := e.run(nil, "run")
	second.expect(t, 0)
	if holder.exited() {
		t.Fatalf("the first run ended (exit %d) before the second one could contend", holder.exitCode())
	}
	if !strings.Contains(second.stdout.String(), "another pass holds the lock") {
		t.Errorf("second run does not say another pass holds the lock:\n%s", second.stdout.String())
	}
	if rs := e.runs(); len(rs) != 1 {
		t.Errorf("%d run rows; the second run must not start a pass: %v", len(rs), rs)
	}
	// A backfill shares the leases, not the lock: it is not turned away, and it skips the
	// order the first run is checking.
	bf := e.run(nil, "backfill", "--from", time.Now().Add(-time.Hour).UTC().Format(time.RFC3339), "--to", time.Now().Add(time.Hour).UTC().Format(time.RFC3339))
	bf.expect(t, 0)
	if holder.exited() {
		t.Fatalf("the first run ended (exit %d) before the backfill could contend", holder.exitCode())
	}
	if strings.Contains(bf.stdout.String(), "another pass holds the lock") {
		t.Errorf("a backfill was turned away by the run's lock:\n%s", bf.stdout.String())
	}
	e.expectRun(e.lastRun(), "succeeded", e2eCounts{scanned: 0, repaired: 0, closed: 0, unchanged: 0, stillPending: 0, mismatches: 0, claimedElsewhere: 0, errors: 0})
	holder.wait(t, 30*time.Second)
	holder.expect(t, 0)
	e.expectRun(e.runs()[0], "succeeded", e2eCounts{scanned: 1, repaired: 1, closed: 0, unchanged: 0, stillPending: 0, mismatches: 0, claimedElsewhere: 0, errors: 0})
	if q := e.sb.QueryCount(reconcile.WechatPay, "W-slow"); q != 1 {
		t.Errorf("order asked %d times, want once", q)
	}
}

// A private key the platform does not know: Alipay answers isv.invalid-signature. No retry
// can help: the pass stops at the first sign, exit 2 naming the key setting.
func TestE2EWrongPrivateKeyStopsPass(t *testing.T) {
	t.Parallel()
	e := newE2EEnv(t)
	const n = 20
	for i := 0; i < n; i++ {
		otn := "A-key-" + string(rune('a'+i))
		e.seed(e2eOrder{platform: reconcile.Alipay, otn: otn, amount: 100 + int64(i), createdAt: e2eAgo(10 * time.Minute)})
		e.paidAtPlatform(reconcile.Alipay, otn, 100+int64(i))
	}
	// Some other valid RSA key: not the app key the sandbox verifies with.
	pem, err := platformclient.EncodePrivateKeyPEM(e2eKeys(t).WechatMerchantKey)
	if err != nil {
		t.Fatal(err)
	}
	wrong := filepath.Join(t.TempDir(), "wrong_app_key.pem")
	if err := os.WriteFile(wrong, pem, 0o600); err != nil {
		t.Fatal(err)
	}
	p := e.run([]string{"RECONCILER_ALIPAY_PRIVATE_KEY_FILE=" + wrong, "RECONCILER_CONCURRENCY=1"}, "run")
	p.expect(t, 2)
	if !strings.Contains(p.stderr.String(), "RECONCILER_ALIPAY_PRIVATE_KEY_FILE") {
		t.Errorf("stderr does not name RECONCILER_ALIPAY_PRIVATE_KEY_FILE:\n%s", e2eTail(p.stderr.String(), 3000))
	}
	if p.took > 15*time.Second {
		t.Errorf("took %s to give up", p.took)
	}
	// Stopped at the first sign: not every order was tried (with concurrency 1, one query,
	// perhaps a couple more taken while the stop was being noticed).
	if q := e.sb.PlatformQueryCount(reconcile.Alipay); q < 1 || q > 3 {
		t.Errorf("%d queries with a key the platform rejects; want the pass to stop at the first", q)
	}
	e.expectRun(e.lastRun(), "failed", e2eCounts{scanned: -1, repaired: 0, closed: 0, unchanged: 0, stillPending: 0, mismatches: 0, claimedElsewhere: 0, errors: -1})
	if n := e.count(`SELECT count(*) FROM payment_orders WHERE status <> 'PENDING' OR next_check_at IS NOT NULL AND next_check_at > now() + interval '1 minute'`); n != 0 {
		t.Errorf("%d orders changed or pushed back by a rejected key", n)
	}
	// The operator fixes the key and runs again at once: every order is repaired. An order
	// the stopped pass left leased would be skipped until its lease ran out.
	e.run(nil, "run").expect(t, 0)
	e.expectRun(e.lastRun(), "succeeded", e2eCounts{scanned: n, repaired: n, closed: 0, unchanged: 0, stillPending: 0, mismatches: 0, claimedElsewhere: 0, errors: 0})
	e.invariants()
}
