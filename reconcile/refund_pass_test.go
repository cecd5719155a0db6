package reconcile_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
)

// Call kinds, for scriptedPlatform.busy.
const (
	orderCall  = 0
	refundCall = 1
)

// enter records one call of kind about key (an out_trade_no or out_refund_no) and returns
// what ends it.
func (s *scriptedPlatform) enter(kind int, key string, calls, inFlight map[string]int, overlaps *int) func() {
	s.mu.Lock()
	defer s.mu.Unlock()
	calls[key]++
	inFlight[key]++
	if inFlight[key] > 1 {
		*overlaps++
	}
	s.busy[kind]++
	s.maxBusy = max(s.maxBusy, s.busy[orderCall]+s.busy[refundCall])
	if s.busy[orderCall] > 0 && s.busy[refundCall] > 0 {
		s.mixed = true
	}
	return func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		inFlight[key]--
		s.busy[kind]--
	}
}

func (s *scriptedPlatform) QueryRefund(ctx context.Context, otn, outRefundNo string) (reconcile.RefundResult, error) {
	defer s.enter(refundCall, outRefundNo, s.refundQueries, s.refundInFlight, &s.refundOverlaps)()
	s.mu.Lock()
	gate := s.refundGate
	if s.refundQueries[outRefundNo] > 1 {
		gate = nil
	}
	s.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
		}
	}
	if s.latency > 0 {
		select {
		case <-time.After(s.latency):
		case <-ctx.Done():
			return reconcile.RefundResult{}, &reconcile.PlatformError{Platform: s.platform, Kind: reconcile.KindRetryable, Err: ctx.Err()}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.refundErrs[outRefundNo]; err != nil {
		return reconcile.RefundResult{}, err
	}
	if r, ok := s.refundAnswers[outRefundNo]; ok {
		return r, nil
	}
	return reconcile.RefundResult{Platform: s.platform, MerchantID: s.merchant, OutTradeNo: otn, OutRefundNo: outRefundNo,
		State: reconcile.RefundStateNotFound}, nil
}

// setRefund scripts the platform's answer about one refund of trade otn (tradeNo).
func (s *scriptedPlatform) setRefund(otn, tradeNo, outRefundNo string, st reconcile.RefundState, amount int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refundAnswers[outRefundNo] = reconcile.RefundResult{Platform: s.platform, MerchantID: s.merchant, OutTradeNo: otn,
		PlatformTradeNo: tradeNo, OutRefundNo: outRefundNo, State: st, RawState: string(st), AmountMinor: amount,
		SucceededAt: time.Now()}
	delete(s.refundErrs, outRefundNo)
}

func (s *scriptedPlatform) failRefund(outRefundNo string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refundErrs[outRefundNo] = err
}

func (s *stuckPlatform) QueryRefund(ctx context.Context, otn, outRefundNo string) (reconcile.RefundResult, error) {
	s.waited.Add(1)
	select {
	case <-s.release:
	case <-ctx.Done():
	}
	return s.scriptedPlatform.QueryRefund(ctx, otn, outRefundNo)
}

// paidRefundable inserts a PAID order of account (platform, merchant) created ago, paid in
// full with trade number "T-"+otn, and its PROCESSING refund otn+"-r" of refundAmount
// created refundAgo; it returns both ids.
func (b *bundle) paidRefundable(p reconcile.Platform, merchant, otn string, ago, refundAgo time.Duration, refundAmount int64) (order, refund int64) {
	b.t.Helper()
	order = b.order(orderSpec{platform: p, merchant: merchant, otn: otn, amount: 10000, status: reconcile.StatusPaid,
		tradeNo: "T-" + otn, createdAgo: ago})
	b.db.MustExec(`UPDATE payment_orders SET paid_amount_minor = amount_minor, paid_at = created_at WHERE id = $1`, order)
	return order, b.refund(order, otn+"-r", refundAmount, refundAgo)
}

type refundSchedule struct {
	Status     string     `db:"status"`
	NextCheck  *time.Time `db:"next_check_at"`
	CheckCount int        `db:"check_count"`
	Leased     bool       `db:"leased"`
}

func (b *bundle) refundSchedule(id int64) refundSchedule {
	b.t.Helper()
	var s refundSchedule
	if err := b.db.Get(&s, `SELECT status, next_check_at, check_count, lease_owner IS NOT NULL AS leased
		FROM payment_refunds WHERE id = $1`, id); err != nil {
		b.t.Fatal(err)
	}
	return s
}

// TestPassChecksDueRefunds: a run takes the unsettled refunds that are due (past the grace
// period, inside the lookback, next check reached), asks the platform, lands what it says
// through the refund apply path and schedules the rest with the orders' backoff.
func TestPassChecksDueRefunds(t *testing.T) {
	t.Parallel()
	p := setupPass(t)
	const amount = 3000
	cases := []struct {
		name    string
		ago     time.Duration // the refund's age
		before  reconcile.RefundStatus
		checks  int  // consecutive checks before this pass
		notDue  bool // its next check is an hour away
		answer  reconcile.RefundState
		fail    bool // the platform call fails
		queried bool
		want    reconcile.RefundStatus
		next    time.Duration // the next check written, from now; 0: none
		count   int           // check_count after the pass
	}{
		{name: "success lands", answer: reconcile.RefundStateSuccess, queried: true, want: reconcile.RefundSuccess},
		{name: "closed lands", checks: 3, answer: reconcile.RefundStateClosed, queried: true, want: reconcile.RefundClosed, count: 0},
		{name: "abnormal lands, due again after RECHECK_MIN", checks: 4, answer: reconcile.RefundStateAbnormal, queried: true,
			want: reconcile.RefundAbnormal, next: time.Minute, count: 1},
		{name: "abnormal succeeds", before: reconcile.RefundAbnormal, answer: reconcile.RefundStateSuccess, queried: true,
			want: reconcile.RefundSuccess},
		{name: "processing backs off", answer: reconcile.RefundStateProcessing, queried: true, want: reconcile.RefundProcessing,
			next: time.Minute, count: 1},
		{name: "processing backs off doubled", checks: 2, answer: reconcile.RefundStateProcessing, queried: true,
			want: reconcile.RefundProcessing, next: 4 * time.Minute, count: 3},
		{name: "an error comes back after RECHECK_MIN", checks: 2, fail: true, queried: true, want: reconcile.RefundProcessing,
			next: time.Minute, count: 2},
		{name: "inside the grace period", ago: 30 * time.Second, answer: reconcile.RefundStateSuccess, want: reconcile.RefundProcessing},
		{name: "past the lookback", ago: 100 * time.Hour, answer: reconcile.RefundStateSuccess, want: reconcile.RefundProcessing},
		{name: "not due yet", notDue: true, answer: reconcile.RefundStateSuccess, want: reconcile.RefundProcessing},
		{name: "closed already", before: reconcile.RefundClosed, answer: reconcile.RefundStateSuccess, want: reconcile.RefundClosed},
	}
	type made struct{ order, refund int64 }
	ids := make([]made, len(cases))
	want := reconcile.CounterValues{}
	for i, tc := range cases {
		otn := fmt.Sprintf("RF-%02d", i)
		if tc.ago == 0 {
			tc.ago = 10 * time.Minute
		}
		ids[i].order, ids[i].refund = p.paidRefundable(reconcile.Alipay, testMerchant, otn, tc.ago+time.Minute, tc.ago, amount)
		if tc.before != "" || tc.checks != 0 || tc.notDue {
			p.db.MustExec(`UPDATE payment_refunds SET status = COALESCE(NULLIF($2, ''), status), check_count = $3,
				next_check_at = CASE WHEN $4 THEN now() + interval '1 hour' END WHERE id = $1`,
				ids[i].refund, string(tc.before), tc.checks, tc.notDue)
		}
		p.ali.setRefund(otn, "T-"+otn, otn+"-r", tc.answer, amount)
		if tc.fail {
			p.ali.failRefund(otn+"-r", &reconcile.PlatformError{Platform: reconcile.Alipay, Kind: reconcile.KindRetryable})
		}
		switch {
		case !tc.queried:
		case tc.fail:
			want.Scanned, want.Errors = want.Scanned+1, want.Errors+1
		case tc.answer == reconcile.RefundStateProcessing:
			want.Scanned, want.StillPending = want.Scanned+1, want.StillPending+1
		default:
			want.Scanned, want.RefundsRepaired = want.Scanned+1, want.RefundsRepaired+1
		}
	}

	run := p.pass(reconcile.PassSpec{})
	if run.Counts != want || run.Status != reconcile.RunSucceeded {
		t.Fatalf("run %s counts %+v, want %+v", run.Status, run.Counts, want)
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			otn := fmt.Sprintf("RF-%02d", i)
			queried := p.ali.count(p.ali.refundQueries, otn+"-r")
			if queried != map[bool]int{true: 1}[tc.queried] {
				t.Fatalf("queried %d times, want queried=%v", queried, tc.queried)
			}
			s := p.refundSchedule(ids[i].refund)
			if s.Status != string(tc.want) || s.Leased {
				t.Fatalf("refund %s (leased %v), want %s and no lease", s.Status, s.Leased, tc.want)
			}
			if !tc.queried {
				return
			}
			if s.CheckCount != tc.count {
				t.Errorf("check_count %d, want %d", s.CheckCount, tc.count)
			}
			switch {
			case tc.next == 0 && s.NextCheck != nil:
				t.Errorf("next check at %s, want none", s.NextCheck)
			case tc.next != 0 && (s.NextCheck == nil || time.Until(*s.NextCheck) < tc.next-15*time.Second || time.Until(*s.NextCheck) > tc.next):
				t.Errorf("next check %v, want in %s", s.NextCheck, tc.next)
			}
			if tc.want == reconcile.RefundSuccess {
				assertRefundedOnce(t, p.bundle, ids[i].order, ids[i].refund)
				if n := p.count(`SELECT count(*) FROM payment_events WHERE refund_id = $1 AND source = 'reconcile'`, ids[i].refund); n != 1 {
					t.Errorf("%d events of source reconcile", n)
				}
				if r := p.refundState(ids[i].refund); r.Refunded != amount || r.Order != "PAID" {
					t.Errorf("order after a partial refund: %+v", r)
				}
			}
			if tc.want == reconcile.RefundAbnormal && tc.before == "" {
				if n := p.count(`SELECT count(*) FROM reconcile_mismatches WHERE out_refund_no = $1 AND kind = 'REFUND_ABNORMAL'`, otn+"-r"); n != 1 {
					t.Errorf("%d REFUND_ABNORMAL findings, want 1", n)
				}
			}
		})
	}
	var row struct {
		Scanned         int64 `db:"scanned"`
		RefundsRepaired int64 `db:"refunds_repaired"`
	}
	if err := p.db.Get(&row, `SELECT scanned, refunds_repaired FROM reconcile_runs WHERE id = $1`, run.ID); err != nil ||
		row.Scanned != want.Scanned || row.RefundsRepaired != want.RefundsRepaired {
		t.Fatalf("run row %+v (%v), want scanned %d, refunds_repaired %d", row, err, want.Scanned, want.RefundsRepaired)
	}
	// Nothing is due again at once: the schedule, not the number of open refunds, drives calls.
	if again := p.pass(reconcile.PassSpec{}); again.Counts.Scanned != 0 {
		t.Fatalf("a second pass right away scanned %d", again.Counts.Scanned)
	}
}

