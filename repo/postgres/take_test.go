package postgres_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/repotest"
)

// TestTakeTakesBackItsOwnLeasesPastTheCursor: a take whose answer never reached the pass (the
// connection cut after the commit) leased orders the pass never saw. The same pass asking
// again from the same cursor gets them back at once instead of leaving them to wait out the
// lease; another run still cannot take them, nor can the pass take back what lies at or
// before its cursor (orders it has in flight).
func TestTakeTakesBackItsOwnLeasesPastTheCursor(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := repotest.NewDB(t)
	s := postgres.NewStore(db.DB)
	const merchant = "2021000000000001"
	for i := range 6 {
		insertOrder(t, db, "alipay", merchant, fmt.Sprintf("TK-%d", i), 100, "PENDING")
	}
	now := time.Now()
	take := func(owner string, after reconcile.Cursor, limit int) []reconcile.Order {
		t.Helper()
		got, err := s.Take(ctx, reconcile.TakeQuery{Mode: reconcile.ModeOnce, Now: now, PassStart: now,
			Lookback: 1000 * time.Hour, Shard: reconcile.Shard{Index: 0, Count: 1}, Limit: limit, Lease: 2 * time.Minute,
			Owner: owner, After: after, Account: reconcile.AccountKey{Platform: reconcile.Alipay, MerchantID: merchant}})
		if err != nil {
			t.Fatalf("take as %s: %v", owner, err)
		}
		return got
	}
	nos := func(os []reconcile.Order) (out []string) {
		for _, o := range os {
			out = append(out, o.OutTradeNo)
		}
		return out
	}

	first := take("run-1", reconcile.Cursor{}, 2) // in flight: TK-0, TK-1
	cursor := reconcile.Cursor{CreatedAt: first[1].CreatedAt, ID: first[1].ID}
	lost := take("run-1", cursor, 2) // leased TK-2, TK-3; pretend the answer was lost
	if got := fmt.Sprint(nos(first), nos(lost)); got != "[TK-0 TK-1] [TK-2 TK-3]" {
		t.Fatalf("takes gave %s", got)
	}
	if got := nos(take("run-2", reconcile.Cursor{}, 10)); fmt.Sprint(got) != "[TK-4 TK-5]" {
		t.Errorf("another run took %v, want only the two unleased orders", got)
	}
	again := take("run-1", cursor, 10)
	if got := fmt.Sprint(nos(again)); got != "[TK-2 TK-3]" {
		t.Errorf("run-1 asking again from its cursor took %s, want its lost take's [TK-2 TK-3] and nothing of run-2's", got)
	}
	var leased int
	if err := db.Get(&leased, `SELECT count(*) FROM payment_orders WHERE lease_owner = 'run-1'`); err != nil || leased != 4 {
		t.Errorf("%d orders leased to run-1 (%v), want 4: the in-flight two and the two taken back", leased, err)
	}
}

// TestTakeRefundsBringTheirOrders: each taken refund comes with its order as the take read
// it (what the refund check would otherwise look up with a statement of its own), from a
// leasing take and from a dry run's alike; the lease falls on the refund, not the order.
func TestTakeRefundsBringTheirOrders(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := repotest.NewDB(t)
	s := postgres.NewStore(db.DB)
	const merchant = "1900000001"
	for i, refunded := range []int64{0, 300} {
		otn := fmt.Sprintf("TR-%d", i)
		insertOrder(t, db, "wechatpay", merchant, otn, 1000, "PAID")
		db.MustExec(`UPDATE payment_orders SET platform_trade_no = 'T' || out_trade_no, paid_amount_minor = 1000,
			paid_at = now(), refunded_minor = $2 WHERE out_trade_no = $1`, otn, refunded)
		db.MustExec(`INSERT INTO payment_refunds (order_id, out_refund_no, amount_minor, status, created_at)
			SELECT id, out_trade_no || '-R', 200, 'PROCESSING', now() - interval '1 minute' FROM payment_orders WHERE out_trade_no = $1`, otn)
	}
	now := time.Now()
	for _, dry := range []bool{true, false} {
		got, err := s.TakeRefunds(ctx, reconcile.TakeQuery{Mode: reconcile.ModeOnce, Now: now, PassStart: now,
			Lookback: 1000 * time.Hour, Shard: reconcile.Shard{Index: 0, Count: 1}, Limit: 10, Lease: 2 * time.Minute,
			Owner: "run-1", DryRun: dry, Account: reconcile.AccountKey{Platform: reconcile.WechatPay, MerchantID: merchant}})
		if err != nil {
			t.Fatalf("take refunds (dry run %v): %v", dry, err)
		}
		var desc []string
		for _, d := range got {
			o := d.Order
			if o.ID != d.Refund.OrderID {
				t.Errorf("refund %s came with order %d, want %d", d.Refund.OutRefundNo, o.ID, d.Refund.OrderID)
			}
			desc = append(desc, fmt.Sprintf("%s:%s/%s/%s/paid %d/refunded %d", d.Refund.OutRefundNo, o.OutTradeNo, o.Status,
				o.PlatformTradeNo, o.PaidAmountMinor, o.RefundedMinor))
		}
		want := "[TR-0-R:TR-0/PAID/TTR-0/paid 1000/refunded 0 TR-1-R:TR-1/PAID/TTR-1/paid 1000/refunded 300]"
		if fmt.Sprint(desc) != want {
			t.Errorf("dry run %v took %v\nwant %s", dry, desc, want)
		}
	}
	var refundLeases, orderLeases int
	db.Get(&refundLeases, `SELECT count(*) FROM payment_refunds WHERE lease_owner = 'run-1'`) //nolint:errcheck
	db.Get(&orderLeases, `SELECT count(*) FROM payment_orders WHERE lease_owner IS NOT NULL`) //nolint:errcheck
	if refundLeases != 2 || orderLeases != 0 {
		t.Errorf("%d refunds and %d orders leased, want the 2 refunds only", refundLeases, orderLeases)
	}
}

