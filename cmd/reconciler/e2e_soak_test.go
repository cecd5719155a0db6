package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payrecon/payrecon/sandbox"
)

// e2eSoakOrder is one soak order and the platform's truth it must converge to.
type e2eSoakOrder struct {
	e2eOrder
	want string // PAID, CLOSED, or SHORT (paid one fen short: PENDING with one AMOUNT_MISMATCH finding)
}

// TestE2ESoakKill9: `reconciler run` and `reconciler serve` as real processes, each killed
// with SIGKILL at a random moment while the sandbox storms serve with duplicated, shuffled
// callbacks; after each kill a clean run; then the invariants: at most one transition per
// order, one payment_events row per transition, one outbox row per PAID transition, no
// finding duplicated (one AMOUNT_MISMATCH per short-paid order however many callbacks and
// passes saw it, none for any other), every acknowledged callback durable, and every
// order converged to the platform's truth (paid: PAID; paid short: PENDING with its
// finding; open past its expiry: closed at the platform, CLOSED here).
//
// SOAK_ITERATIONS sets the iterations (default 10, what `make test` runs; `make soak` runs
// 200), SOAK_SEED replays one schedule of kill moments.
//
// A killed run's leased orders stay invisible until the lease runs out (2 minutes). The
// test plays that clock: after a kill it moves the dead process's leases to their end
// rather than waiting, and counts them.
func TestE2ESoakKill9(t *testing.T) {
	t.Parallel()
	iterations := 10
	if s := os.Getenv("SOAK_ITERATIONS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("SOAK_ITERATIONS=%q: want a positive whole number", s)
		}
		iterations = n
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("SOAK_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("SOAK_SEED=%q: %v", s, err)
		}
	}
	t.Logf("soak: %d iterations; replay with SOAK_SEED=%d SOAK_ITERATIONS=%d", iterations, seed, iterations)
	rng := rand.New(rand.NewPCG(seed, seed>>1|1))

	e := newE2EEnv(t)
	for _, p := range e2ePlatforms {
		// Long enough for a pass and the callbacks to be mid-flight when the kills land.
		e.sb.SetFault(p, sandbox.Fault{Latency: sandbox.Duration(40 * time.Millisecond)})
	}
	// The clean run re-checks what a killed one left due; a killed holder's PROCESSING
	// claim runs out in a second.
	// The workers' sessions carry an application_name, so the test can wait for a killed
	// process's server backends to be gone (see e2eSoakIteration).
	dbURL, err := url.Parse(e.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	q := dbURL.Query()
	q.Set("application_name", e2eSoakApp)
	dbURL.RawQuery = q.Encode()
	env := []string{"RECONCILER_DATABASE_URL=" + dbURL.String(),
		"RECONCILER_CONCURRENCY=4", "RECONCILER_RECHECK_MIN=0s", "RECONCILER_CLAIM_LEASE=1s", "RECONCILER_NOTIFY_WAIT=200ms"}
	var all []e2eSoakOrder
	stats := e2eSoakStats{runLife: 2 * time.Second}
	start := time.Now()
	for it := range iterations {
		batch := e2eSoakBatch(e, it)
		all = append(all, batch...)
		e2eSoakIteration(t, e, rng, env, fmt.Sprintf("%%-soak-%03d-%%", it), batch, &stats)
		e2eSoakConverged(t, e, all)
		stats.orderChecks += len(all)
		if (it+1)%25 == 0 {
			t.Logf("soak: %d of %d iterations, %d orders, %d leases landed after their run was dead, %s",
				it+1, iterations, len(all), stats.lateLeases, time.Since(start).Round(time.Second))
		}
		if t.Failed() {
			t.Fatalf("iteration %d failed; replay with SOAK_SEED=%d SOAK_ITERATIONS=%d", it, seed, iterations)
		}
	}
	t.Logf("soak: %d iterations, %d orders checked after every clean run (%d at the end), %d runs and %d serves killed mid-flight "+
		"(%d runs had already finished, %d refused by a full PostgreSQL), %d leased orders freed by the test's clock (%d leased after their run was dead), %d run rows left running, "+
		"%d callback copies acknowledged; %s",
		iterations, stats.orderChecks, len(all), stats.runsKilled, stats.servesKilled, stats.runsFinished, stats.runsRefused, stats.leasesFreed, stats.lateLeases,
		e.count(`SELECT count(*) FROM reconcile_runs WHERE status = 'running'`), stats.acked, time.Since(start).Round(time.Millisecond))
}