// TestOrdersAndRefundsShareTheWorkers: one account's pool serves both kinds. When the orders
// due are fewer than the free workers, refunds fill the rest of the same batch: every
// worker is busy, and orders and refunds are in flight together.
func TestOrdersAndRefundsShareTheWorkers(t *testing.T) {
	t.Parallel()
	p := setupPass(t, func(s *reconcile.RunnerSettings) { s.Concurrency = 8 })
	// Long enough that the orders' checks are still in flight when the refunds' take comes
	// back, however loaded the machine (at 50 ms a slow take under load found them done).
	p.ali.latency = 500 * time.Millisecond
	for i := range 3 {
		otn := fmt.Sprintf("SH-O-%d", i)
		p.order(orderSpec{otn: otn})
		p.ali.set(otn, reconcile.StateOpen, "", 0)
	}
	for i := range 20 {
		otn := fmt.Sprintf("SH-R-%02d", i)
		p.paidRefundable(reconcile.Alipay, testMerchant, otn, time.Hour, 10*time.Minute, 1000)
		p.ali.setRefund(otn, "T-"+otn, otn+"-r", reconcile.RefundStateSuccess, 1000)
	}
	run := p.pass(reconcile.PassSpec{})
	if run.Counts.Scanned != 23 || run.Counts.RefundsRepaired != 20 || run.Counts.StillPending != 3 {
		t.Fatalf("counts %+v", run.Counts)
	}
	p.ali.mu.Lock()
	defer p.ali.mu.Unlock()
	if p.ali.maxBusy != 8 || !p.ali.mixed {
		t.Fatalf("at most %d of 8 workers busy, orders and refunds together: %v; want the refunds to fill the batch the orders left",
			p.ali.maxBusy, p.ali.mixed)
	}
}

