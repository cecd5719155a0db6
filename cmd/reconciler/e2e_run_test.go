package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/sandbox"
)

var e2ePlatforms = []reconcile.Platform{reconcile.Alipay, reconcile.WechatPay}

// A callback that never arrived: paid at the platform, PENDING here. `run` repairs it
// through the apply path (PAID, one event, one outbox row, claim DONE); a second `run`
// changes nothing and, thanks to the re-check schedule, does not even ask again about the
// order that is still open.
func TestE2EMissedCallbackRepaired(t *testing.T) {
	t.Parallel()
	e := newE2EEnv(t)
	var paid []e2eOrder
	for _, p := range e2ePlatforms {
		for i := 1; i <= 3; i++ {
			o := e2eOrder{platform: p, otn: fmt.Sprintf("%s-missed-%d", p, i), amount: 1000*int64(i) + 1, createdAt: e2eAgo(10 * time.Minute)}
			paid = append(paid, o)
			e.paidAtPlatform(p, o.otn, o.amount)
		}
	}
	e.seed(paid...)
	// Still open at the platform, young: stays PENDING, asked again only after RECHECK_MIN.
	open := e2eOrder{platform: reconcile.WechatPay, otn: "wechatpay-open-1", amount: 500, createdAt: e2eAgo(10 * time.Minute)}
	e.sb.SetScenario(open.platform, open.otn, sandbox.Scenario{State: sandbox.StateOpen, AmountMinor: open.amount})
	// Inside the grace period: left to its callback, not asked at all.
	young := e2eOrder{platform: reconcile.Alipay, otn: "alipay-young-1", amount: 700, createdAt: e2eAgo(10 * time.Second)}
	e.paidAtPlatform(young.platform, young.otn, young.amount)
	e.seed(open, young)

	p := e.run(nil, "run")
	p.expect(t, 0)
	first := e.lastRun()
	e.expectRun(first, "succeeded", e2eCounts{scanned: 7, repaired: 6, closed: 0, unchanged: 0, stillPending: 1, mismatches: 0, claimedElsewhere: 0, errors: 0})
	if first.Mode != "once" || first.Shard != "0/1" || first.DryRun {
		t.Errorf("run row: %s", first)
	}
	if !strings.Contains(p.stdout.String(), fmt.Sprintf("run %d once succeeded", first.ID)) {
		t.Errorf("summary missing from stdout:\n%s", p.stdout.String())
	}
	// RECONCILER_LOG_FORMAT=json: every stderr line is a JSON object; the pass's last words
	// carry its run id and counters.
	var finished bool
	for _, line := range strings.Split(strings.TrimSpace(p.stderr.String()), "\n") {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Errorf("stderr line is not JSON: %q", line)
			continue
		}
		if ev["message"] == "pass finished" && ev["run_id"] == float64(first.ID) && ev["repaired"] == float64(6) && ev["status"] == "succeeded" {
			finished = true
		}
	}
	if !finished {
		t.Errorf("no JSON \"pass finished\" log line with run_id %d and repaired 6:\n%s", first.ID, p.stderr.String())
	}
	for _, o := range paid {
		got := e.order(o.platform, o.otn)
		sc := e.sb.Scenario(o.platform, o.otn)
		if got.Status != "PAID" || got.Events != 1 || got.PaidEvents != 1 || got.Outbox != 1 {
			t.Errorf("%s: %+v, want PAID with 1 PAID event and 1 outbox row", o.otn, got)
		}
		if got.TradeNo.String != sc.TradeNo || got.PaidAmount.Int64 != o.amount || !got.PaidAt.Time.Equal(sc.PaidAt) {
			t.Errorf("%s: trade no %q amount %d paid at %s; platform says %q %d %s", o.otn, got.TradeNo.String,
				got.PaidAmount.Int64, got.PaidAt.Time, sc.TradeNo, o.amount, sc.PaidAt)
		}
		if c := e.claim(o.platform, sc.TradeNo); c != "DONE" {
			t.Errorf("%s: claim key %q, want DONE (callbacks still in flight are shed)", o.otn, c)
		}
	}
	if n := e.count(`SELECT count(*) FROM payment_events WHERE source <> 'reconcile' OR event_type <> 'PAID'`); n != 0 {
		t.Errorf("%d events not PAID/reconcile", n)
	}
	if n := e.count(`SELECT count(*) FROM fulfillment_outbox WHERE kind <> 'order.paid' OR payload->>'out_trade_no' IS NULL`); n != 0 {
		t.Errorf("%d outbox rows without kind order.paid and the order in the payload", n)
	}
	if got := e.order(open.platform, open.otn); got.Status != "PENDING" || got.Events != 0 {
		t.Errorf("open order: %+v, want PENDING without events", got)
	}
	if got := e.order(young.platform, young.otn); got.Status != "PENDING" || e.sb.QueryCount(young.platform, young.otn) != 0 {
		t.Errorf("order inside the grace period: %+v, asked %d times; want PENDING and never asked", got, e.sb.QueryCount(young.platform, young.otn))
	}
	e.invariants()

	// A second pass: nothing due (repaired orders are no longer PENDING; the open one is
	// not due before RECHECK_MIN), nothing written, nobody asked.
	queries := e.sb.PlatformQueryCount(reconcile.Alipay) + e.sb.PlatformQueryCount(reconcile.WechatPay)
	e.run(nil, "run").expect(t, 0)
	second := e.lastRun()
	if second.ID == first.ID {
		t.Fatal("the second run wrote no run row")
	}
	e.expectRun(second, "succeeded", e2eCounts{scanned: 0, repaired: 0, closed: 0, unchanged: 0, stillPending: 0, mismatches: 0, claimedElsewhere: 0, errors: 0})
	if n := e.count(`SELECT count(*) FROM payment_events`); n != 6 {
		t.Errorf("%d events after the second run, want 6", n)
	}
	if n := e.count(`SELECT count(*) FROM fulfillment_outbox`); n != 6 {
		t.Errorf("%d outbox rows after the second run, want 6", n)
	}
	if now := e.sb.PlatformQueryCount(reconcile.Alipay) + e.sb.PlatformQueryCount(reconcile.WechatPay); now != queries {
		t.Errorf("the second run asked the platforms %d more times; nothing was due", now-queries)
	}
	e.invariants()
}

