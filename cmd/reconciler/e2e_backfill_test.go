package main

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/sandbox"
)

// e2eStory is one kind of order a backfill classifies.
type e2eStory struct {
	name       string
	local      string // local status
	platform   sandbox.State
	wantStatus string
	wantFind   string // mismatch kind, "" for none
	wantEvent  string // event written by the backfill, "" for none
}

var e2eStories = []e2eStory{
	{"pending-paid", "PENDING", sandbox.StatePaid, "PAID", "", "PAID"},
	{"paid-not-found", "PAID", sandbox.StateNotFound, "PAID", "LOCAL_PAID_PLATFORM_UNPAID", ""},
	{"paid-refunded", "PAID", sandbox.StateRefunded, "PAID", "REFUNDED_AT_PLATFORM", ""},
	{"closed-paid", "CLOSED", sandbox.StatePaid, "CLOSED", "PAID_AFTER_CLOSE", ""},
	{"paid-consistent", "PAID", sandbox.StatePaid, "PAID", "", ""},
}

// seedStory seeds one order of a story and its platform side. A locally PAID order carries
// the trade number the platform knows (consistent) or one of its own.
func (e *e2eEnv) seedStory(s e2eStory, p reconcile.Platform, otn string, amount int64, created time.Time) {
	e.t.Helper()
	o := e2eOrder{platform: p, otn: otn, amount: amount, status: s.local, createdAt: created}
	if s.platform != sandbox.StateNotFound {
		e.sb.SetScenario(p, otn, sandbox.Scenario{State: s.platform, AmountMinor: amount})
	}
	if s.local == "PAID" {
		o.tradeNo = e.sb.Scenario(p, otn).TradeNo
		if o.tradeNo == "" {
			o.tradeNo = "LOCAL-" + otn
		}
	}
	e.seed(o)
}

// checkStory verifies an order's final classification.
func (e *e2eEnv) checkStory(s e2eStory, p reconcile.Platform, otn string) {
	e.t.Helper()
	got := e.order(p, otn)
	if got.Status != s.wantStatus {
		e.t.Errorf("%s (%s): status %s, want %s", otn, s.name, got.Status, s.wantStatus)
	}
	var kinds []string
	if err := e.db.Select(&kinds, `SELECT kind FROM reconcile_mismatches WHERE platform = $1 AND out_trade_no = $2 ORDER BY kind`, string(p), otn); err != nil {
		e.t.Fatal(err)
	}
	want := []string{}
	if s.wantFind != "" {
		want = []string{s.wantFind}
	}
	if strings.Join(kinds, ",") != strings.Join(want, ",") {
		e.t.Errorf("%s (%s): findings %v, want %v", otn, s.name, kinds, want)
	}
	var events []string
	if err := e.db.Select(&events, `SELECT event_type || '/' || source FROM payment_events WHERE order_id = $1`, got.ID); err != nil {
		e.t.Fatal(err)
	}
	wantEvents := []string{}
	if s.wantEvent != "" {
		wantEvents = []string{s.wantEvent + "/backfill"}
	}
	if strings.Join(events, ",") != strings.Join(wantEvents, ",") {
		e.t.Errorf("%s (%s): events %v, want %v", otn, s.name, events, wantEvents)
	}
}

