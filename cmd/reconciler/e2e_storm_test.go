package main

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/sandbox"
)

// A storm: `serve` takes 5 shuffled, concurrent copies of every order's callback (with the
// platforms' retry schedules, 1000x faster) while three `run` processes (shards 0/2 and 1/2,
// the latter as an Indexed Job with --shards 2, and an unsharded one) reconcile the same orders. Every order ends PAID exactly once, every
// copy is acknowledged, and serve stops cleanly on SIGTERM.
func TestE2EStormServeAndRunsPayOnce(t *testing.T) {
	t.Parallel()
	e := newE2EEnv(t)
	const perPlatform = 15
	var orders []e2eOrder
	cbs := map[reconcile.Platform][]sandbox.Callback{}
	for _, p := range e2ePlatforms {
		for i := 1; i <= perPlatform; i++ {
			o := e2eOrder{platform: p, otn: fmt.Sprintf("%s-storm-%02d", p, i), amount: 100 + int64(i), createdAt: e2eAgo(5 * time.Minute)}
			orders = append(orders, o)
			e.paidAtPlatform(p, o.otn, o.amount)
			cbs[p] = append(cbs[p], sandbox.Callback{Platform: p, OutTradeNo: o.otn})
		}
	}
	e.seed(orders...)
	serve, base := e.startServe("RECONCILER_NOTIFY_WAIT=2s")

	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	var deliveries []*sandbox.Delivery
	for _, p := range e2ePlatforms {
		d, err := e.sb.Deliver(ctx, sandbox.DeliveryOptions{URL: base + "/notify/" + string(p), Copies: 5, Shuffle: true, TimeScale: 1000}, cbs[p]...)
		if err != nil {
			t.Fatal(err)
		}
		deliveries = append(deliveries, d)
	}
	runEnv := []string{"RECONCILER_CONCURRENCY=4"}
	runs := []*e2eProc{
		e.start(runEnv, "run", "--shard", "0/2"),
		// The Kubernetes Indexed Job form of shard 1/2.
		e.start(append([]string{"JOB_COMPLETION_INDEX=1"}, runEnv...), "run", "--shards", "2"),
		e.start(runEnv, "run"),
	}
	for _, r := range runs {
		r.wait(t, 60*time.Second)
		r.expect(t, 0)
		if strings.Contains(r.stdout.String(), "another pass holds the lock") {
			t.Errorf("%s found its lock held; the three runs hold different shard locks", r.name)
		}
	}
	copies := map[string]int{}
	for _, d := range deliveries {
		for _, r := range waitAllAcked(t, ctx, d, "storm") {
			copies[string(r.Platform)+"/"+r.OutTradeNo]++
		}
	}
	if len(copies) != len(orders) {
		t.Errorf("results for %d orders, want %d", len(copies), len(orders))
	}
	for k, n := range copies {
		if n != 5 {
			t.Errorf("%s: %d copies delivered, want 5", k, n)
		}
	}

	for _, o := range orders {
		got := e.order(o.platform, o.otn)
		if got.Status != "PAID" || got.Events != 1 || got.PaidEvents != 1 || got.Outbox != 1 {
			t.Errorf("%s: %+v, want PAID with exactly one event and one outbox row", o.otn, got)
		}
		if got.TradeNo.String != e.sb.Scenario(o.platform, o.otn).TradeNo {
			t.Errorf("%s: trade number %q is not the platform's", o.otn, got.TradeNo.String)
		}
	}
	if n := e.count(`SELECT count(*) FROM reconcile_mismatches`); n != 0 {
		t.Errorf("%d findings from duplicate callbacks; duplicates are not mismatches", n)
	}
	// Whoever won each order, the run rows and the notify events add up to one each.
	var repaired int64
	rows := e.runs()
	if len(rows) != 3 {
		t.Fatalf("%d run rows, want 3", len(rows))
	}
	shards := map[string]bool{}
	for _, r := range rows {
		if r.Status != "succeeded" || r.Errors != 0 {
			t.Errorf("run row: %s", r)
		}
		shards[r.Shard] = true
		repaired += r.Repaired
	}
	if !shards["0/2"] || !shards["1/2"] || !shards["0/1"] {
		t.Errorf("run rows cover shards %v, want 0/2, 1/2 and 0/1", shards)
	}
	notified := int64(e.count(`SELECT count(*) FROM payment_events WHERE source = 'notify'`))
	t.Logf("%d orders paid by callbacks, %d by the runs", notified, repaired)
	if repaired+notified != int64(len(orders)) {
		t.Errorf("runs repaired %d and callbacks applied %d: %d transitions for %d orders", repaired, notified, repaired+notified, len(orders))
	}
	e.invariants()

	serve.signal(t, syscall.SIGTERM)
	serve.wait(t, 30*time.Second)
	serve.expect(t, 0)
}