// An amount that differs is a finding, never a repair: recorded once, seen again (seen_count
// grows) on the next pass, and the order stays PENDING.
func TestE2EAmountMismatchRecorded(t *testing.T) {
	t.Parallel()
	e := newE2EEnv(t)
	for _, p := range e2ePlatforms {
		otn := string(p) + "-short-1"
		e.seed(e2eOrder{platform: p, otn: otn, amount: 10000, createdAt: e2eAgo(15 * time.Minute)})
		e.paidAtPlatform(p, otn, 9999)
	}
	env := []string{"RECONCILER_RECHECK_MIN=0s"}
	for pass := 1; pass <= 2; pass++ {
		e.run(env, "run").expect(t, 0)
		e.expectRun(e.lastRun(), "succeeded", e2eCounts{scanned: 2, repaired: 0, closed: 0, unchanged: -1, stillPending: 0, mismatches: 2, claimedElsewhere: 0, errors: 0})
		var rows []struct {
			Platform      string `db:"platform"`
			Kind          string `db:"kind"`
			Local         int64  `db:"local_amount_minor"`
			Remote        int64  `db:"platform_amount_minor"`
			LocalStatus   string `db:"local_status"`
			Seen          int    `db:"seen_count"`
			Review        string `db:"review_status"`
			OrderLinked   bool   `db:"order_linked"`
			TradeNoFilled bool   `db:"trade_no_filled"`
		}
		if err := e.db.Select(&rows, `SELECT platform, kind, local_amount_minor, platform_amount_minor, local_status, seen_count,
				review_status, order_id IS NOT NULL AS order_linked, platform_trade_no IS NOT NULL AS trade_no_filled
			FROM reconcile_mismatches ORDER BY platform`); err != nil {
			t.Fatal(err)
		}
		if len(rows) != 2 {
			t.Fatalf("pass %d: %d mismatch rows, want 2 (one per order, never a new row when seen again): %+v", pass, len(rows), rows)
		}
		for _, r := range rows {
			if r.Kind != "AMOUNT_MISMATCH" || r.Local != 10000 || r.Remote != 9999 || r.LocalStatus != "PENDING" ||
				r.Seen != pass || r.Review != "OPEN" || !r.OrderLinked || !r.TradeNoFilled {
				t.Errorf("pass %d: %+v, want AMOUNT_MISMATCH 10000 vs 9999, local PENDING, seen %d times, OPEN, linked", pass, r, pass)
			}
		}
		for _, p := range e2ePlatforms {
			if got := e.order(p, string(p)+"-short-1"); got.Status != "PENDING" || got.Events != 0 || got.Outbox != 0 {
				t.Errorf("pass %d: %s order %+v, want PENDING with nothing applied", pass, p, got)
			}
		}
	}
	e.invariants()
}

