package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/repotest"
)

// TestMigrationsAreNumberedOnceInOrder: each migration's number is its place in the order,
// 0001 up with none left out and none twice (two migrations were once both 0005, and which
// ran first depended on the rest of their names), and each renamed version names a
// migration that exists, under a name no migration has any more.
func TestMigrationsAreNumberedOnceInOrder(t *testing.T) {
	migs, err := postgres.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for i, m := range migs {
		names[m.Version] = true
		num, rest, ok := strings.Cut(m.Version, "_")
		if want := fmt.Sprintf("%04d", i+1); !ok || num != want || rest == "" {
			t.Errorf("migration %d is %q: want %s_<what it does>", i+1, m.Version, want)
		}
	}
	for _, r := range postgres.RenamedMigrations {
		if names[r[0]] || !names[r[1]] {
			t.Errorf("rename %s -> %s: the old name must be gone and the new one a migration", r[0], r[1])
		}
	}
}

func TestMigrateIsRepeatableAndSerialised(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t) // already migrated from the template
	var wg sync.WaitGroup
	errs := make([]error, 4)
	applied := make([][]string, 4)
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			applied[i], errs[i] = postgres.Migrate(context.Background(), db.DB)
		}()
	}
	wg.Wait()
	for i := range 4 {
		if errs[i] != nil || len(applied[i]) != 0 {
			t.Fatalf("migrate #%d on a migrated database: applied %v, err %v", i, applied[i], errs[i])
		}
	}
	migs, err := postgres.Migrations()
	if err != nil || len(migs) == 0 {
		t.Fatalf("migrations: %v %v", migs, err)
	}
	var n int
	if err := db.Get(&n, `SELECT count(*) FROM schema_migrations`); err != nil || n != len(migs) {
		t.Fatalf("schema_migrations has %d rows (%v), want %d", n, err, len(migs))
	}
}

func TestMigrateFreshDatabaseConcurrently(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	// Empty the database again, then let four migrations race on it.
	db.MustExec(`DROP SCHEMA public CASCADE; CREATE SCHEMA public`)
	var wg sync.WaitGroup
	var mu sync.Mutex
	total := 0
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			v, err := postgres.Migrate(context.Background(), db.DB)
			if err != nil {
				t.Error(err)
			}
			mu.Lock()
			total += len(v)
			mu.Unlock()
		}()
	}
	wg.Wait()
	migs, _ := postgres.Migrations()
	if total != len(migs) {
		t.Fatalf("%d migrations applied across 4 racing runs, want each of %d exactly once", total, len(migs))
	}
}

func TestSchemaConstraints(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	ins := `INSERT INTO payment_orders (platform, merchant_id, out_trade_no, amount_minor, status, created_at) VALUES ($1, 'm', $2, $3, 'PENDING', now())`
	db.MustExec(ins, "alipay", "o-1", 100)
	cases := []struct {
		name string
		sql  string
		args []any
	}{
		{"duplicate order identity", ins, []any{"alipay", "o-1", 100}},
		{"zero amount", ins, []any{"alipay", "o-2", 0}},
		{"unknown platform", ins, []any{"paypal", "o-3", 100}},
		{"unknown status", `UPDATE payment_orders SET status = 'LOST'`, nil},
	}
	for _, tc := range cases {
		if _, err := db.Exec(tc.sql, tc.args...); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
	// The minimal insert of the contract is due at once: every other column defaulted.
	var due bool
	if err := db.Get(&due, `SELECT next_check_at IS NULL AND currency = 'CNY' AND version = 0 FROM payment_orders WHERE out_trade_no = 'o-1'`); err != nil || !due {
		t.Fatalf("defaults: %v %v", due, err)
	}
}

func TestStoreTranslatesNotFound(t *testing.T) {
	t.Parallel()
	s := postgres.NewStore(repotest.NewDB(t).DB)
	_, err := s.FindOrder(context.Background(), reconcile.Alipay, "m", "nope")
	if !errors.Is(err, reconcile.ErrNotFound) {
		t.Fatalf("err = %v, want ErrNotFound", err)
	}
	if _, err := s.ApplyTransition(context.Background(), reconcile.Transition{OrderID: 1, From: reconcile.StatusPaid, To: reconcile.StatusPending}); err == nil || !strings.Contains(err.Error(), "illegal transition") {
		t.Fatalf("illegal transition accepted: %v", err)
	}
}