// TestShardsPartitionRefundsByTheirOrder: a refund belongs to its order's shard, so shards
// see disjoint sets of refunds whose union is all of them.
func TestShardsPartitionRefundsByTheirOrder(t *testing.T) {
	t.Parallel()
	p := setupPass(t)
	const n, shards = 30, 3
	for i := range n {
		otn := fmt.Sprintf("SR-%02d", i)
		p.paidRefundable(reconcile.Alipay, testMerchant, otn, time.Hour, 10*time.Minute, 1000)
		p.ali.setRefund(otn, "T-"+otn, otn+"-r", reconcile.RefundStateProcessing, 1000)
	}
	var mu sync.Mutex
	seen := map[string]int{} // out_trade_no -> the shard that checked its refund
	for i := range shards {
		obs := observerFunc(func(c reconcile.Check) {
			mu.Lock()
			defer mu.Unlock()
			if c.Refund == nil {
				t.Errorf("shard %d checked order %s, want refunds only", i, c.Order.OutTradeNo)
				return
			}
			if prev, dup := seen[c.Refund.OutTradeNo]; dup {
				t.Errorf("refund of %s checked by shards %d and %d", c.Refund.OutTradeNo, prev, i)
			}
			seen[c.Refund.OutTradeNo] = i
		})
		runner := reconcile.NewRunner(p.applier, p.store, p.store.Runs(), p.store.Locker(), []reconcile.PlatformClient{p.ali}, p.rs, obs, zerolog.Nop())
		if _, err := runner.Pass(context.Background(), reconcile.PassSpec{Mode: reconcile.ModeOnce, Shard: reconcile.Shard{Index: i, Count: shards}}); err != nil {
			t.Fatal(err)
		}
	}
	if len(seen) != n {
		t.Fatalf("%d shards checked %d of %d refunds", shards, len(seen), n)
	}
	for otn, shard := range seen {
		if want := int(reconcile.ShardOf(reconcile.Alipay, testMerchant, otn) % shards); shard != want {
			t.Errorf("the refund of %s was checked by shard %d, its order's shard is %d", otn, shard, want)
		}
	}
}