// Never-paid orders: unknown or open at the platform and not yet expired stay PENDING;
// expired ones are closed (open ones closed AT the platform first), with a CLOSED event and
// no fulfilment.
func TestE2ENeverPaidClosedOnlyAfterExpiry(t *testing.T) {
	t.Parallel()
	e := newE2EEnv(t)
	type tc struct {
		o          e2eOrder
		state      sandbox.State
		wantStatus string
		wantCloses int
	}
	cases := []tc{
		{e2eOrder{platform: reconcile.Alipay, otn: "A-unknown-young", createdAt: e2eAgo(30 * time.Minute)}, sandbox.StateNotFound, "PENDING", 0},
		{e2eOrder{platform: reconcile.WechatPay, otn: "W-unknown-young", createdAt: e2eAgo(90 * time.Minute)}, sandbox.StateNotFound, "PENDING", 0},
		{e2eOrder{platform: reconcile.Alipay, otn: "A-open-young", createdAt: e2eAgo(30 * time.Minute)}, sandbox.StateOpen, "PENDING", 0},
		{e2eOrder{platform: reconcile.WechatPay, otn: "W-open-young", createdAt: e2eAgo(100 * time.Minute)}, sandbox.StateOpen, "PENDING", 0},
		// Created long ago, but its own expires_at lies ahead: not expired.
		{e2eOrder{platform: reconcile.Alipay, otn: "A-open-own-expiry", createdAt: e2eAgo(3 * time.Hour), expiresAt: time.Now().Add(time.Hour)}, sandbox.StateOpen, "PENDING", 0},
		{e2eOrder{platform: reconcile.Alipay, otn: "A-unknown-expired", createdAt: e2eAgo(3 * time.Hour)}, sandbox.StateNotFound, "CLOSED", 0},
		{e2eOrder{platform: reconcile.WechatPay, otn: "W-unknown-expired", createdAt: e2eAgo(3 * time.Hour)}, sandbox.StateNotFound, "CLOSED", 0},
		{e2eOrder{platform: reconcile.Alipay, otn: "A-open-expired", createdAt: e2eAgo(3 * time.Hour)}, sandbox.StateOpen, "CLOSED", 1},
		{e2eOrder{platform: reconcile.WechatPay, otn: "W-open-expired", createdAt: e2eAgo(3 * time.Hour)}, sandbox.StateOpen, "CLOSED", 1},
		// Young by created_at, but its own expires_at has passed.
		{e2eOrder{platform: reconcile.WechatPay, otn: "W-open-own-expiry", createdAt: e2eAgo(20 * time.Minute), expiresAt: time.Now().Add(-time.Minute)}, sandbox.StateOpen, "CLOSED", 1},
	}
	for i := range cases {
		c := &cases[i]
		c.o.amount = 1200 + int64(i)
		e.seed(c.o)
		if c.state != sandbox.StateNotFound {
			e.sb.SetScenario(c.o.platform, c.o.otn, sandbox.Scenario{State: c.state, AmountMinor: c.o.amount})
		}
	}
	e.run(nil, "run").expect(t, 0)
	e.expectRun(e.lastRun(), "succeeded", e2eCounts{scanned: 10, repaired: 0, closed: 5, unchanged: 0, stillPending: 5, mismatches: 0, claimedElsewhere: 0, errors: 0})
	for _, c := range cases {
		got := e.order(c.o.platform, c.o.otn)
		closes := e.sb.CloseCount(c.o.platform, c.o.otn)
		if got.Status != c.wantStatus || closes != c.wantCloses || got.Outbox != 0 {
			t.Errorf("%s: status %s, %d close calls at the platform, %d outbox rows; want %s, %d, 0",
				c.o.otn, got.Status, closes, got.Outbox, c.wantStatus, c.wantCloses)
		}
		wantEvents := 0
		if c.wantStatus == "CLOSED" {
			wantEvents = 1
			if n := e.count(`SELECT count(*) FROM payment_events WHERE order_id = $1 AND event_type = 'CLOSED' AND source = 'reconcile'`, got.ID); n != 1 {
				t.Errorf("%s: %d CLOSED/reconcile events, want 1", c.o.otn, n)
			}
		}
		if got.Events != wantEvents {
			t.Errorf("%s: %d events, want %d", c.o.otn, got.Events, wantEvents)
		}
		if c.wantCloses == 1 {
			if st := e.sb.Scenario(c.o.platform, c.o.otn).State; st != sandbox.StateClosed {
				t.Errorf("%s: the platform says %s; the trade was to be closed there first", c.o.otn, st)
			}
			// Closed at the platform, then confirmed by a second query.
			if q := e.sb.QueryCount(c.o.platform, c.o.otn); q != 2 {
				t.Errorf("%s: %d queries, want 2 (ask, close, confirm)", c.o.otn, q)
			}
		}
	}
	e.invariants()
}

