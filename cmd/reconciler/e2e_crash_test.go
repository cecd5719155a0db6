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

// Crash recovery without waiting: `reconciler run` killed with SIGKILL in the middle of a
// pass leaves its run row "running" and its orders leased for minutes. The run started
// right after it takes over at once: the dead run's row becomes interrupted (logged), and
// every order converges in this second run, which exits 0.
func TestE2ESIGKILLedRunIsTakenOverAtOnce(t *testing.T) {
	t.Parallel()
	e := newE2EEnv(t)
	const n = 24
	for i := range n {
		otn := fmt.Sprintf("K-%d", i)
		e.seed(e2eOrder{platform: reconcile.Alipay, otn: otn, amount: int64(100 + i), createdAt: e2eAgo(10 * time.Minute)})
		e.paidAtPlatform(reconcile.Alipay, otn, int64(100+i))
	}
	// Slow answers, few workers: the first orders are repaired while the rest wait. Once a
	// repair has landed, every further query hangs, so the orders the run takes next stay
	// leased until the kill (a leased count read just before the kill could otherwise race
	// the run finishing one batch and taking the next).
	e.sb.SetFault(reconcile.Alipay, sandbox.Fault{Latency: sandbox.Duration(400 * time.Millisecond)})
	env := []string{"RECONCILER_CONCURRENCY=4"}
	first := e.start(env, "run")
	e2eEventually(t, 30*time.Second, "the first run to repair some orders", func() bool {
		return first.exited() || e.count(`SELECT count(*) FROM payment_orders WHERE status = 'PAID'`) > 0
	})
	e.sb.SetFault(reconcile.Alipay, sandbox.Fault{Hang: true})
	// Queries already on their way answer within the old latency and release their leases
	// as they repair; only what is leased after that hangs for good (a lease counted while
	// one of them was still in flight once vanished before the kill).
	time.Sleep(1500 * time.Millisecond)
	const leasedLong = `SELECT count(*) FROM payment_orders WHERE lease_owner IS NOT NULL AND lease_until > now() + interval '1 minute'`
	e2eEventually(t, 30*time.Second, "the first run to hold leases on orders whose queries hang", func() bool {
		return first.exited() || e.count(leasedLong) > 0
	})
	if first.exited() {
		t.Fatalf("the first run ended (exit %d) before it could be killed", first.exitCode())
	}
	first.signal(t, syscall.SIGKILL)
	first.wait(t, 10*time.Second)
	if e.count(leasedLong) == 0 {
		t.Fatal("the killed run left no lease: the test did not kill it mid-pass")
	}
	killed := e.lastRun()
	if killed.Status != "running" {
		t.Fatalf("killed run row %s, want it still running before the next run", killed)
	}

	e.sb.SetFault(reconcile.Alipay, sandbox.Fault{})
	second := e.run(env, "run")
	second.expect(t, 0)
	for i := range n {
		if o := e.order(reconcile.Alipay, fmt.Sprintf("K-%d", i)); o.Status != "PAID" || o.PaidEvents != 1 || o.Outbox != 1 {
			t.Errorf("K-%d: %s with %d PAID events and %d outbox rows after the second run", i, o.Status, o.PaidEvents, o.Outbox)
		}
	}
	rs := e.runs()
	if len(rs) != 2 {
		t.Fatalf("%d run rows, want the killed one and the second: %v", len(rs), rs)
	}
	if rs[0].Status != "interrupted" || !rs[0].FinishedAt.Valid || !strings.Contains(rs[0].Error, fmt.Sprintf("taken over by run %d", rs[1].ID)) {
		t.Errorf("killed run row: %s, want interrupted and taken over by run %d", rs[0], rs[1].ID)
	}
	e.expectRun(rs[1], "succeeded", e2eCounts{scanned: -1, repaired: -1, closed: 0, unchanged: -1, stillPending: 0, mismatches: 0, claimedElsewhere: 0, errors: 0})
	if rs[1].Repaired == 0 {
		t.Errorf("the second run repaired nothing: the kill came too late to test anything")
	}
	if !strings.Contains(second.stderr.String(), "took over a run whose process died") ||
		!strings.Contains(second.stderr.String(), fmt.Sprintf(`"dead_run_id":%d`, rs[0].ID)) {
		t.Errorf("the second run did not log the takeover:\n%s", e2eTail(second.stderr.String(), 4000))
	}
	e.invariants()
}