// TestOverlappingPassesNeverQueryARefundTwiceAtOnce: a run and a backfill over the same
// refunds share the leases. While the run's queries of every refund hang (in flight, the
// refunds leased to it), a backfill of the same window checks the orders and skips the
// refunds; once let go, the run lands its answers, and no refund was ever asked twice at once.
func TestOverlappingPassesNeverQueryARefundTwiceAtOnce(t *testing.T) {
	t.Parallel()
	p := setupPass(t, func(s *reconcile.RunnerSettings) { s.Concurrency = 8 })
	const n = 8 // one batch: the run holds them all
	for i := range n {
		otn := fmt.Sprintf("OR-%d", i)
		p.paidRefundable(reconcile.Alipay, testMerchant, otn, time.Hour, time.Duration(10+i)*time.Minute, 1000)
		p.ali.set(otn, reconcile.StatePaid, "T-"+otn, 10000)
		p.ali.setRefund(otn, "T-"+otn, otn+"-r", reconcile.RefundStateSuccess, 1000)
	}
	gate := make(chan struct{})
	p.ali.refundGate = gate
	done := make(chan reconcile.Run, 1)
	go func() {
		run, err := p.runner.Pass(context.Background(), reconcile.PassSpec{Mode: reconcile.ModeOnce})
		if err != nil {
			t.Error(err)
		}
		done <- run
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		p.ali.mu.Lock()
		held := p.ali.busy[refundCall]
		p.ali.mu.Unlock()
		if held == n {
			break
		}
		if time.Now().After(deadline) {
			close(gate)
			t.Fatalf("the run has %d of %d refund queries in flight", held, n)
		}
	}
	backfill := p.pass(reconcile.PassSpec{Mode: reconcile.ModeBackfill, From: time.Now().Add(-2 * time.Hour), To: time.Now()})
	close(gate)
	run := <-done
	if backfill.Counts.Scanned != n || backfill.Counts.RefundsRepaired != 0 || run.Counts.RefundsRepaired != n {
		t.Fatalf("backfill %+v, run %+v: want the backfill to check the orders only, the run to land every refund",
			backfill.Counts, run.Counts)
	}
	p.ali.mu.Lock()
	defer p.ali.mu.Unlock()
	if p.ali.refundOverlaps != 0 {
		t.Fatalf("%d overlapping queries of one refund", p.ali.refundOverlaps)
	}
	for i := range n {
		if q := p.ali.refundQueries[fmt.Sprintf("OR-%d-r", i)]; q != 1 {
			t.Errorf("refund OR-%d-r queried %d times, want once", i, q)
		}
	}
}