// DueAccounts lists each account with work a take may return once, with the kinds it has:
// a run the pending orders and the processing or abnormal refunds of its window, a backfill
// every order of its window and every refund of an order of its window.
func TestDueAccountsNamesTheKindsOfWorkEachAccountHas(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := repotest.NewDB(t)
	s := postgres.NewStore(db.DB)
	now := time.Now()
	hourAgo := now.Add(-time.Hour)
	order := func(merchant, otn, status string, created time.Time) int64 {
		o := repotest.Order{Platform: "wechatpay", MerchantID: merchant, OutTradeNo: otn, AmountMinor: 500, Status: status, CreatedAt: created}
		if status == "PAID" {
			o.PlatformTradeNo, o.PaidAmountMinor, o.PaidAt = "T-"+otn, 500, created
		}
		return repotest.InsertOrder(t, db, o)
	}
	refund := func(orderID int64, no, status string) {
		db.MustExec(`INSERT INTO payment_refunds (order_id, out_refund_no, amount_minor, status, created_at) VALUES ($1, $2, 100, $3, $4)`,
			orderID, no, status, hourAgo)
	}
	order("1800000001", "ORDERS-ONLY", "PENDING", hourAgo)
	refund(order("1800000002", "REFUNDS-ONLY", "PAID", hourAgo), "R-2", "PROCESSING")
	order("1800000003", "BOTH", "PENDING", hourAgo)
	refund(order("1800000003", "BOTH-PAID", "PAID", hourAgo), "R-3", "ABNORMAL")
	order("1800000004", "CLOSED", "CLOSED", hourAgo)
	order("1800000005", "OUT-OF-WINDOW", "PENDING", now.Add(-3*time.Hour))
	// A refund asked for within the window, of an order from before it: a run's, not the
	// backfill's.
	refund(order("1800000006", "OLD-ORDER", "PAID", now.Add(-3*time.Hour)), "R-6", "PROCESSING")

	list := func(q reconcile.TakeQuery) string {
		t.Helper()
		got, err := s.DueAccounts(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, a := range got {
			kinds := ""
			if a.Orders {
				kinds += "orders "
			}
			if a.Refunds {
				kinds += "refunds"
			}
			out[a.MerchantID] = kinds
		}
		return fmt.Sprint(out) // fmt sorts map keys
	}
	shard := reconcile.Shard{Index: 0, Count: 1}
	if got, want := list(reconcile.TakeQuery{Mode: reconcile.ModeOnce, Now: now, Lookback: 2 * time.Hour, Shard: shard}),
		"map[1800000001:orders  1800000002:refunds 1800000003:orders refunds 1800000006:refunds]"; got != want {
		t.Errorf("run lists %s, want %s", got, want)
	}
	if got, want := list(reconcile.TakeQuery{Mode: reconcile.ModeBackfill, From: now.Add(-2 * time.Hour), To: now, Shard: shard}),
		"map[1800000001:orders  1800000002:orders refunds 1800000003:orders refunds 1800000004:orders ]"; got != want {
		t.Errorf("backfill lists %s, want %s", got, want)
	}
}