// SIGTERM in the middle of a pass: it stops taking orders, drains the ones in flight, marks
// the run interrupted and exits 3; nothing is half-applied and no lease is left behind; the
// next run finishes the rest.
func TestE2ESigtermMidRun(t *testing.T) {
	t.Parallel()
	e := newE2EEnv(t)
	const n = 200
	var orders []e2eOrder
	for i := 0; i < n; i++ {
		p := e2ePlatforms[i%2]
		o := e2eOrder{platform: p, otn: fmt.Sprintf("%s-sig-%03d", p, i), amount: 1000 + int64(i), createdAt: e2eAgo(time.Hour - time.Duration(i)*time.Second)}
		orders = append(orders, o)
		e.paidAtPlatform(p, o.otn, o.amount)
	}
	e.seed(orders...)
	for _, p := range e2ePlatforms {
		e.sb.SetFault(p, sandbox.Fault{Latency: sandbox.Duration(50 * time.Millisecond)})
	}
	env := []string{"RECONCILER_CONCURRENCY=4"}
	first := e.start(env, "run")
	e2eEventually(t, 30*time.Second, "the pass to repair some orders", func() bool {
		return e.count(`SELECT count(*) FROM payment_events`) >= 12 || first.exited()
	})
	first.signal(t, syscall.SIGTERM)
	first.wait(t, 30*time.Second)
	first.expect(t, 3)
	if !strings.Contains(first.stderr.String(), "interrupted after draining") {
		t.Errorf("stderr does not say the pass was interrupted:\n%s", e2eTail(first.stderr.String(), 2000))
	}
	r := e.lastRun()
	e.expectRun(r, "interrupted", e2eCounts{scanned: -1, repaired: -1, closed: 0, unchanged: 0, stillPending: 0, mismatches: 0, claimedElsewhere: -1, errors: 0})
	paid := e.count(`SELECT count(*) FROM payment_orders WHERE status = 'PAID'`)
	if paid == 0 || paid >= n {
		t.Fatalf("%d of %d orders PAID after the interruption; want some but not all", paid, n)
	}
	if int64(paid) != r.Repaired || r.Scanned != r.Repaired {
		t.Errorf("%d orders PAID, but the interrupted run row says %s", paid, r)
	}
	e.invariants()

	second := e.run(env, "run")
	second.expect(t, 0)
	e.expectRun(e.lastRun(), "succeeded", e2eCounts{scanned: int64(n - paid), repaired: int64(n - paid), closed: 0, unchanged: 0, stillPending: 0, mismatches: 0, claimedElsewhere: 0, errors: 0})
	if got := e.count(`SELECT count(*) FROM payment_orders WHERE status = 'PAID'`); got != n {
		t.Errorf("%d of %d orders PAID after the second run", got, n)
	}
	if got := e.count(`SELECT count(*) FROM payment_events`); got != n {
		t.Errorf("%d events for %d orders", got, n)
	}
	// Nobody was asked twice: the interrupted pass's checks were all complete.
	for _, o := range orders {
		if q := e.sb.QueryCount(o.platform, o.otn); q != 1 {
			t.Errorf("%s asked %d times, want 1", o.otn, q)
		}
	}
	e.invariants()
}