// TestBackfillRechecksTheRefundsOfItsWindow: a backfill re-checks every refund of the orders
// created in its window, whatever the refund's status, age or schedule, and no other.
func TestBackfillRechecksTheRefundsOfItsWindow(t *testing.T) {
	t.Parallel()
	p := setupPass(t)
	cases := []struct {
		otn        string
		orderAgo   time.Duration
		refundAgo  time.Duration
		setup      string // SQL run on the refund ($1)
		answer     reconcile.RefundState
		rechecked  bool
		wantStatus reconcile.RefundStatus
	}{
		{"BF-before", 5 * time.Hour, 10 * time.Minute, "", reconcile.RefundStateSuccess, false, reconcile.RefundProcessing},
		{"BF-processing", 90 * time.Minute, 80 * time.Minute, "", reconcile.RefundStateSuccess, true, reconcile.RefundSuccess},
		{"BF-young", 30 * time.Minute, 10 * time.Second, "", reconcile.RefundStateClosed, true, reconcile.RefundClosed},
		{"BF-not-due", 40 * time.Minute, 30 * time.Minute, `UPDATE payment_refunds SET next_check_at = now() + interval '1 hour' WHERE id = $1`,
			reconcile.RefundStateSuccess, true, reconcile.RefundSuccess},
		{"BF-closed", 50 * time.Minute, 40 * time.Minute, `UPDATE payment_refunds SET status = 'CLOSED' WHERE id = $1`,
			reconcile.RefundStateClosed, true, reconcile.RefundClosed},
		{"BF-after", 10 * time.Minute, 5 * time.Minute, "", reconcile.RefundStateSuccess, false, reconcile.RefundProcessing},
	}
	ids := map[string]int64{}
	for _, tc := range cases {
		_, ids[tc.otn] = p.paidRefundable(reconcile.Alipay, testMerchant, tc.otn, tc.orderAgo, tc.refundAgo, 1000)
		if tc.setup != "" {
			p.db.MustExec(tc.setup, ids[tc.otn])
		}
		p.ali.set(tc.otn, reconcile.StatePaid, "T-"+tc.otn, 10000)
		p.ali.setRefund(tc.otn, "T-"+tc.otn, tc.otn+"-r", tc.answer, 1000)
	}
	run := p.pass(reconcile.PassSpec{Mode: reconcile.ModeBackfill, From: time.Now().Add(-2 * time.Hour), To: time.Now().Add(-20 * time.Minute)})
	// Four orders in the window (unchanged) and their four refunds: three land, one agrees.
	want := reconcile.CounterValues{Scanned: 8, Unchanged: 5, RefundsRepaired: 3}
	if run.Counts != want {
		t.Fatalf("counts %+v, want %+v", run.Counts, want)
	}
	for _, tc := range cases {
		if q := p.ali.count(p.ali.refundQueries, tc.otn+"-r"); q != map[bool]int{true: 1}[tc.rechecked] {
			t.Errorf("%s: refund queried %d times, want rechecked=%v", tc.otn, q, tc.rechecked)
		}
		if s := p.refundSchedule(ids[tc.otn]); s.Status != string(tc.wantStatus) || s.Leased {
			t.Errorf("%s: refund %+v, want %s unleased", tc.otn, s, tc.wantStatus)
		}
	}
	if n := p.count(`SELECT count(*) FROM payment_events WHERE refund_id IS NOT NULL AND source <> 'backfill'`); n != 0 {
		t.Fatalf("%d refund events of a backfill not marked backfill", n)
	}
}