// Faults never change state, and a later pass repairs. For each fault: a per-order fault on
// one order of each platform (the others are healthy: the pass completes, exit 0); then the
// same fault on both whole platforms (not one due order can be checked: exit 1, run failed);
// then no fault (repaired).
func TestE2EFaultsNeverChangeState(t *testing.T) {
	t.Parallel()
	faults := []struct {
		name  string
		fault sandbox.Fault
		env   []string
	}{
		{"bad signature", sandbox.Fault{BadSignature: true}, nil},
		{"http 502", sandbox.Fault{HTTPStatus: 502}, nil},
		{"hang", sandbox.Fault{Hang: true}, []string{"RECONCILER_PLATFORM_TIMEOUT=300ms"}},
		{"rate limited", sandbox.Fault{RateLimited: true}, nil},
	}
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			e := newE2EEnv(t)
			env := append([]string{"RECONCILER_RECHECK_MIN=0s"}, f.env...)
			faulty := map[reconcile.Platform]string{}
			for _, p := range e2ePlatforms {
				for _, kind := range []string{"faulty", "healthy"} {
					otn := fmt.Sprintf("%s-%s", p, kind)
					e.seed(e2eOrder{platform: p, otn: otn, amount: 2500, createdAt: e2eAgo(20 * time.Minute)})
					sc := sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 2500}
					if kind == "faulty" {
						fault := f.fault
						sc.Fault = &fault
						faulty[p] = otn
					}
					e.sb.SetScenario(p, otn, sc)
				}
			}
			unharmed := func(phase string) {
				t.Helper()
				for p, otn := range faulty {
					if got := e.order(p, otn); got.Status != "PENDING" || got.Events != 0 || got.Outbox != 0 || got.LeaseOwner.Valid {
						t.Fatalf("%s: %s after the fault: %+v, want PENDING, untouched, no lease", phase, otn, got)
					}
				}
				if n := e.count(`SELECT count(*) FROM reconcile_mismatches`); n != 0 {
					t.Fatalf("%s: a fault produced %d findings", phase, n)
				}
			}

			// 1. One order of each platform misbehaves: the pass completes.
			e.run(env, "run").expect(t, 0)
			e.expectRun(e.lastRun(), "succeeded", e2eCounts{scanned: 4, repaired: 2, closed: 0, unchanged: 0, stillPending: 0, mismatches: 0, claimedElsewhere: 0, errors: 2})
			unharmed("per-order fault")
			for _, p := range e2ePlatforms {
				if got := e.order(p, string(p)+"-healthy"); got.Status != "PAID" {
					t.Errorf("healthy %s order next to a faulty one: %s, want PAID", p, got.Status)
				}
			}

			// 2. Both platforms misbehave for every call: not one check succeeds.
			for p, otn := range faulty {
				e.sb.SetScenario(p, otn, sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 2500})
				e.sb.SetFault(p, f.fault)
			}
			e.run(env, "run").expect(t, 1)
			failed := e.lastRun()
			e.expectRun(failed, "failed", e2eCounts{scanned: 2, repaired: 0, closed: 0, unchanged: 0, stillPending: 0, mismatches: 0, claimedElsewhere: 0, errors: 2})
			if failed.Error == "" {
				t.Errorf("failed run without an error text: %s", failed)
			}
			unharmed("platform-wide fault")

			// 3. The platforms recover: the next pass repairs.
			for _, p := range e2ePlatforms {
				e.sb.SetFault(p, sandbox.Fault{})
			}
			e.run(env, "run").expect(t, 0)
			e.expectRun(e.lastRun(), "succeeded", e2eCounts{scanned: 2, repaired: 2, closed: 0, unchanged: 0, stillPending: 0, mismatches: 0, claimedElsewhere: 0, errors: 0})
			for p, otn := range faulty {
				if got := e.order(p, otn); got.Status != "PAID" || got.PaidEvents != 1 || got.Outbox != 1 {
					t.Errorf("%s after recovery: %+v, want PAID once", otn, got)
				}
			}
			e.invariants()
		})
	}
}