// A backfill over two days re-checks every order of the window whatever its status:
// PENDING paid orders repaired, PAID orders compared (unpaid or refunded at the platform:
// findings), CLOSED orders paid at the platform: PAID_AFTER_CLOSE, consistent ones
// unchanged; orders outside the window are never asked about.
func TestE2EBackfillClassifies(t *testing.T) {
	t.Parallel()
	e := newE2EEnv(t)
	type seeded struct {
		s   e2eStory
		p   reconcile.Platform
		otn string
	}
	var all []seeded
	for day, ago := range []time.Duration{40 * time.Hour, 20 * time.Hour} {
		for i, s := range e2eStories {
			for _, p := range e2ePlatforms {
				otn := fmt.Sprintf("%s-d%d-%s", p, day, s.name)
				e.seedStory(s, p, otn, 5000+int64(100*i), e2eAgo(ago-time.Duration(i)*time.Minute))
				all = append(all, seeded{s, p, otn})
			}
		}
	}
	// PENDING, expired and unknown at the platform: closed, as `run` would.
	e.seed(e2eOrder{platform: reconcile.Alipay, otn: "A-expired-unknown", amount: 77, createdAt: e2eAgo(30 * time.Hour)})
	// Outside the window on both sides; paid at the platform, but nobody asks.
	outside := []e2eOrder{
		{platform: reconcile.Alipay, otn: "A-before-window", amount: 88, createdAt: e2eAgo(80 * time.Hour)},
		{platform: reconcile.WechatPay, otn: "W-after-window", amount: 99, createdAt: e2eAgo(30 * time.Minute)},
	}
	for _, o := range outside {
		e.paidAtPlatform(o.platform, o.otn, o.amount)
	}
	e.seed(outside...)

	from, to := time.Now().Add(-72*time.Hour).UTC(), time.Now().Add(-time.Hour).UTC()
	// A dry run first: it prints the findings and writes nothing but its run row.
	dry := e.run(nil, "backfill", "--dry-run", "--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339))
	dry.expect(t, 0)
	for _, want := range []string{"would repair alipay alipay-d0-pending-paid", "LOCAL_PAID_PLATFORM_UNPAID", "REFUNDED_AT_PLATFORM",
		"finding   wechatpay wechatpay-d1-closed-paid: PAID_AFTER_CLOSE", "would close alipay A-expired-unknown"} {
		if !strings.Contains(dry.stdout.String(), want) {
			t.Errorf("dry backfill: stdout lacks %q:\n%s", want, dry.stdout.String())
		}
	}
	e.expectRun(e.lastRun(), "succeeded", e2eCounts{scanned: 21, repaired: 4, closed: 1, unchanged: 4, stillPending: 0, mismatches: 12, claimedElsewhere: 0, errors: 0})
	for _, tbl := range []string{"payment_events", "fulfillment_outbox", "reconcile_mismatches"} {
		if n := e.count(`SELECT count(*) FROM ` + tbl); n != 0 {
			t.Errorf("dry backfill wrote %d rows to %s", n, tbl)
		}
	}
	if n := e.count(`SELECT count(*) FROM payment_orders WHERE version > 0 OR lease_owner IS NOT NULL OR last_checked_at IS NOT NULL`); n != 0 {
		t.Errorf("dry backfill touched %d orders", n)
	}

	p := e.run(nil, "backfill", "--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339))
	p.expect(t, 0)
	r := e.lastRun()
	// 2 days x 5 stories x 2 platforms, plus the expired one. Three findings per day and
	// platform (unpaid, refunded, paid after close).
	e.expectRun(r, "succeeded", e2eCounts{scanned: 21, repaired: 4, closed: 1, unchanged: 4, stillPending: 0, mismatches: 12, claimedElsewhere: 0, errors: 0})
	if r.Mode != "backfill" || !r.WindowFrom.Valid || !r.WindowFrom.Time.Equal(from.Truncate(time.Second)) || !r.WindowTo.Time.Equal(to.Truncate(time.Second)) {
		t.Errorf("backfill run row: %s window [%v, %v), want [%v, %v)", r, r.WindowFrom.Time, r.WindowTo.Time, from, to)
	}
	for _, s := range all {
		e.checkStory(s.s, s.p, s.otn)
		if q := e.sb.QueryCount(s.p, s.otn); q != 2 {
			t.Errorf("%s asked %d times, want 2 (dry run, then real)", s.otn, q)
		}
	}
	if got := e.order(reconcile.Alipay, "A-expired-unknown"); got.Status != "CLOSED" || got.Events != 1 {
		t.Errorf("expired unknown order: %+v, want CLOSED with its event", got)
	}
	for _, o := range outside {
		if got := e.order(o.platform, o.otn); got.Status != "PENDING" || e.sb.QueryCount(o.platform, o.otn) != 0 {
			t.Errorf("%s outside the window: %s, asked %d times; want PENDING, never asked", o.otn, got.Status, e.sb.QueryCount(o.platform, o.otn))
		}
	}
	e.invariants()

	// Backfilling the same window again: nothing moves, the findings are seen again (no new
	// rows).
	e.run(nil, "backfill", "--from", from.Format(time.RFC3339), "--to", to.Format(time.RFC3339)).expect(t, 0)
	e.expectRun(e.lastRun(), "succeeded", e2eCounts{scanned: 21, repaired: 0, closed: 0, unchanged: 9, stillPending: 0, mismatches: 12, claimedElsewhere: 0, errors: 0})
	if n := e.count(`SELECT count(*) FROM reconcile_mismatches`); n != 12 {
		t.Errorf("%d mismatch rows after a second backfill, want the same 12", n)
	}
	if n := e.count(`SELECT count(*) FROM reconcile_mismatches WHERE seen_count <> 2`); n != 0 {
		t.Errorf("%d findings not seen twice", n)
	}
	if n := e.count(`SELECT count(*) FROM payment_events`); n != 5 {
		t.Errorf("%d events after the second backfill, want the first one's 5", n)
	}
}

// A date-only --from/--to means midnight in RECONCILER_TIMEZONE, not in UTC nor in the
// default Asia/Shanghai.
func TestE2EBackfillDateInTimezone(t *testing.T) {
	t.Parallel()
	e := newE2EEnv(t)
	const zone = "America/New_York"
	loc, err := time.LoadLocation(zone)
	if err != nil {
		t.Fatal(err)
	}
	nowNY := time.Now().In(loc)
	day := time.Date(nowNY.Year(), nowNY.Month(), nowNY.Day()-3, 0, 0, 0, 0, loc)
	next := time.Date(day.Year(), day.Month(), day.Day()+1, 0, 0, 0, 0, loc)
	orders := []struct {
		o  e2eOrder
		in bool
	}{
		{e2eOrder{platform: reconcile.Alipay, otn: "A-before-midnight", createdAt: day.Add(-30 * time.Minute)}, false},
		{e2eOrder{platform: reconcile.Alipay, otn: "A-after-midnight", createdAt: day.Add(30 * time.Minute)}, true},
		{e2eOrder{platform: reconcile.WechatPay, otn: "W-late-that-day", createdAt: next.Add(-30 * time.Minute)}, true},
		{e2eOrder{platform: reconcile.WechatPay, otn: "W-next-day", createdAt: next.Add(30 * time.Minute)}, false},
	}
	for i, c := range orders {
		c.o.amount = 600 + int64(i)
		e.seed(c.o)
		e.paidAtPlatform(c.o.platform, c.o.otn, c.o.amount)
	}
	e.run([]string{"RECONCILER_TIMEZONE=" + zone}, "backfill", "--from", day.Format("2006-01-02"), "--to", next.Format("2006-01-02")).expect(t, 0)
	r := e.lastRun()
	e.expectRun(r, "succeeded", e2eCounts{scanned: 2, repaired: 2, closed: 0, unchanged: 0, stillPending: 0, mismatches: 0, claimedElsewhere: 0, errors: 0})
	if !r.WindowFrom.Time.Equal(day) || !r.WindowTo.Time.Equal(next) {
		t.Errorf("window [%v, %v), want [%v, %v) (midnights in %s)", r.WindowFrom.Time, r.WindowTo.Time, day, next, zone)
	}
	for _, c := range orders {
		got := e.order(c.o.platform, c.o.otn)
		asked := e.sb.QueryCount(c.o.platform, c.o.otn)
		if c.in && (got.Status != "PAID" || asked != 1) || !c.in && (got.Status != "PENDING" || asked != 0) {
			t.Errorf("%s (created %s): %s, asked %d times; in window: %v", c.o.otn, c.o.createdAt.In(loc), got.Status, asked, c.in)
		}
	}
}

// An interrupted backfill (SIGTERM, exit 3) resumes from its saved cursor with --resume:
// orders before the cursor are not asked again, the rest are, and the classification is the
// same as an uninterrupted backfill's.
func TestE2EBackfillResume(t *testing.T) {
	t.Parallel()
	e := newE2EEnv(t)
	const n = 30
	type seeded struct {
		s   e2eStory
		p   reconcile.Platform
		otn string
	}
	var all []seeded
	start := time.Now().Add(-47 * time.Hour)
	for i := 0; i < n; i++ {
		s, p := e2eStories[i%len(e2eStories)], e2ePlatforms[(i/len(e2eStories))%2]
		otn := fmt.Sprintf("%s-bf-%02d-%s", p, i, s.name)
		e.seedStory(s, p, otn, 9000+int64(i), start.Add(time.Duration(i)*90*time.Minute).Truncate(time.Microsecond))
		all = append(all, seeded{s, p, otn})
	}
	for _, p := range e2ePlatforms {
		e.sb.SetFault(p, sandbox.Fault{Latency: sandbox.Duration(80 * time.Millisecond)})
	}
	env := []string{"RECONCILER_CONCURRENCY=1"}
	from, to := time.Now().Add(-48*time.Hour).UTC().Format(time.RFC3339), time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	first := e.start(env, "backfill", "--from", from, "--to", to)
	asked := func() int {
		return e.sb.PlatformQueryCount(reconcile.Alipay) + e.sb.PlatformQueryCount(reconcile.WechatPay)
	}
	e2eEventually(t, 30*time.Second, "the backfill to check a few orders", func() bool { return asked() >= 8 || first.exited() })
	first.signal(t, syscall.SIGTERM)
	first.wait(t, 30*time.Second)
	first.expect(t, 3)
	r := e.lastRun()
	e.expectRun(r, "interrupted", e2eCounts{scanned: -1, repaired: -1, closed: 0, unchanged: -1, stillPending: 0, mismatches: -1, claimedElsewhere: 0, errors: 0})
	if !strings.Contains(first.stderr.String(), fmt.Sprintf("backfill --resume %d", r.ID)) {
		t.Errorf("stderr does not say how to resume run %d:\n%s", r.ID, e2eTail(first.stderr.String(), 2000))
	}
	if r.Cursor == "" {
		t.Fatalf("interrupted backfill saved no cursor: %s", r)
	}
	cursors, err := reconcile.ParseCursors(r.Cursor)
	if err != nil {
		t.Fatal(err)
	}
	// Each account resumes from its own position: the orders at or before it are done.
	var done []string
	for k, c := range cursors {
		if k == (reconcile.AccountKey{}) {
			t.Fatalf("cursor %q is not per account", r.Cursor)
		}
		var mine []string
		if err := e.db.Select(&mine, `SELECT out_trade_no FROM payment_orders WHERE platform = $1 AND merchant_id = $2
			AND (created_at, id) <= ($3, $4) ORDER BY created_at, id`, string(k.Platform), k.MerchantID, c.CreatedAt, c.ID); err != nil {
			t.Fatal(err)
		}
		done = append(done, mine...)
	}
	if len(done) < 8 || len(done) >= n {
		t.Fatalf("%d orders before the saved cursors %s; want at least the 8 asked and not all %d", len(done), r.Cursor, n)
	}
	if r.Scanned != int64(len(done)) {
		t.Errorf("interrupted run scanned %d, but %d orders lie before its cursors (concurrency 1: each cursor is its account's last checked)", r.Scanned, len(done))
	}
	e.invariants()

	// A plain second backfill would start over; --resume carries on.
	second := e.run(env, "backfill", "--resume", fmt.Sprint(r.ID))
	second.expect(t, 0)
	rows := e.runs()
	if len(rows) != 1 {
		t.Fatalf("%d run rows; --resume continues the same run", len(rows))
	}
	// Counters continue where the interrupted pass stopped.
	e.expectRun(rows[0], "succeeded", e2eCounts{scanned: n, repaired: 6, closed: 0, unchanged: 6, stillPending: 0, mismatches: 18, claimedElsewhere: 0, errors: 0})
	isDone := map[string]bool{}
	for _, otn := range done {
		isDone[otn] = true
	}
	for _, s := range all {
		e.checkStory(s.s, s.p, s.otn)
		if q := e.sb.QueryCount(s.p, s.otn); q != 1 {
			where := "after"
			if isDone[s.otn] {
				where = "before"
			}
			t.Errorf("%s (%s the saved cursor) asked %d times, want once", s.otn, where, q)
		}
	}
	if n := e.count(`SELECT count(*) FROM reconcile_mismatches WHERE seen_count <> 1`); n != 0 {
		t.Errorf("%d findings seen more than once: orders checked twice", n)
	}
	e.invariants()

	// A finished backfill does not resume again.
	again := e.run(env, "backfill", "--resume", fmt.Sprint(r.ID))
	if again.exitCode() != 2 {
		t.Errorf("resuming a finished backfill exited %d; want 2 (bad usage: no retry can help)", again.exitCode())
	}
	if !strings.Contains(again.stderr.String(), "already finished") {
		t.Errorf("refusal does not say the run already finished:\n%s", e2eTail(again.stderr.String(), 1000))
	}
}
