package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/reconcile"
)

// scriptedPlatform is a stand-in for a payment platform: per out_trade_no (and per
// out_refund_no) it answers a scripted state, records every call, and checks that no two
// calls for one order (or one refund) overlap.
// (The real protocol clients are tested against the sandbox in platformclient and cmd.)
type scriptedPlatform struct {
	platform reconcile.Platform
	merchant string
	latency  time.Duration

	mu       sync.Mutex
	answers  map[string]reconcile.Result
	errs     map[string]error
	closeErr map[string]error
	queries  map[string]int
	closes   map[string]int
	inFlight map[string]int
	overlaps int

	// Refunds, by out_refund_no (refund_pass_test.go). refundGate, when set, holds the
	// first query of each refund (in flight) until it is closed.
	refundGate     chan struct{}
	refundAnswers  map[string]reconcile.RefundResult
	refundErrs     map[string]error
	refundQueries  map[string]int
	refundInFlight map[string]int
	refundOverlaps int
	// busy counts the calls of each kind in flight; maxBusy the most calls of both kinds
	// at once, mixed whether an order's and a refund's query were ever in flight together.
	busy    [2]int
	maxBusy int
	mixed   bool
}

func newScripted(p reconcile.Platform, merchant string) *scriptedPlatform {
	return &scriptedPlatform{platform: p, merchant: merchant, answers: map[string]reconcile.Result{},
		errs: map[string]error{}, closeErr: map[string]error{}, queries: map[string]int{}, closes: map[string]int{}, inFlight: map[string]int{},
		refundAnswers: map[string]reconcile.RefundResult{}, refundErrs: map[string]error{}, refundQueries: map[string]int{},
		refundInFlight: map[string]int{}}
}

func (s *scriptedPlatform) Platform() reconcile.Platform { return s.platform }
func (s *scriptedPlatform) MerchantID() string           { return s.merchant }

func (s *scriptedPlatform) set(otn string, st reconcile.PlatformState, tradeNo string, amount int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers[otn] = reconcile.Result{Platform: s.platform, MerchantID: s.merchant, OutTradeNo: otn, State: st,
		RawState: string(st), PlatformTradeNo: tradeNo, AmountMinor: amount, PaidAt: time.Now()}
	delete(s.errs, otn)
}

func (s *scriptedPlatform) fail(otn string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs[otn] = err
}