// e2eSoakApp is the application_name of the soak's worker sessions.
const e2eSoakApp = "payrecon-soak-worker"

type e2eSoakStats struct {
	runsKilled, runsFinished, runsRefused, servesKilled, leasesFreed, lateLeases, acked, orderChecks int
	runLife                                                                                          time.Duration // of the last run not killed
}

// e2eSoakBatch seeds one iteration's orders: most paid at the platform (and stormed), two
// paid a fen short (stormed too), some open there and past their expiry.
func e2eSoakBatch(e *e2eEnv, it int) []e2eSoakOrder {
	var batch []e2eSoakOrder
	for i := range 16 {
		p := e2ePlatforms[i%2]
		o := e2eSoakOrder{e2eOrder: e2eOrder{platform: p, otn: fmt.Sprintf("%s-soak-%03d-%02d", p, it, i), amount: 100 + int64(it*16+i)}}
		switch {
		case i < 10:
			o.createdAt, o.want = e2eAgo(10*time.Minute), "PAID"
			e.paidAtPlatform(p, o.otn, o.amount)
		case i < 12:
			o.createdAt, o.want = e2eAgo(10*time.Minute), "SHORT"
			e.paidAtPlatform(p, o.otn, o.amount-1)
		default:
			o.createdAt, o.want = e2eAgo(3*time.Hour), "CLOSED"
			e.sb.SetScenario(p, o.otn, sandbox.Scenario{State: sandbox.StateOpen, AmountMinor: o.amount})
		}
		e.seed(o.e2eOrder)
		batch = append(batch, o)
	}
	return batch
}