// One platform down while the other works: the pass completes (exit 0), the errors are
// counted, the working platform's orders are repaired.
func TestE2EOnePlatformDown(t *testing.T) {
	t.Parallel()
	e := newE2EEnv(t)
	for _, p := range e2ePlatforms {
		for i := 1; i <= 2; i++ {
			otn := fmt.Sprintf("%s-%d", p, i)
			e.seed(e2eOrder{platform: p, otn: otn, amount: 300, createdAt: e2eAgo(10 * time.Minute)})
			e.paidAtPlatform(p, otn, 300)
		}
	}
	e.sb.SetFault(reconcile.Alipay, sandbox.Fault{HTTPStatus: 503})
	e.run(nil, "run").expect(t, 0)
	e.expectRun(e.lastRun(), "succeeded", e2eCounts{scanned: 4, repaired: 2, closed: 0, unchanged: 0, stillPending: 0, mismatches: 0, claimedElsewhere: 0, errors: 2})
	for i := 1; i <= 2; i++ {
		if a, w := e.order(reconcile.Alipay, fmt.Sprintf("alipay-%d", i)), e.order(reconcile.WechatPay, fmt.Sprintf("wechatpay-%d", i)); a.Status != "PENDING" || w.Status != "PAID" {
			t.Errorf("order %d: alipay %s (platform down), wechatpay %s; want PENDING and PAID", i, a.Status, w.Status)
		}
	}
	e.invariants()
}

