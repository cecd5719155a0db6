package postgres_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/repotest"
)

// TestStorePreparesOnceAndClosesWhenDropped: the statements a check sends are prepared on
// the session once and reused, and a Store that is dropped takes them off the session: a
// simulation builds a Store per process over one long-lived pool, whose sessions must not
// collect a statement per Store.
func TestStorePreparesOnceAndClosesWhenDropped(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := repotest.NewDB(t)
	db.SetMaxOpenConns(1) // one session: what pg_prepared_statements shows is the Store's
	insertOrder(t, db, "alipay", "2021000000000001", "PS-1", 100, "PENDING")
	prepared := func() int {
		t.Helper()
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM pg_prepared_statements`); err != nil {
			t.Fatal(err)
		}
		return n
	}

	s := postgres.NewStore(db.DB)
	for range 3 {
		if o, err := s.FindOrder(ctx, reconcile.Alipay, "2021000000000001", "PS-1"); err != nil || o.OutTradeNo != "PS-1" {
			t.Fatalf("find order: %+v, %v", o, err)
		}
	}
	if n := prepared(); n != 1 {
		t.Fatalf("%d statements prepared on the session after three lookups, want 1", n)
	}
	runtime.KeepAlive(s)
	s = nil //nolint:ineffassign,wastedassign // dropped: its cleanup closes its statements
	deadline := time.Now().Add(5 * time.Second)
	for prepared() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d statements still prepared on the session after the Store was dropped", prepared())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}