// e2eSoakIteration: serve under a callback storm and a run, both SIGKILLed at random
// moments; every acknowledged callback durable; the dead leases freed; a clean run.
func e2eSoakIteration(t *testing.T, e *e2eEnv, rng *rand.Rand, env []string, like string, batch []e2eSoakOrder, stats *e2eSoakStats) {
	t.Helper()
	serve, base := e.startServe(env...)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var deliveries []*sandbox.Delivery
	for _, p := range e2ePlatforms {
		var cbs []sandbox.Callback
		for _, o := range batch {
			if o.platform == p && o.want != "CLOSED" {
				cbs = append(cbs, sandbox.Callback{Platform: p, OutTradeNo: o.otn})
			}
		}
		d, err := e.sb.Deliver(ctx, sandbox.DeliveryOptions{URL: base + "/notify/" + string(p), Copies: 3, Shuffle: true,
			Stagger: sandbox.Duration(5 * time.Millisecond), TimeScale: 1000, MaxAttempts: 3}, cbs...)
		if err != nil {
			t.Fatal(err)
		}
		deliveries = append(deliveries, d)
	}
	// Two workers, 40 ms a query: the pass lasts long enough for a kill to land inside it.
	run := e.start(append(env[:len(env):len(env)], "RECONCILER_CONCURRENCY=2"), "run")
	// Kill each at a random point of its work: the run at a random moment of its life (as
	// long as the last run that was not killed lived: the machine's speed), serve after k
	// of the batch's 10 paid orders are PAID, by a callback or the run (k = 0: while
	// starting). Each killer watches its own process (two goroutines: the kills land
	// independently, in either order); the 10 s is a safety net, not an expectation.
	runAt := time.Duration(rng.Int64N(int64(stats.runLife)))
	serveAt := rng.IntN(11)
	killed := make([]bool, 2)
	var wg sync.WaitGroup
	for i, p := range []*e2eProc{run, serve} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for deadline := time.Now().Add(10 * time.Second); !p.exited() && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				if p == run && time.Since(p.start) >= runAt {
					break
				}
				// Through e.db: e.count may not fail a test from a goroutine.
				var paid int
				if p == serve && (e.db.Get(&paid, `SELECT count(*) FROM payment_orders WHERE out_trade_no LIKE $1 AND status = 'PAID'`, like) != nil || paid >= serveAt) {
					break
				}
			}
			if !p.exited() {
				p.cmd.Process.Kill() //nolint:errcheck // it may have just exited: p.code says
				killed[i] = true
			}
			<-p.done
		}()
	}
	wg.Wait()
	switch {
	case killed[0]:
		stats.runsKilled++
	case run.exitCode() == 0:
		stats.runsFinished++
		stats.runLife = run.took
	case run.exitCode() == 1 && strings.Contains(run.stderr.String(), "too many clients"):
		// The shared PostgreSQL was full (other tests' connections): the run refused to
		// start, exit 1 as the contract says; the iteration goes on without it.
		stats.runsRefused++
	default:
		t.Errorf("%s exited %d before its kill:\n%s", run.name, run.exitCode(), e2eTail(run.stderr.String(), 3000))
	}
	if !killed[1] {
		t.Fatalf("serve exited %d before its kill:\n%s", serve.exitCode(), e2eTail(serve.stderr.String(), 4000))
	}
	stats.servesKilled++
	// What serve acknowledged was committed before the answer: it holds after the kill.
	for _, d := range deliveries {
		res, err := d.Wait(ctx)
		if err != nil {
			t.Fatalf("callbacks still being delivered after serve died: %v", err)
		}
		for _, r := range res {
			if !r.Acked {
				continue
			}
			stats.acked++
			got := e.order(r.Platform, r.OutTradeNo)
			findings := e.count(`SELECT count(*) FROM reconcile_mismatches WHERE order_id = $1`, got.ID)
			if got.Status != "PAID" && findings == 0 {
				t.Errorf("callback %s %s copy %d acknowledged, but the order is %s without a finding", r.Platform, r.OutTradeNo, r.Copy, got.Status)
			}
		}
	}
	e.soakInvariants()
	// A killed process's last statement can still run after the process is dead: the
	// query sat in the socket's buffer, its backend (idle until then) reads it, executes
	// and commits it, and notices the dead client only when it answers. A taking query can
	// so lease orders to a dead run after the kill, even after its backend looked idle
	// (a 200-iteration soak found one, 2 minutes live, after the clock had moved). Wait
	// until the dead processes' backends are gone, and count the leases that landed late.
	leasedAtKill := e.count(`SELECT count(*) FROM payment_orders WHERE lease_owner IS NOT NULL`)
	e2eEventually(t, 30*time.Second, "the killed processes' server backends to end", func() bool {
		return e.count(`SELECT count(*) FROM pg_stat_activity WHERE application_name = $1`, e2eSoakApp) == 0
	})
	leased := e.count(`SELECT count(*) FROM payment_orders WHERE lease_owner IS NOT NULL`)
	if leased > leasedAtKill {
		stats.lateLeases += leased - leasedAtKill
	}
	// The test's clock: the dead run's leases run out now, not in 2 minutes.
	stats.leasesFreed += leased
	e.db.MustExec(`UPDATE payment_orders SET lease_until = now() - interval '1 second' WHERE lease_owner IS NOT NULL`)
	e2eEventually(t, 10*time.Second, "PROCESSING claims to run out", func() bool { return e.processingClaims() == 0 })
	clean := e.run(env, "run")
	clean.expect(t, 0)
	e.expectRun(e.lastRun(), "succeeded", e2eCounts{scanned: -1, repaired: -1, closed: -1, unchanged: -1, stillPending: 0, mismatches: -1, claimedElsewhere: 0, errors: 0})
	var left []struct {
		OTN    string    `db:"out_trade_no"`
		Status string    `db:"status"`
		Owner  string    `db:"lease_owner"`
		Until  time.Time `db:"lease_until"`
	}
	if err := e.db.Select(&left, `SELECT out_trade_no, status, lease_owner, lease_until FROM payment_orders WHERE lease_owner IS NOT NULL`); err != nil {
		t.Fatal(err)
	}
	for _, o := range left {
		t.Errorf("%s (%s) still leased by %s until %s (now %s) after the clean run", o.OTN, o.Status, o.Owner, o.Until, time.Now())
	}
}