// A dry run asks and classifies but writes nothing except its run row: no order change, no
// lease, no event, no finding, no claim key, no close at the platform. Through the env
// setting and through the flag.
func TestE2EDryRunWritesNothing(t *testing.T) {
	t.Parallel()
	e := newE2EEnv(t)
	e.seed(
		e2eOrder{platform: reconcile.Alipay, otn: "A-paid", amount: 3000, createdAt: e2eAgo(10 * time.Minute)},
		e2eOrder{platform: reconcile.WechatPay, otn: "W-paid", amount: 3100, createdAt: e2eAgo(10 * time.Minute)},
		e2eOrder{platform: reconcile.Alipay, otn: "A-short", amount: 3200, createdAt: e2eAgo(10 * time.Minute)},
		e2eOrder{platform: reconcile.WechatPay, otn: "W-open-expired", amount: 3300, createdAt: e2eAgo(3 * time.Hour)},
		e2eOrder{platform: reconcile.Alipay, otn: "A-unknown-expired", amount: 3400, createdAt: e2eAgo(3 * time.Hour)},
	)
	e.paidAtPlatform(reconcile.Alipay, "A-paid", 3000)
	e.paidAtPlatform(reconcile.WechatPay, "W-paid", 3100)
	e.paidAtPlatform(reconcile.Alipay, "A-short", 3199)
	e.sb.SetScenario(reconcile.WechatPay, "W-open-expired", sandbox.Scenario{State: sandbox.StateOpen, AmountMinor: 3300})

	checksum := func() string {
		var s string
		if err := e.db.Get(&s, `SELECT md5(string_agg(o::text, '|' ORDER BY id)) FROM payment_orders o`); err != nil {
			t.Fatal(err)
		}
		return s
	}
	before := checksum()
	for i, how := range []struct {
		env  []string
		args []string
	}{
		{[]string{"RECONCILER_DRY_RUN=true"}, []string{"run"}},
		{nil, []string{"run", "--dry-run"}},
	} {
		p := e.run(how.env, how.args...)
		p.expect(t, 0)
		out := p.stdout.String()
		for _, want := range []string{
			"would repair alipay A-paid", "would repair wechatpay W-paid",
			"would close wechatpay W-open-expired", "would close alipay A-unknown-expired",
			"finding   alipay A-short: AMOUNT_MISMATCH", "dry run",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("dry run %d: stdout lacks %q:\n%s", i+1, want, out)
			}
		}
		if after := checksum(); after != before {
			t.Errorf("dry run %d changed payment_orders (checksum %s -> %s)", i+1, before, after)
		}
		for _, tbl := range []string{"payment_events", "fulfillment_outbox", "reconcile_mismatches", "reconcile_mismatch_audit"} {
			if n := e.count(`SELECT count(*) FROM ` + tbl); n != 0 {
				t.Errorf("dry run %d wrote %d rows to %s", i+1, n, tbl)
			}
		}
		if keys := e.claimKeys(); len(keys) != 0 {
			t.Errorf("dry run %d left claim keys in Redis: %v", i+1, keys)
		}
		if n := e.sb.CloseCount(reconcile.WechatPay, "W-open-expired"); n != 0 {
			t.Errorf("dry run %d closed a trade at the platform (%d close calls)", i+1, n)
		}
		runs := e.runs()
		if len(runs) != i+1 {
			t.Fatalf("after dry run %d: %d run rows", i+1, len(runs))
		}
		r := runs[i]
		if !r.DryRun {
			t.Errorf("run row not marked dry: %s", r)
		}
		// Counts are what it would do.
		e.expectRun(r, "succeeded", e2eCounts{scanned: 5, repaired: 2, closed: 2, unchanged: 0, stillPending: 0, mismatches: 1, claimedElsewhere: 0, errors: 0})
	}

	// The same orders for real: the dry run predicted exactly this.
	e.run(nil, "run").expect(t, 0)
	e.expectRun(e.lastRun(), "succeeded", e2eCounts{scanned: 5, repaired: 2, closed: 2, unchanged: 0, stillPending: 0, mismatches: 1, claimedElsewhere: 0, errors: 0})
	if checksum() == before {
		t.Error("the real run changed nothing either: the dry-run assertions prove nothing")
	}
	if n := e.sb.CloseCount(reconcile.WechatPay, "W-open-expired"); n != 1 {
		t.Errorf("real run: %d close calls, want 1", n)
	}
	e.invariants()
}

// Redis only saves load; the database is the correctness layer. With Redis unreachable, or
// not configured at all (database-only claims), a pass still repairs, exactly once.
func TestE2EWithoutRedis(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, url string }{{"unreachable", "redis://127.0.0.1:1/0"}, {"not configured", ""}} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			e := newE2EEnv(t)
			for _, p := range e2ePlatforms {
				otn := string(p) + "-noredis"
				e.seed(e2eOrder{platform: p, otn: otn, amount: 4200, createdAt: e2eAgo(10 * time.Minute)})
				e.paidAtPlatform(p, otn, 4200)
			}
			p := e.run([]string{"RECONCILER_REDIS_URL=" + c.url}, "run")
			p.expect(t, 0)
			if p.took > 20*time.Second {
				t.Errorf("took %s", p.took)
			}
			e.expectRun(e.lastRun(), "succeeded", e2eCounts{scanned: 2, repaired: 2, closed: 0, unchanged: 0, stillPending: 0, mismatches: 0, claimedElsewhere: 0, errors: 0})
			for _, pl := range e2ePlatforms {
				if got := e.order(pl, string(pl)+"-noredis"); got.Status != "PAID" || got.PaidEvents != 1 || got.Outbox != 1 {
					t.Errorf("%s: %+v, want PAID once", pl, got)
				}
			}
			e.invariants()
		})
	}
}