// TestInterruptedBackfillResumesItsRefunds: an interrupted backfill resumes its refunds from
// their own cursor: each refund (and each order) is asked once in all.
func TestInterruptedBackfillResumesItsRefunds(t *testing.T) {
	t.Parallel()
	p := setupPass(t, func(s *reconcile.RunnerSettings) { s.Concurrency = 2 })
	p.ali.latency = 10 * time.Millisecond
	const n = 20
	for i := range n {
		otn := fmt.Sprintf("IR-%02d", i)
		p.paidRefundable(reconcile.Alipay, testMerchant, otn, time.Duration(60-i)*time.Minute, time.Duration(30-i)*time.Minute, 1000)
		p.ali.set(otn, reconcile.StatePaid, "T-"+otn, 10000)
		p.ali.setRefund(otn, "T-"+otn, otn+"-r", reconcile.RefundStateSuccess, 1000)
	}
	ctx, cancel := context.WithCancel(context.Background())
	obs := &cancelAfter{n: n + 6, cancel: cancel} // the orders, then a few refunds
	runner := reconcile.NewRunner(p.applier, p.store, p.store.Runs(), p.store.Locker(), []reconcile.PlatformClient{p.ali}, p.rs, obs, zerolog.Nop())
	spec := reconcile.PassSpec{Mode: reconcile.ModeBackfill, From: time.Now().Add(-2 * time.Hour), To: time.Now()}
	run, err := runner.Pass(ctx, spec)
	if !errors.Is(err, reconcile.ErrInterrupted) {
		t.Fatalf("err %v, want interrupted", err)
	}
	if done := p.count(`SELECT count(*) FROM payment_refunds WHERE status = 'SUCCESS'`); done == n || done < 6 {
		t.Fatalf("%d refunds landed before the interrupt took effect", done)
	}
	resumed := p.pass(reconcile.PassSpec{Mode: reconcile.ModeBackfill, Resume: run.ID})
	if resumed.Status != reconcile.RunSucceeded || resumed.Counts.RefundsRepaired != n {
		t.Fatalf("resumed run %s, counts %+v", resumed.Status, resumed.Counts)
	}
	for i := range n {
		otn := fmt.Sprintf("IR-%02d", i)
		if q, r := p.ali.count(p.ali.queries, otn), p.ali.count(p.ali.refundQueries, otn+"-r"); q != 1 || r != 1 {
			t.Errorf("%s asked %d times, its refund %d times; want once each", otn, q, r)
		}
	}
}

// TestDryRunChecksRefundsWritingNothing: a dry run counts the refunds it would land and
// writes nothing: no transition, no lease, no schedule, no event, outbox row or finding.
func TestDryRunChecksRefundsWritingNothing(t *testing.T) {
	t.Parallel()
	p := setupPass(t)
	p.paidRefundable(reconcile.Alipay, testMerchant, "DR-1", time.Hour, 10*time.Minute, 1000)
	p.paidRefundable(reconcile.Alipay, testMerchant, "DR-2", time.Hour, 10*time.Minute, 1000)
	p.paidRefundable(reconcile.Alipay, testMerchant, "DR-3", time.Hour, 10*time.Minute, 1000)
	p.ali.setRefund("DR-1", "T-DR-1", "DR-1-r", reconcile.RefundStateSuccess, 1000)
	p.ali.setRefund("DR-2", "T-DR-2", "DR-2-r", reconcile.RefundStateAbnormal, 1000)
	p.ali.setRefund("DR-3", "T-DR-3", "DR-3-r", reconcile.RefundStateSuccess, 999) // a finding
	for _, otn := range []string{"DR-1", "DR-2", "DR-3"} {
		p.ali.set(otn, reconcile.StatePaid, "T-"+otn, 10000) // the backfill re-checks the orders too
	}
	digest := func() string {
		var d string
		if err := p.db.Get(&d, `SELECT md5((SELECT string_agg(row(r.*)::text, ',' ORDER BY id) FROM payment_refunds r) ||
			(SELECT string_agg(row(o.*)::text, ',' ORDER BY id) FROM payment_orders o))`); err != nil {
			t.Fatal(err)
		}
		return d
	}
	before := digest()
	for _, mode := range []reconcile.RunMode{reconcile.ModeOnce, reconcile.ModeBackfill} {
		run := p.pass(reconcile.PassSpec{Mode: mode, DryRun: true, From: time.Now().Add(-2 * time.Hour), To: time.Now()})
		if run.Counts.RefundsRepaired != 2 || run.Counts.Mismatches != 1 {
			t.Fatalf("%s dry run counts %+v, want what it would do", mode, run.Counts)
		}
	}
	if digest() != before {
		t.Fatal("a dry run changed a refund or an order (a lease or a schedule included)")
	}
	if n := p.count(`SELECT (SELECT count(*) FROM payment_events) + (SELECT count(*) FROM reconcile_mismatches) + (SELECT count(*) FROM fulfillment_outbox)`); n != 0 {
		t.Fatal("a dry run wrote events, findings or outbox rows")
	}
	if v := p.refundClaim(reconcile.Alipay, "T-DR-1", "DR-1-r"); v != "" {
		t.Fatalf("a dry run left the refund claim %q", v)
	}
}

func (b *bundle) refundClaim(pl reconcile.Platform, tradeNo, outRefundNo string) string {
	v, _ := b.redis.Client.Get(context.Background(), b.applier.RefundClaimKey(pl, tradeNo, outRefundNo)).Result()
	return v
}