func (s *scriptedPlatform) Query(ctx context.Context, otn string) (reconcile.Result, error) {
	defer s.enter(orderCall, otn, s.queries, s.inFlight, &s.overlaps)()
	if s.latency > 0 {
		select {
		case <-time.After(s.latency):
		case <-ctx.Done():
			return reconcile.Result{}, &reconcile.PlatformError{Platform: s.platform, Kind: reconcile.KindRetryable, Err: ctx.Err()}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.errs[otn]; err != nil {
		return reconcile.Result{}, err
	}
	if r, ok := s.answers[otn]; ok {
		return r, nil
	}
	return reconcile.Result{Platform: s.platform, MerchantID: s.merchant, OutTradeNo: otn, State: reconcile.StateNotFound}, nil
}

func (s *scriptedPlatform) Close(ctx context.Context, otn string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closes[otn]++
	if err := s.closeErr[otn]; err != nil {
		return err
	}
	if r, ok := s.answers[otn]; ok && r.State == reconcile.StateOpen {
		r.State = reconcile.StateClosed
		s.answers[otn] = r
	}
	return nil
}

func (s *scriptedPlatform) count(m map[string]int, otn string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return m[otn]
}

const testMerchant = "2021000000000001"

type passBundle struct {
	*bundle
	ali    *scriptedPlatform
	runner *reconcile.Runner
	rs     reconcile.RunnerSettings
}

func setupPass(t *testing.T, tune ...func(*reconcile.RunnerSettings)) *passBundle {
	b := setup(t, withRedis)
	p := &passBundle{bundle: b, ali: newScripted(reconcile.Alipay, testMerchant)}
	p.rs = reconcile.RunnerSettings{Concurrency: 8, Grace: 2 * time.Minute, Lookback: 72 * time.Hour, OrderTTL: 2 * time.Hour,
		RecheckMin: time.Minute, RecheckMax: time.Hour, CloseAtPlatform: true, DrainTimeout: 5 * time.Second}
	for _, f := range tune {
		f(&p.rs)
	}
	p.runner = p.newRunner(p.rs)
	return p
}

func (p *passBundle) newRunner(rs reconcile.RunnerSettings) *reconcile.Runner {
	return reconcile.NewRunner(p.applier, p.store, p.store.Runs(), p.store.Locker(),
		[]reconcile.PlatformClient{p.ali}, rs, nil, zerolog.Nop())
}

func (p *passBundle) pass(spec reconcile.PassSpec) reconcile.Run {
	p.t.Helper()
	if spec.Mode == "" {
		spec.Mode = reconcile.ModeOnce
	}
	run, err := p.runner.Pass(context.Background(), spec)
	if err != nil {
		p.t.Fatalf("pass: %v", err)
	}
	return run
}

func (p *passBundle) runRow(id int64) map[string]any {
	p.t.Helper()
	row := map[string]any{}
	if err := p.db.QueryRowx(`SELECT status, scanned, repaired, closed, unchanged, still_pending, mismatches, claimed_elsewhere, errors
		FROM reconcile_runs WHERE id = $1`, id).MapScan(row); err != nil {
		p.t.Fatal(err)
	}
	return row
}

func TestPassRepairsClosesAndSchedules(t *testing.T) {
	t.Parallel()
	p := setupPass(t)
	missed := p.order(orderSpec{otn: "A-missed", amount: 8880})
	open := p.order(orderSpec{otn: "A-open"})
	expiredOpen := p.order(orderSpec{otn: "A-expired-open", createdAgo: 3 * time.Hour})
	neverSeen := p.order(orderSpec{otn: "A-never", createdAgo: 3 * time.Hour})
	youngUnknown := p.order(orderSpec{otn: "A-young-unknown"})
	wrongAmount := p.order(orderSpec{otn: "A-wrong", amount: 8880})
	young := p.order(orderSpec{otn: "A-young", createdAgo: 30 * time.Second})
	tooOld := p.order(orderSpec{otn: "A-ancient", createdAgo: 100 * time.Hour})
	p.ali.set("A-missed", reconcile.StatePaid, "T-missed", 8880)
	p.ali.set("A-open", reconcile.StateOpen, "", 0)
	p.ali.set("A-expired-open", reconcile.StateOpen, "", 0)
	p.ali.set("A-wrong", reconcile.StatePaid, "T-wrong", 1)

	run := p.pass(reconcile.PassSpec{})
	want := reconcile.CounterValues{Scanned: 6, Repaired: 1, Closed: 2, StillPending: 2, Mismatches: 1}
	if run.Counts != want || run.Status != reconcile.RunSucceeded {
		t.Fatalf("run %s counts %+v, want %+v", run.Status, run.Counts, want)
	}
	checks := []struct {
		id     int64
		status reconcile.Status
	}{{missed, "PAID"}, {open, "PENDING"}, {expiredOpen, "CLOSED"}, {neverSeen, "CLOSED"}, {youngUnknown, "PENDING"},
		{wrongAmount, "PENDING"}, {young, "PENDING"}, {tooOld, "PENDING"}}
	for _, c := range checks {
		if s := p.status(c.id); s != c.status {
			t.Errorf("order %d: %s, want %s", c.id, s, c.status)
		}
	}
	if p.ali.count(p.ali.closes, "A-expired-open") != 1 || p.ali.count(p.ali.closes, "A-never") != 0 {
		t.Fatal("the expired open trade must be closed at the platform first, the unknown one not")
	}
	if p.ali.count(p.ali.queries, "A-young") != 0 || p.ali.count(p.ali.queries, "A-ancient") != 0 {
		t.Fatal("orders inside the grace period or beyond the lookback were queried")
	}
	// Still-pending orders are due again after the backoff, not at once.
	var next time.Time
	var count int
	p.db.QueryRow(`SELECT next_check_at, check_count FROM payment_orders WHERE id = $1`, open).Scan(&next, &count) //nolint:errcheck
	if d := time.Until(next); count != 1 || d < 50*time.Second || d > 61*time.Second {
		t.Fatalf("open order: next check in %s after %d checks, want ~1m after 1", d, count)
	}
	if row := p.runRow(run.ID); row["status"] != "succeeded" || row["repaired"] != int64(1) || row["scanned"] != int64(6) {
		t.Fatalf("run row %v", row)
	}
	// A second pass right away finds nothing due: the schedule, not the pending count, drives calls.
	run2 := p.pass(reconcile.PassSpec{})
	if run2.Counts.Scanned != 0 {
		t.Fatalf("second pass scanned %d", run2.Counts.Scanned)
	}
}

func TestRecheckBackoff(t *testing.T) {
	cases := []struct {
		checks int
		want   time.Duration
	}{{0, time.Minute}, {1, 2 * time.Minute}, {5, 32 * time.Minute}, {6, time.Hour}, {60, time.Hour}}
	for _, c := range cases {
		if got := reconcile.RecheckDelay(c.checks, time.Minute, time.Hour); got != c.want {
			t.Errorf("RecheckDelay(%d) = %s, want %s", c.checks, got, c.want)
		}
	}
	if got := reconcile.RecheckDelay(10, 0, time.Hour); got != 0 {
		t.Errorf("RECHECK_MIN 0s must stay 0, got %s", got)
	}
}

func TestPassErrorsNeverChangeStateAndComeBackSoon(t *testing.T) {
	t.Parallel()
	p := setupPass(t, func(s *reconcile.RunnerSettings) { s.RecheckMin = 0 })
	errs := map[string]reconcile.PlatformErrorKind{"E-5xx": reconcile.KindRetryable, "E-429": reconcile.KindRateLimited, "E-sig": reconcile.KindBadSignature}
	ids := map[string]int64{}
	for otn, kind := range errs {
		ids[otn] = p.order(orderSpec{otn: otn, createdAgo: 3 * time.Hour}) // expired: an error must not close it
		p.ali.fail(otn, &reconcile.PlatformError{Platform: reconcile.Alipay, Kind: kind})
	}
	ok := p.order(orderSpec{otn: "E-ok", amount: 8880})
	p.ali.set("E-ok", reconcile.StatePaid, "T-ok", 8880)
	run := p.pass(reconcile.PassSpec{})
	if run.Counts.Errors != 3 || run.Counts.Repaired != 1 || run.Status != reconcile.RunSucceeded {
		t.Fatalf("counts %+v status %s: a pass with single-order errors still succeeds", run.Counts, run.Status)
	}
	for otn, id := range ids {
		if s := p.status(id); s != reconcile.StatusPending || p.events(id) != 0 {
			t.Fatalf("%s: status %s after a platform error", otn, s)
		}
		p.ali.set(otn, reconcile.StatePaid, "T-"+otn, 8880)
	}
	if p.status(ok) != reconcile.StatusPaid {
		t.Fatal("the healthy order was not repaired")
	}
	// RECHECK_MIN 0s: the next pass retries them, and they are repaired.
	run = p.pass(reconcile.PassSpec{})
	if run.Counts.Repaired != 3 {
		t.Fatalf("retry pass: %+v", run.Counts)
	}
}

func TestPassFailsWhenEveryCheckFails(t *testing.T) {
	t.Parallel()
	p := setupPass(t)
	for i := range 3 {
		otn := fmt.Sprintf("X-%d", i)
		p.order(orderSpec{otn: otn})
		p.ali.fail(otn, &reconcile.PlatformError{Platform: reconcile.Alipay, Kind: reconcile.KindUnavailable})
	}
	run, err := p.runner.Pass(context.Background(), reconcile.PassSpec{Mode: reconcile.ModeOnce})
	if !errors.Is(err, reconcile.ErrPassFailed) || run.Status != reconcile.RunFailed {
		t.Fatalf("err %v status %s, want ErrPassFailed / failed", err, run.Status)
	}
	if p.runRow(run.ID)["status"] != "failed" {
		t.Fatal("run row not failed")
	}
}

func TestConfigErrorStopsThePass(t *testing.T) {
	t.Parallel()
	p := setupPass(t, func(s *reconcile.RunnerSettings) { s.Concurrency = 1 })
	for i := range 20 {
		otn := fmt.Sprintf("CFG-%02d", i)
		p.order(orderSpec{otn: otn, createdAgo: time.Duration(30-i) * time.Minute})
		p.ali.fail(otn, &reconcile.PlatformError{Platform: reconcile.Alipay, Kind: reconcile.KindConfig, Message: "check RECONCILER_ALIPAY_PRIVATE_KEY_FILE"})
	}
	run, err := p.runner.Pass(context.Background(), reconcile.PassSpec{Mode: reconcile.ModeOnce})
	if reconcile.PlatformErrorKindOf(err) != reconcile.KindConfig {
		t.Fatalf("err = %v, want the config error", err)
	}
	if run.Counts.Scanned > 2 {
		t.Fatalf("a config error must stop the pass at the first sign; scanned %d", run.Counts.Scanned)
	}
	// Nothing stays leased or pushed back: after the fix, the next pass checks every order.
	if n := p.count(`SELECT count(*) FROM payment_orders WHERE lease_owner IS NOT NULL OR next_check_at > now()`); n != 0 {
		t.Fatalf("%d orders leased or pushed back by our own configuration error", n)
	}
	for i := range 20 {
		p.ali.set(fmt.Sprintf("CFG-%02d", i), reconcile.StateOpen, "", 0)
	}
	if run := p.pass(reconcile.PassSpec{}); run.Counts.Scanned != 20 {
		t.Fatalf("after the fix the pass scanned %d of 20", run.Counts.Scanned)
	}
}

func TestCloseRacingPaymentRepairs(t *testing.T) {
	t.Parallel()
	p := setupPass(t)
	id := p.order(orderSpec{otn: "RACE-1", amount: 8880, createdAgo: 3 * time.Hour})
	p.ali.set("RACE-1", reconcile.StateOpen, "", 0)
	// The buyer pays just as we close: the close is refused as already paid, and the
	// confirming query sees the payment.
	p.ali.closeErr["RACE-1"] = &reconcile.PlatformError{Platform: reconcile.Alipay, Kind: reconcile.KindAlreadyPaid}
	racer := &payOnClose{scriptedPlatform: p.ali}
	runner := reconcile.NewRunner(p.applier, p.store, p.store.Runs(), p.store.Locker(), []reconcile.PlatformClient{racer}, p.rs, nil, zerolog.Nop())
	run, err := runner.Pass(context.Background(), reconcile.PassSpec{Mode: reconcile.ModeOnce})
	if err != nil || run.Counts.Repaired != 1 || run.Counts.Closed != 0 {
		t.Fatalf("counts %+v err %v: the payment must win", run.Counts, err)
	}
	assertPaidOnce(t, p.bundle, id, "T-RACE", 8880)
}

// payOnClose pays the trade at the moment we try to close it.
type payOnClose struct{ *scriptedPlatform }

func (r *payOnClose) Close(ctx context.Context, otn string) error {
	err := r.scriptedPlatform.Close(ctx, otn)
	r.set(otn, reconcile.StatePaid, "T-RACE", 8880)
	return err
}

func TestCloseAtPlatformSwitchedOff(t *testing.T) {
	t.Parallel()
	p := setupPass(t, func(s *reconcile.RunnerSettings) { s.CloseAtPlatform = false })
	id := p.order(orderSpec{otn: "NC-1", createdAgo: 3 * time.Hour})
	p.ali.set("NC-1", reconcile.StateOpen, "", 0)
	p.pass(reconcile.PassSpec{})
	if p.status(id) != reconcile.StatusClosed || p.ali.count(p.ali.closes, "NC-1") != 0 {
		t.Fatal("with CLOSE_AT_PLATFORM=false an expired open order is closed locally only")
	}
}

func TestDryRunPassWritesOnlyItsRunRow(t *testing.T) {
	t.Parallel()
	p := setupPass(t)
	id := p.order(orderSpec{otn: "DRY-1", amount: 8880})
	exp := p.order(orderSpec{otn: "DRY-2", createdAgo: 3 * time.Hour})
	p.ali.set("DRY-1", reconcile.StatePaid, "T-DRY", 8880)
	p.ali.set("DRY-2", reconcile.StateOpen, "", 0)
	var before string
	p.db.Get(&before, `SELECT md5(string_agg(row(o.*)::text, ',' ORDER BY id)) FROM payment_orders o`) //nolint:errcheck
	run := p.pass(reconcile.PassSpec{DryRun: true})
	if run.Counts.Repaired != 1 || run.Counts.Closed != 1 {
		t.Fatalf("dry run counts what it would do: %+v", run.Counts)
	}
	var after string
	p.db.Get(&after, `SELECT md5(string_agg(row(o.*)::text, ',' ORDER BY id)) FROM payment_orders o`) //nolint:errcheck
	if before != after || p.status(id) != "PENDING" || p.status(exp) != "PENDING" || p.ali.count(p.ali.closes, "DRY-2") != 0 {
		t.Fatal("dry run changed an order (lease included) or closed at the platform")
	}
	if n := p.count(`SELECT count(*) FROM reconcile_runs WHERE dry_run`); n != 1 {
		t.Fatalf("%d dry run rows", n)
	}
	if n := p.count(`SELECT (SELECT count(*) FROM payment_events) + (SELECT count(*) FROM reconcile_mismatches) + (SELECT count(*) FROM fulfillment_outbox)`); n != 0 {
		t.Fatal("dry run wrote events, findings or outbox rows")
	}
}

func TestShardsPartitionTheOrders(t *testing.T) {
	t.Parallel()
	p := setupPass(t)
	for i := range 40 {
		p.order(orderSpec{otn: fmt.Sprintf("S-%d", i)})
	}
	var total int64
	for i := range 3 {
		run := p.pass(reconcile.PassSpec{Shard: reconcile.Shard{Index: i, Count: 3}})
		total += run.Counts.Scanned
	}
	if total != 40 {
		t.Fatalf("3 shards scanned %d orders, want each of 40 exactly once", total)
	}
	for i := range 40 {
		if q := p.ali.count(p.ali.queries, fmt.Sprintf("S-%d", i)); q != 1 {
			t.Fatalf("order S-%d queried %d times", i, q)
		}
	}
	// The database's shard_hash and reconcile.ShardOf agree.
	var h int64
	p.db.Get(&h, `SELECT shard_hash FROM payment_orders WHERE out_trade_no = 'S-7'`) //nolint:errcheck
	if uint32(h) != reconcile.ShardOf(reconcile.Alipay, testMerchant, "S-7") {
		t.Fatalf("shard_hash %d != ShardOf %d", h, reconcile.ShardOf(reconcile.Alipay, testMerchant, "S-7"))
	}
}

func TestLockHeldByAnotherPass(t *testing.T) {
	t.Parallel()
	p := setupPass(t)
	lock, ok, err := p.store.Locker().TryLock(context.Background(), "payrecon:run:0/1")
	if err != nil || !ok {
		t.Fatal(err)
	}
	defer lock.Unlock()
	if _, err := p.runner.Pass(context.Background(), reconcile.PassSpec{Mode: reconcile.ModeOnce}); !errors.Is(err, reconcile.ErrLockHeld) {
		t.Fatalf("err = %v, want ErrLockHeld", err)
	}
	// Another shard is not blocked.
	if _, err := p.runner.Pass(context.Background(), reconcile.PassSpec{Mode: reconcile.ModeOnce, Shard: reconcile.Shard{Index: 1, Count: 2}}); err != nil {
		t.Fatal(err)
	}
}

func TestOverlappingPassesNeverQueryAnOrderTwiceAtOnce(t *testing.T) {
	t.Parallel()
	p := setupPass(t, func(s *reconcile.RunnerSettings) { s.RecheckMin = 0 })
	p.ali.latency = 5 * time.Millisecond
	for i := range 60 {
		otn := fmt.Sprintf("OV-%d", i)
		p.order(orderSpec{otn: otn})
		p.ali.set(otn, reconcile.StateOpen, "", 0)
	}
	// A run and a backfill over the same orders at once share the leases.
	var wg sync.WaitGroup
	runs := make([]reconcile.Run, 2)
	for i, spec := range []reconcile.PassSpec{
		{Mode: reconcile.ModeOnce},
		{Mode: reconcile.ModeBackfill, From: time.Now().Add(-time.Hour), To: time.Now()},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run, err := p.runner.Pass(context.Background(), spec)
			if err != nil {
				t.Error(err)
			}
			runs[i] = run
		}()
	}
	wg.Wait()
	if p.ali.overlaps != 0 {
		t.Fatalf("%d overlapping queries of one order", p.ali.overlaps)
	}
	if runs[0].Counts.Scanned+runs[1].Counts.Scanned < 60 {
		t.Fatalf("scanned %d + %d, want every order at least once", runs[0].Counts.Scanned, runs[1].Counts.Scanned)
	}
}

func TestInterruptedPassDrainsAndResumes(t *testing.T) {
	t.Parallel()
	p := setupPass(t, func(s *reconcile.RunnerSettings) { s.Concurrency = 2 })
	p.ali.latency = 20 * time.Millisecond
	from := time.Now().Add(-2 * time.Hour)
	for i := range 40 {
		otn := fmt.Sprintf("INT-%02d", i)
		p.order(orderSpec{otn: otn, amount: 8880, createdAgo: time.Duration(40-i) * time.Minute})
		p.ali.set(otn, reconcile.StatePaid, "T-"+otn, 8880)
	}
	ctx, cancel := context.WithCancel(context.Background())
	obs := &cancelAfter{n: 10, cancel: cancel}
	runner := reconcile.NewRunner(p.applier, p.store, p.store.Runs(), p.store.Locker(), []reconcile.PlatformClient{p.ali}, p.rs, obs, zerolog.Nop())
	run, err := runner.Pass(ctx, reconcile.PassSpec{Mode: reconcile.ModeBackfill, From: from, To: time.Now()})
	if !errors.Is(err, reconcile.ErrInterrupted) || run.Status != reconcile.RunInterrupted {
		t.Fatalf("err %v status %s, want interrupted", err, run.Status)
	}
	// Nothing half-applied: every PAID order has its event and outbox row.
	if n := p.count(`SELECT count(*) FROM payment_orders o WHERE status = 'PAID' AND
		(SELECT count(*) FROM payment_events e WHERE e.order_id = o.id) + (SELECT count(*) FROM fulfillment_outbox f WHERE f.order_id = o.id) <> 2`); n != 0 {
		t.Fatalf("%d orders half-applied", n)
	}
	done := p.count(`SELECT count(*) FROM payment_orders WHERE status = 'PAID'`)
	if done == 40 || done < 10 {
		t.Fatalf("%d orders repaired before the interrupt took effect", done)
	}
	if n := p.count(`SELECT count(*) FROM payment_orders WHERE lease_owner IS NOT NULL`); n != 0 {
		t.Fatalf("%d leases left behind after draining", n)
	}
	resumed := p.pass(reconcile.PassSpec{Mode: reconcile.ModeBackfill, Resume: run.ID})
	if resumed.ID != run.ID || resumed.Status != reconcile.RunSucceeded {
		t.Fatalf("resume: %+v", resumed)
	}
	if n := p.count(`SELECT count(*) FROM payment_orders WHERE status = 'PAID'`); n != 40 {
		t.Fatalf("after resume %d of 40 paid", n)
	}
	// The resume continued from the cursor instead of starting over.
	var early int
	for i := range 5 {
		early += p.ali.count(p.ali.queries, fmt.Sprintf("INT-%02d", i))
	}
	if early != 5 {
		t.Fatalf("the first orders were queried %d times in all; the resume must not start over", early)
	}
}

type cancelAfter struct {
	mu     sync.Mutex
	n      int
	cancel func()
}

func (c *cancelAfter) Checked(reconcile.Check) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n--
	if c.n == 0 {
		c.cancel()
	}
}
