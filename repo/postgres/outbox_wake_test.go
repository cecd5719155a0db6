package postgres_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/lib/pq"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/repotest"
)

// pendingOrders inserts n PENDING orders and returns their ids.
func pendingOrders(t *testing.T, db *repotest.DB, prefix string, n int) []int64 {
	t.Helper()
	var ids []int64
	if err := db.Select(&ids, `INSERT INTO payment_orders (platform, merchant_id, out_trade_no, amount_minor, status)
		SELECT 'wechatpay', '1900000001', $1 || g, 500, 'PENDING' FROM generate_series(1, $2) g RETURNING id`, prefix, n); err != nil {
		t.Fatal(err)
	}
	return ids
}

func paidTransition(orderID int64) reconcile.Transition {
	return reconcile.Transition{OrderID: orderID, From: reconcile.StatusPending, To: reconcile.StatusPaid,
		Platform: reconcile.WechatPay, PlatformTradeNo: fmt.Sprintf("42%08d", orderID), AmountMinor: 500, PaidAt: time.Now(),
		Source: reconcile.SourceReconcile, Outbox: &reconcile.OutboxMessage{Kind: reconcile.OutboxKindPaid, Payload: map[string]any{"order_id": orderID}}}
}

// TestOutboxWakeFollowsEveryCommit: transitions with an outbox row NOTIFY after they commit
// (no longer inside their transaction, where PostgreSQL serialises notifying commits), and
// concurrent ones share NOTIFYs without losing the last: once 32 writers are done, the last
// wake-up a listener gets comes after the last row, so a relay woken by it sees them all.
// A transition that wrote no outbox row wakes nobody.
func TestOutboxWakeFollowsEveryCommit(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	db.DB.SetMaxOpenConns(40)
	s := postgres.NewStore(db.DB)
	l, err := postgres.ListenOutbox(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	// A relay's view: on each wake-up, how many rows there are.
	var mu sync.Mutex
	seen := 0
	stop := make(chan struct{})
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		for {
			select {
			case <-stop:
				return
			case <-l.Wake():
				var n int
				if err := db.Get(&n, `SELECT count(*) FROM fulfillment_outbox`); err == nil {
					mu.Lock()
					seen = max(seen, n)
					mu.Unlock()
				}
			}
		}
	}()

	const writers, each = 32, 20
	ids := pendingOrders(t, db, "W-", writers*each)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for _, id := range ids[w*each : (w+1)*each] {
				if moved, err := s.ApplyTransition(context.Background(), paidTransition(id)); err != nil || !moved {
					t.Errorf("transition of order %d: %v, %v", id, moved, err)
				}
			}
		})
	}
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := seen
		mu.Unlock()
		if n == writers*each {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the last wake-up showed %d of %d outbox rows: a commit was never followed by a NOTIFY", n, writers*each)
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	<-watched

	// Nothing written to the outbox: no wake-up.
	drain := func() {
		for {
			select {
			case <-l.Wake():
			case <-time.After(300 * time.Millisecond):
				return
			}
		}
	}
	drain()
	closed := pendingOrders(t, db, "C-", 1)[0]
	if moved, err := s.ApplyTransition(context.Background(), reconcile.Transition{OrderID: closed, From: reconcile.StatusPending,
		To: reconcile.StatusClosed, Platform: reconcile.WechatPay, Source: reconcile.SourceReconcile}); err != nil || !moved {
		t.Fatalf("close: %v, %v", moved, err)
	}
	select {
	case <-l.Wake():
		t.Fatal("a transition without an outbox row woke the relay")
	case <-time.After(time.Second):
	}

	// A succeeded refund's outbox row wakes it.
	paid := pendingOrders(t, db, "R-", 1)[0]
	if _, err := s.ApplyTransition(context.Background(), paidTransition(paid)); err != nil {
		t.Fatal(err)
	}
	drain()
	rid, err := s.InsertRefund(context.Background(), postgres.NewRefund{OrderID: paid, OutRefundNo: "R-1-1", AmountMinor: 100})
	if err != nil {
		t.Fatal(err)
	}
	mv, err := s.ApplyRefundTransition(context.Background(), reconcile.RefundTransition{RefundID: rid, OrderID: paid,
		To: reconcile.RefundSuccess, SucceededAt: time.Now(), Source: reconcile.SourceReconcile,
		Outbox: &reconcile.OutboxMessage{Kind: reconcile.OutboxKindRefundSucceeded, Payload: map[string]any{"refund_id": rid}}})
	if err != nil || !mv.Changed {
		t.Fatalf("refund transition: %+v, %v", mv, err)
	}
	select {
	case <-l.Wake():
	case <-time.After(5 * time.Second):
		t.Fatal("a succeeded refund's outbox row woke nobody")
	}
}

// TestOutboxTriggerStaysQuietForTransitions: a transition's outbox insert tells the trigger
// its writer notifies after the commit, so each sequential transition brings exactly one
// notification (the Store's, from outside the transaction, where it serialises nothing),
// not two; a row inserted any other way still notifies from the trigger.
func TestOutboxTriggerStaysQuietForTransitions(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	s := postgres.NewStore(db.DB)
	l := pq.NewListener(db.URL, 100*time.Millisecond, time.Second, nil)
	defer l.Close()
	if err := l.Listen(postgres.OutboxChannel); err != nil {
		t.Fatal(err)
	}
	count := func(quiet time.Duration) int {
		n := 0
		for {
			select {
			case m := <-l.Notify:
				if m != nil {
					n++
				}
			case <-time.After(quiet):
				return n
			}
		}
	}
	const transitions = 5
	for _, id := range pendingOrders(t, db, "Q-", transitions) {
		if moved, err := s.ApplyTransition(context.Background(), paidTransition(id)); err != nil || !moved {
			t.Fatalf("transition of order %d: %v, %v", id, moved, err)
		}
	}
	if n := count(time.Second); n != transitions {
		t.Fatalf("%d notifications for %d transitions, want one each: the trigger notified inside the transaction too", n, transitions)
	}
	db.MustExec(`INSERT INTO fulfillment_outbox (order_id, kind, payload)
		SELECT id, 'manual', '{}'::jsonb FROM payment_orders WHERE out_trade_no = 'Q-1'`)
	if n := count(time.Second); n != 1 {
		t.Fatalf("%d notifications for a row inserted by hand, want the trigger's one", n)
	}
}