// TestSlowAccountNeverHoldsAnotherAccountsRefunds: with every worker of a stuck account
// blocked on its refunds, another account's refunds all land; only then is the stuck one
// let go.
func TestSlowAccountNeverHoldsAnotherAccountsRefunds(t *testing.T) {
	t.Parallel()
	p := setupPass(t, func(s *reconcile.RunnerSettings) { s.Concurrency = 4 })
	slow := &stuckPlatform{scriptedPlatform: newScripted(reconcile.Alipay, "2021000000000009"), release: make(chan struct{})}
	fast := newScripted(reconcile.WechatPay, "1900000001")
	for i := range 20 {
		otn := fmt.Sprintf("SLOW-%02d", i)
		p.paidRefundable(reconcile.Alipay, slow.merchant, otn, time.Hour, time.Duration(50-i)*time.Minute, 1000)
		slow.setRefund(otn, "T-"+otn, otn+"-r", reconcile.RefundStateSuccess, 1000)
		otn = fmt.Sprintf("FAST-%02d", i)
		p.paidRefundable(reconcile.WechatPay, fast.merchant, otn, time.Hour, time.Duration(49-i)*time.Minute, 1000)
		fast.setRefund(otn, "T-"+otn, otn+"-r", reconcile.RefundStateSuccess, 1000)
	}
	var fastDone atomic.Int64
	obs := observerFunc(func(c reconcile.Check) {
		if c.Refund != nil && c.Refund.MerchantID == fast.merchant && c.Applied.Outcome == reconcile.OutcomeApplied && fastDone.Add(1) == 20 {
			close(slow.release)
		}
	})
	runner := reconcile.NewRunner(p.applier, p.store, p.store.Runs(), p.store.Locker(),
		[]reconcile.PlatformClient{slow, fast}, p.rs, obs, zerolog.Nop())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	run, err := runner.Pass(ctx, reconcile.PassSpec{Mode: reconcile.ModeOnce})
	if err != nil {
		t.Fatalf("pass: %v (the fast account's refunds waited behind the stuck one)", err)
	}
	if run.Counts.RefundsRepaired != 40 || fastDone.Load() != 20 {
		t.Fatalf("refunds repaired %d (fast %d), want 40 (20)", run.Counts.RefundsRepaired, fastDone.Load())
	}
	if got := slow.waited.Load(); got < 4 {
		t.Fatalf("the stuck account had %d refunds in flight; the test needs its workers all busy", got)
	}
}

