package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/sandbox"
)

// TestE2EStatement drives `reconciler statement` as a process against the sandbox's bills:
// yesterday's bill (the default day) repairs the order only the bill knows was paid and
// reports the payment we never had; a re-run changes nothing; a dry run writes only its run
// row; today's bill is not published yet (exit 1, the time to retry); --file without its
// account is bad usage (exit 2).
func TestE2EStatement(t *testing.T) {
	t.Parallel()
	e := newE2EEnv(t)
	china := time.FixedZone("CST", 8*3600)
	now := time.Now().In(china)
	yesterday := time.Date(now.Year(), now.Month(), now.Day()-1, 10, 0, 0, 0, china)
	for _, p := range []reconcile.Platform{reconcile.Alipay, reconcile.WechatPay} {
		e.seed(e2eOrder{platform: p, otn: "ST-MISSED", amount: 880, createdAt: yesterday.Add(-time.Minute)})
		e.sb.SetScenario(p, "ST-MISSED", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 880, PaidAt: yesterday})
		e.sb.SetScenario(p, "ST-UNKNOWN", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 990, PaidAt: yesterday})
	}
	env := []string{"RECONCILER_TIMEZONE=Asia/Shanghai"}
	for _, p := range []reconcile.Platform{reconcile.Alipay, reconcile.WechatPay} {
		args := []string{"statement", "--platform", string(p), "--merchant", e.merchant(p)}
		if r := e.run(env, append(args, "--dry-run")...); r.exitCode() != 0 || e.order(p, "ST-MISSED").Status != "PENDING" ||
			e.count(`SELECT count(*) FROM statement_days WHERE platform = $1`, string(p)) != 0 {
			t.Fatalf("%s dry run: exit %d, order %s\n%s", p, r.exitCode(), e.order(p, "ST-MISSED").Status, e2eTail(r.stderr.String(), 3000))
		}
		r := e.run(env, args...)
		if r.exitCode() != 0 || !strings.Contains(r.stdout.String(), e.merchant(p)) {
			t.Fatalf("%s: exit %d\nstdout:\n%s\nstderr:\n%s", p, r.exitCode(), r.stdout.String(), e2eTail(r.stderr.String(), 3000))
		}
		if o := e.order(p, "ST-MISSED"); o.Status != "PAID" || o.PaidEvents != 1 || o.Outbox != 1 {
			t.Errorf("%s: the missed order is %+v; want PAID with one event and one outbox row", p, o)
		}
		sightings := `SELECT COALESCE(sum(seen_count), 0) FROM reconcile_mismatches WHERE out_trade_no = 'ST-UNKNOWN' AND kind = 'UNKNOWN_ORDER' AND platform = $1`
		if n := e.count(sightings, string(p)); n != 1 {
			t.Errorf("%s: unknown payment seen %d times, want 1", p, n)
		}
		if r := e.run(env, args...); r.exitCode() != 0 || e.count(sightings, string(p)) != 1 {
			t.Errorf("%s re-run: exit %d, sightings %d; want 0 and still 1", p, r.exitCode(), e.count(sightings, string(p)))
		}
	}
	var modes []string
	for _, r := range e.runs() {
		modes = append(modes, r.Mode)
	}
	if len(modes) != 6 || strings.Count(strings.Join(modes, ","), "statement") != 6 {
		t.Errorf("run rows %v; want six statement runs (a dry run, a run and a re-run per platform)", modes)
	}

	today := now.Format(time.DateOnly)
	r := e.run(env, "statement", "--platform", "wechatpay", "--merchant", e.merchant(reconcile.WechatPay), "--date", today)
	if r.exitCode() != 1 || !strings.Contains(r.stderr.String(), "retry after") {
		t.Errorf("today's bill: exit %d; want 1 naming the time to retry\n%s", r.exitCode(), e2eTail(r.stderr.String(), 2000))
	}
	bill := filepath.Join(t.TempDir(), "bill.csv")
	if err := os.WriteFile(bill, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if r := e.run(env, "statement", "--file", bill); r.exitCode() != 2 || !strings.Contains(r.stderr.String(), "--platform") {
		t.Errorf("--file alone: exit %d; want 2 naming --platform\n%s", r.exitCode(), r.stderr.String())
	}
}