// soakInvariants hold at any moment, a process killed or not.
func (e *e2eEnv) soakInvariants() {
	e.t.Helper()
	checks := []struct{ what, query string }{
		{"orders with more than one transition",
			`SELECT count(*) FROM (SELECT order_id FROM payment_events GROUP BY order_id HAVING count(*) > 1) x`},
		{"payment_events rows minus transitions (orders moved off PENDING)",
			`SELECT (SELECT count(*) FROM payment_events) - (SELECT count(*) FROM payment_orders WHERE status <> 'PENDING')`},
		{"order outbox rows minus PAID transitions",
			`SELECT (SELECT count(*) FROM fulfillment_outbox WHERE order_id IS NOT NULL) - (SELECT count(*) FROM payment_events WHERE event_type = 'PAID')`},
		{"findings without their one finding.opened row",
			`SELECT count(*) FROM reconcile_mismatches m
			WHERE (SELECT count(*) FROM fulfillment_outbox f WHERE f.finding_id = m.id AND f.kind = 'finding.opened') <> 1`},
		{"findings duplicated",
			`SELECT count(*) FROM (SELECT 1 FROM reconcile_mismatches GROUP BY platform, merchant_id, out_trade_no, kind HAVING count(*) > 1) x`},
		{"findings other than a short payment's, or on an order that moved",
			`SELECT count(*) FROM reconcile_mismatches m JOIN payment_orders o ON o.id = m.order_id
				WHERE m.kind <> 'AMOUNT_MISMATCH' OR o.status <> 'PENDING' OR m.platform_amount_minor <> o.amount_minor - 1`},
		{"PAID orders that are not the platform's amount", `SELECT count(*) FROM payment_orders WHERE status = 'PAID' AND paid_amount_minor <> amount_minor`},
	}
	for _, c := range checks {
		if n := e.count(c.query); n != 0 {
			e.t.Errorf("%s: %d", c.what, n)
		}
	}
}

// e2eSoakConverged: after the clean run every order so far is the platform's truth.
func e2eSoakConverged(t *testing.T, e *e2eEnv, all []e2eSoakOrder) {
	t.Helper()
	e.soakInvariants()
	e.invariants()
	// One read of every order (a long soak has thousands).
	var rows []struct {
		Platform string `db:"platform"`
		OTN      string `db:"out_trade_no"`
		Status   string `db:"status"`
		TradeNo  string `db:"trade_no"`
		Events   int    `db:"events"`
		Outbox   int    `db:"outbox"`
		Findings int    `db:"findings"`
	}
	if err := e.db.Select(&rows, `SELECT o.platform, o.out_trade_no, o.status, COALESCE(o.platform_trade_no, '') AS trade_no,
			(SELECT count(*) FROM payment_events e WHERE e.order_id = o.id) AS events,
			(SELECT count(*) FROM fulfillment_outbox f WHERE f.order_id = o.id) AS outbox,
			(SELECT count(*) FROM reconcile_mismatches m WHERE m.order_id = o.id) AS findings
		FROM payment_orders o`); err != nil {
		t.Fatal(err)
	}
	if len(rows) != len(all) {
		t.Fatalf("%d orders in the database, %d seeded", len(rows), len(all))
	}
	byKey := map[string]int{}
	for i, r := range rows {
		byKey[r.Platform+"/"+r.OTN] = i
	}
	for _, o := range all {
		got := rows[byKey[string(o.platform)+"/"+o.otn]]
		sc := e.sb.Scenario(o.platform, o.otn)
		switch {
		case o.want == "SHORT":
			if got.Status != "PENDING" || got.Events != 0 || got.Outbox != 0 || got.Findings != 1 {
				t.Errorf("%s (paid short): %+v; want PENDING, nothing applied, one finding", o.otn, got)
			}
		case got.Findings != 0:
			t.Errorf("%s: %d findings", o.otn, got.Findings)
		case got.Status != o.want || got.Events != 1:
			t.Errorf("%s: %s with %d events, want %s once", o.otn, got.Status, got.Events, o.want)
		case o.want == "PAID" && (got.TradeNo != sc.TradeNo || got.Outbox != 1):
			t.Errorf("%s: trade %q (platform %q), %d outbox rows", o.otn, got.TradeNo, sc.TradeNo, got.Outbox)
		case o.want == "CLOSED" && (sc.State != sandbox.StateClosed || got.Outbox != 0):
			t.Errorf("%s: CLOSED here but %s at the platform, %d outbox rows", o.otn, sc.State, got.Outbox)
		}
	}
}