// TestPassTakesOverADeadRunsRefunds: a refund leased by a run whose process died (and whose
// claim that run may have died holding) is checked by the next pass at once, and so is one
// a finished run failed to release.
func TestPassTakesOverADeadRunsRefunds(t *testing.T) {
	t.Parallel()
	p := setupPass(t)
	ctx := context.Background()
	startRun := func(status reconcile.RunStatus) int64 {
		r := reconcile.Run{Mode: reconcile.ModeOnce, Status: reconcile.RunRunning, StartedAt: time.Now().Add(-time.Minute),
			Shard: reconcile.Shard{Index: 0, Count: 1}, LockName: "payrecon:run:0/1",
			Session: reconcile.Session{PID: 999999, Start: time.Now().Add(-time.Hour)}}
		if err := p.store.Runs().StartRun(ctx, &r); err != nil {
			t.Fatal(err)
		}
		if status != reconcile.RunRunning {
			r.Status = status
			if err := p.store.Runs().FinishRun(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		return r.ID
	}
	dead, finished := startRun(reconcile.RunRunning), startRun(reconcile.RunSucceeded)
	refunds := map[string]int64{}
	for otn, owner := range map[string]int64{"DEAD-1": dead, "FIN-1": finished} {
		_, refunds[otn] = p.paidRefundable(reconcile.Alipay, testMerchant, otn, time.Hour, 10*time.Minute, 1000)
		p.ali.setRefund(otn, "T-"+otn, otn+"-r", reconcile.RefundStateSuccess, 1000)
		p.db.MustExec(`UPDATE payment_refunds SET lease_owner = $2, lease_until = now() + interval '1 hour' WHERE id = $1`,
			refunds[otn], fmt.Sprintf("run-%d", owner))
	}
	// The dead run died between its claim and its commit: its PROCESSING claim stays for
	// the claim lease, and must not stop the refund landing now.
	if err := p.redis.Client.Set(ctx, p.applier.RefundClaimKey(reconcile.Alipay, "T-DEAD-1", "DEAD-1-r"), "PROCESSING", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	run := p.pass(reconcile.PassSpec{Mode: reconcile.ModeOnce})
	got := fmt.Sprint(run.TakenOver)
	want := fmt.Sprint([]reconcile.TakenOver{
		{RunID: dead, Orders: []int64{}, Refunds: []int64{refunds["DEAD-1"]}},
		{RunID: finished, Finished: true, Orders: []int64{}, Refunds: []int64{refunds["FIN-1"]}},
	})
	if got != want {
		t.Fatalf("taken over %s, want %s", got, want)
	}
	if run.Counts.RefundsRepaired != 2 {
		t.Fatalf("counts %+v: both refunds must be checked at once and land", run.Counts)
	}
	for otn, id := range refunds {
		if s := p.refundSchedule(id); s.Status != "SUCCESS" || s.Leased {
			t.Errorf("%s: %+v", otn, s)
		}
	}
	if s := p.runRow(dead)["status"]; s != "interrupted" {
		t.Fatalf("dead run row %v, want interrupted", s)
	}
}

// takeCounter is the store, counting each account's order and refund takes.
type takeCounter struct {
	*postgres.Store
	mu              sync.Mutex
	orders, refunds map[string]int
}

func (c *takeCounter) Take(ctx context.Context, q reconcile.TakeQuery) ([]reconcile.Order, error) {
	c.mu.Lock()
	c.orders[q.Account.MerchantID]++
	c.mu.Unlock()
	return c.Store.Take(ctx, q)
}

func (c *takeCounter) TakeRefunds(ctx context.Context, q reconcile.TakeQuery) ([]reconcile.DueRefund, error) {
	c.mu.Lock()
	c.refunds[q.Account.MerchantID]++
	c.mu.Unlock()
	return c.Store.TakeRefunds(ctx, q)
}

// An account is taken only for the kinds it has due: a service provider's thousands of
// sub-merchants with orders due and no refunds cost one take each, not two.
func TestPassTakesOnlyTheKindsAnAccountHasDue(t *testing.T) {
	t.Parallel()
	p := setupPass(t)
	ordersOnly := newScripted(reconcile.WechatPay, "1900000001")
	refundsOnly := newScripted(reconcile.WechatPay, "1900000002")
	both := p.ali
	for i := range 3 {
		otn := fmt.Sprintf("KIND-O%d", i)
		p.order(orderSpec{otn: otn, platform: reconcile.WechatPay, merchant: ordersOnly.merchant})
		ordersOnly.set(otn, reconcile.StatePaid, "TO-"+otn, 8880)
		otn = fmt.Sprintf("KIND-R%d", i)
		p.paidRefundable(reconcile.WechatPay, refundsOnly.merchant, otn, time.Hour, 30*time.Minute, 1000)
		refundsOnly.setRefund(otn, "T-"+otn, otn+"-r", reconcile.RefundStateSuccess, 1000)
		otn = fmt.Sprintf("KIND-B%d", i)
		p.order(orderSpec{otn: otn, merchant: both.merchant})
		both.set(otn, reconcile.StatePaid, "TB-"+otn, 8880)
		otn = fmt.Sprintf("KIND-BR%d", i)
		p.paidRefundable(reconcile.Alipay, both.merchant, otn, time.Hour, 30*time.Minute, 1000)
		both.setRefund(otn, "T-"+otn, otn+"-r", reconcile.RefundStateSuccess, 1000)
	}
	q := &takeCounter{Store: p.store, orders: map[string]int{}, refunds: map[string]int{}}
	runner := reconcile.NewRunner(p.applier, q, p.store.Runs(), p.store.Locker(),
		[]reconcile.PlatformClient{both, ordersOnly, refundsOnly}, p.rs, nil, zerolog.Nop())
	run, err := runner.Pass(context.Background(), reconcile.PassSpec{Mode: reconcile.ModeOnce})
	if err != nil || run.Counts.Repaired != 6 || run.Counts.RefundsRepaired != 6 {
		t.Fatalf("pass: %v, repaired %d orders and %d refunds, want 6 and 6", err, run.Counts.Repaired, run.Counts.RefundsRepaired)
	}
	want := map[string][2]int{ordersOnly.merchant: {1, 0}, refundsOnly.merchant: {0, 1}, both.merchant: {1, 1}}
	for merchant, w := range want {
		if got := [2]int{q.orders[merchant], q.refunds[merchant]}; got != w {
			t.Errorf("account %s: %d order takes and %d refund takes, want %d and %d", merchant, got[0], got[1], w[0], w[1])
		}
	}
}
