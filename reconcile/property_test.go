package reconcile_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/payrecon/payrecon/reconcile"
)

// TestApplyPropertiesUnderRandomInterleavings throws random mixes of answers (paid with one
// of two trade numbers, wrong amounts, closed, refunded, open, unknown, failed) from random
// sources at a few orders, all at once, and checks the invariants that must hold whatever
// the interleaving.
func TestApplyPropertiesUnderRandomInterleavings(t *testing.T) {
	t.Parallel()
	b := setup(t, withRedis)
	var iteration atomic.Int64
	states := []reconcile.PlatformState{reconcile.StatePaid, reconcile.StatePaid, reconcile.StateClosed,
		reconcile.StateRefunded, reconcile.StateOpen, reconcile.StateNotFound, reconcile.StateFailed}
	sources := []reconcile.Source{reconcile.SourceNotify, reconcile.SourceReconcile, reconcile.SourceBackfill, reconcile.SourceStatement}

	rapid.Check(t, func(rt *rapid.T) {
		it := iteration.Add(1)
		nOrders := rapid.IntRange(1, 3).Draw(rt, "orders")
		type ord struct {
			id     int64
			otn    string
			amount int64
		}
		orders := make([]ord, nOrders)
		for i := range orders {
			o := ord{otn: fmt.Sprintf("P%d-%d", it, i), amount: rapid.Int64Range(1, 100000).Draw(rt, "amount")}
			ago := rapid.SampledFrom([]time.Duration{5 * time.Minute, 3 * time.Hour}).Draw(rt, "age")
			o.id = b.order(orderSpec{otn: o.otn, amount: o.amount, createdAgo: ago})
			orders[i] = o
		}
		type step struct {
			r    reconcile.Result
			opts reconcile.ApplyOptions
		}
		steps := rapid.SliceOfN(rapid.Custom(func(rt *rapid.T) step {
			o := orders[rapid.IntRange(0, nOrders-1).Draw(rt, "order")]
			st := rapid.SampledFrom(states).Draw(rt, "state")
			r := stateResult(o.otn, st, rapid.SampledFrom(sources).Draw(rt, "source"))
			if st == reconcile.StatePaid || st == reconcile.StateRefunded {
				r.PlatformTradeNo = fmt.Sprintf("T-%s-%d", o.otn, rapid.IntRange(1, 2).Draw(rt, "trade"))
				r.AmountMinor = o.amount
				if rapid.IntRange(0, 5).Draw(rt, "wrong amount") == 0 {
					r.AmountMinor = o.amount + 1
				}
			}
			return step{r: r, opts: reconcile.ApplyOptions{CloseIfExpired: rapid.Bool().Draw(rt, "close")}}
		}), 2, 16).Draw(rt, "steps")

		var wg sync.WaitGroup
		errs := make(chan error, len(steps))
		for _, s := range steps {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := b.applier.ApplyResult(context.Background(), s.r, s.opts); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			rt.Fatalf("apply failed: %v", err)
		}

		for _, o := range orders {
			var events []string
			if err := b.db.Select(&events, `SELECT event_type FROM payment_events WHERE order_id = $1 ORDER BY id`, o.id); err != nil {
				rt.Fatal(err)
			}
			// Legal and one-way: starting from PENDING, each event is a legal transition.
			cur := reconcile.StatusPending
			for _, e := range events {
				if !reconcile.CanTransition(cur, reconcile.Status(e)) {
					rt.Fatalf("order %s: illegal %s -> %s in %v", o.otn, cur, e, events)
				}
				cur = reconcile.Status(e)
			}
			var row struct {
				Status  string  `db:"status"`
				TradeNo *string `db:"platform_trade_no"`
				Paid    *int64  `db:"paid_amount_minor"`
			}
			if err := b.db.Get(&row, `SELECT status, platform_trade_no, paid_amount_minor FROM payment_orders WHERE id = $1`, o.id); err != nil {
				rt.Fatal(err)
			}
			if row.Status != string(cur) {
				rt.Fatalf("order %s: status %s but events say %s (%v)", o.otn, row.Status, cur, events)
			}
			paidEvents := b.count(`SELECT count(*) FROM payment_events WHERE order_id = $1 AND event_type = 'PAID'`, o.id)
			if paidEvents > 1 || b.outbox(o.id) != paidEvents {
				rt.Fatalf("order %s: %d PAID events, %d outbox rows", o.otn, paidEvents, b.outbox(o.id))
			}
			if row.Status == "PAID" && (row.Paid == nil || *row.Paid != o.amount || row.TradeNo == nil) {
				rt.Fatalf("order %s paid with a wrong amount or no trade number: %+v", o.otn, row)
			}
		}
		if n := b.count(`SELECT count(*) FROM (SELECT 1 FROM reconcile_mismatches
			GROUP BY platform, merchant_id, out_trade_no, kind HAVING count(*) > 1) d`); n != 0 {
			rt.Fatalf("%d duplicated findings", n)
		}
	})
}
