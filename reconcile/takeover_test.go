package reconcile_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

// A run whose process died mid-pass (its lock session is gone, its row still "running",
// its leases far from expiry) is taken over by the next pass of the same shard and kind:
// its row becomes interrupted, its orders are checked at once, and the new run reports it.
// A dead run of another shard is not this pass's business.
func TestPassTakesOverADeadRun(t *testing.T) {
	t.Parallel()
	p := setupPass(t)
	ctx := context.Background()
	dead := func(shard reconcile.Shard) int64 {
		r := reconcile.Run{Mode: reconcile.ModeOnce, Status: reconcile.RunRunning, StartedAt: time.Now().Add(-time.Minute),
			Shard: shard, LockName: "payrecon:run:" + shard.String(),
			Session: reconcile.Session{PID: 999999, Start: time.Now().Add(-time.Hour)}}
		if err := p.store.Runs().StartRun(ctx, &r); err != nil {
			t.Fatal(err)
		}
		return r.ID
	}
	mine, other := dead(reconcile.Shard{Index: 0, Count: 1}), dead(reconcile.Shard{Index: 1, Count: 2})
	ids := map[string]int64{}
	for i := range 6 {
		otn := fmt.Sprintf("TK-%d", i)
		ids[otn] = p.order(orderSpec{otn: otn, amount: 100})
		p.ali.set(otn, reconcile.StatePaid, "T"+otn, 100)
		owner := mine
		if i == 5 {
			owner = other
		}
		p.db.MustExec(`UPDATE payment_orders SET lease_owner = $2, lease_until = now() + interval '1 hour' WHERE id = $1`,
			ids[otn], fmt.Sprintf("run-%d", owner))
	}
	// The dead run died between its claim and its commit on TK-0: its PROCESSING claim
	// stays for the claim lease. TK-6, not the dead run's, has a claim held by a live
	// callback handler: that one is still left alone.
	ids["TK-6"] = p.order(orderSpec{otn: "TK-6", amount: 100})
	p.ali.set("TK-6", reconcile.StatePaid, "TTK-6", 100)
	for _, trade := range []string{"TTK-0", "TTK-6"} {
		if err := p.redis.Client.Set(ctx, p.applier.ClaimKey(reconcile.Alipay, trade), "PROCESSING", time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	run := p.pass(reconcile.PassSpec{Mode: reconcile.ModeOnce})
	if len(run.TakenOver) != 1 || run.TakenOver[0].RunID != mine || len(run.TakenOver[0].Orders) != 5 {
		t.Fatalf("taken over %+v, want run %d with 5 leases", run.TakenOver, mine)
	}
	if run.Counts.Repaired != 5 || run.Counts.ClaimedElsewhere != 1 {
		t.Fatalf("repaired %d, claimed elsewhere %d; want the dead run's 5 orders and TK-6", run.Counts.Repaired, run.Counts.ClaimedElsewhere)
	}
	for otn, id := range ids {
		want := reconcile.StatusPaid
		if otn == "TK-5" || otn == "TK-6" {
			// TK-5: leased by a dead run of another shard's lock, not ours; TK-6: claimed.
			want = reconcile.StatusPending
		}
		if got := p.status(id); got != want {
			t.Errorf("%s: %s, want %s", otn, got, want)
		}
	}
	if s := p.runRow(mine)["status"]; s != "interrupted" {
		t.Fatalf("dead run row %v, want interrupted", s)
	}
	if s := p.runRow(other)["status"]; s != "running" {
		t.Fatalf("other shard's run row %v, want running", s)
	}
	var myPID int
	if err := p.db.Get(&myPID, `SELECT lock_pid FROM reconcile_runs WHERE id = $1`, run.ID); err != nil || myPID == 0 {
		t.Fatalf("the run did not record its lock session: %d %v", myPID, err)
	}
	// A dry run takes nothing over: it writes nothing but its own row.
	again := dead(reconcile.Shard{Index: 0, Count: 1})
	if dry := p.pass(reconcile.PassSpec{Mode: reconcile.ModeOnce, DryRun: true}); len(dry.TakenOver) != 0 {
		t.Fatalf("dry run took over %+v", dry.TakenOver)
	}
	if s := p.runRow(again)["status"]; s != "running" {
		t.Fatalf("dry run changed a dead run's row to %v", s)
	}
}

// TestFinishedRunsLeasesAreFreedButTheirClaimsRespected: a finished run whose lease release
// failed left an order leased; the next pass frees the lease and checks the order, but a
// PROCESSING claim on it belongs to a live callback handler, not to the finished run, so it
// still stops the apply (claimed elsewhere), where a dead run's claim would not.
func TestFinishedRunsLeasesAreFreedButTheirClaimsRespected(t *testing.T) {
	t.Parallel()
	p := setupPass(t)
	ctx := context.Background()
	done := reconcile.Run{Mode: reconcile.ModeOnce, Status: reconcile.RunRunning, StartedAt: time.Now().Add(-time.Minute),
		Shard: reconcile.Shard{Index: 0, Count: 1}, LockName: "payrecon:run:0/1"}
	if err := p.store.Runs().StartRun(ctx, &done); err != nil {
		t.Fatal(err)
	}
	done.Status = reconcile.RunSucceeded
	if err := p.store.Runs().FinishRun(ctx, done); err != nil {
		t.Fatal(err)
	}
	id := p.order(orderSpec{otn: "FIN-1", amount: 100})
	p.ali.set("FIN-1", reconcile.StatePaid, "TFIN-1", 100)
	p.db.MustExec(`UPDATE payment_orders SET lease_owner = $2, lease_until = now() + interval '1 hour' WHERE id = $1`,
		id, fmt.Sprintf("run-%d", done.ID))
	if err := p.redis.Client.Set(ctx, p.applier.ClaimKey(reconcile.Alipay, "TFIN-1"), "PROCESSING", time.Minute).Err(); err != nil {
		t.Fatal(err)
	}
	run := p.pass(reconcile.PassSpec{Mode: reconcile.ModeOnce})
	if len(run.TakenOver) != 1 || !run.TakenOver[0].Finished || len(run.TakenOver[0].Orders) != 1 {
		t.Fatalf("taken over %+v, want the finished run's one lease freed", run.TakenOver)
	}
	if run.Counts.ClaimedElsewhere != 1 || run.Counts.Repaired != 0 {
		t.Fatalf("repaired %d, claimed elsewhere %d; want the order checked and left to the claim's holder", run.Counts.Repaired, run.Counts.ClaimedElsewhere)
	}
	if got := p.status(id); got != reconcile.StatusPending {
		t.Errorf("FIN-1: %s, want PENDING while a live handler holds its claim", got)
	}
}
