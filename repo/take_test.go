package repo_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo"
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
	s := repo.NewStore(db.DB)
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
