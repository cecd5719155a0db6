package main

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payrecon/payrecon/internal/faultproxy"
	"github.com/payrecon/payrecon/sandbox"
)

// e2eNetFault is one network fault toxiproxy puts on a path.
type e2eNetFault struct {
	name   string
	typ    string // toxiproxy toxic
	stream string // upstream: what the worker sends; downstream: what it hears back
	attrs  map[string]int64
	// midPass installs the fault once the pass has applied some orders (on the connections
	// it is using), rather than before the worker starts.
	midPass bool
	// heal removes the fault this long after it was installed; 0 keeps it until the worker
	// has exited.
	heal time.Duration
}

var e2eNetFaults = []e2eNetFault{
	{name: "latency", typ: "latency", stream: "downstream", attrs: map[string]int64{"latency": 30, "jitter": 10}},
	{name: "bandwidth", typ: "bandwidth", stream: "downstream", attrs: map[string]int64{"rate": 16}}, // KB/s
	// The next chunk each connection receives resets it (RST); new connections work again
	// after 300 ms: the server did the work, the worker never heard the answer.
	{name: "reset mid-response", typ: "reset_peer", stream: "downstream", attrs: map[string]int64{"timeout": 0}, midPass: true, heal: 300 * time.Millisecond},
	// Each connection may send 256 more bytes, then it is closed: a statement or a request
	// cut in the middle, a transaction left without its COMMIT. For 500 ms.
	{name: "cut mid-transaction", typ: "limit_data", stream: "upstream", attrs: map[string]int64{"bytes": 256}, midPass: true, heal: 500 * time.Millisecond},
	// Nothing comes back and nothing closes: the peer vanished behind a NAT or a failover.
	// Kept until the worker is gone.
	{name: "half-open", typ: "timeout", stream: "downstream", attrs: map[string]int64{"timeout": 0}, midPass: true},
}

// e2eNetOutcome is what one cell expects of the faulted run.
type e2eNetOutcome struct {
	codes []int // acceptable exit codes
	// allPaid: the fault costs time only; the faulted run repairs every order itself.
	allPaid bool
	// felt: the fault must cost the faulted run some orders (left for the clean run). A
	// transient fault may be absorbed by retries instead, so only lasting ones must be felt.
	felt bool
	// checkErrors: the run row is finished and every order it did not repair is counted
	// as an error (a platform fault fails checks, never the pass).
	checkErrors bool
}

// TestE2ENetworkFaults puts each fault between `reconciler run` and PostgreSQL, Redis or
// the platform (the sandbox) and says what the worker does: its exit code, its run row's
// counters, exactly what reached the database (every PAID order whole, with the
// platform's trade number and amount, one event and one outbox row; nothing closed, since
// every order is paid at the platform, a quarter of them past their expiry), and then
// that a clean run converges every order.
// The matrix of outcomes is printed at the end.
func TestE2ENetworkFaults(t *testing.T) {
	t.Parallel()
	healthy := e2eNetOutcome{codes: []int{0}, allPaid: true}
	// A database fault fails the statements in flight; what the pass then does depends on
	// which statement was hit (an apply: that order counts as an error; the run record or
	// the taking query: the pass stops, exit 1).
	dbFault := e2eNetOutcome{codes: []int{0, 1}}
	dbHalfOpen := e2eNetOutcome{codes: []int{0, 1}, felt: true}
	platformFault := e2eNetOutcome{codes: []int{0}, checkErrors: true}
	platformHalfOpen := e2eNetOutcome{codes: []int{0}, checkErrors: true, felt: true}
	want := map[string]map[string]e2eNetOutcome{
		"postgres": {"latency": healthy, "bandwidth": healthy, "reset mid-response": dbFault, "cut mid-transaction": dbFault, "half-open": dbHalfOpen},
		// Claims are an optimisation over the database's own guarantee: a failing Redis
		// costs nothing but the fallback.
		"redis": {"latency": healthy, "bandwidth": healthy, "reset mid-response": healthy, "cut mid-transaction": healthy, "half-open": healthy},
		// A platform call that fails is an error for that order, never a close; the pass
		// goes on and exits 0, the order stays due.
		"platform": {"latency": healthy, "bandwidth": healthy, "reset mid-response": platformFault, "cut mid-transaction": platformFault, "half-open": platformHalfOpen},
	}
	var mu sync.Mutex
	var matrix []string
	for _, target := range []string{"postgres", "redis", "platform"} {
		for _, f := range e2eNetFaults {
			cell := target + "/" + f.name
			t.Run(strings.ReplaceAll(cell, " ", "_"), func(t *testing.T) {
				line := e2eNetCell(t, target, f, want[target][f.name])
				mu.Lock()
				matrix = append(matrix, fmt.Sprintf("%-32s %s", cell, line))
				mu.Unlock()
			})
		}
	}
	slices.Sort(matrix)
	t.Logf("network fault matrix (cell: faulted run -> clean run):\n%s", strings.Join(matrix, "\n"))
}

// e2eNetCell runs one cell and returns its line of the matrix.
func e2eNetCell(t *testing.T, target string, f e2eNetFault, want e2eNetOutcome) string {
	e := newE2EEnv(t)
	const n = 40
	var orders []e2eOrder
	for i := range n {
		p := e2ePlatforms[i%2]
		o := e2eOrder{platform: p, otn: fmt.Sprintf("%s-net-%02d", p, i), amount: 500 + int64(i), createdAt: e2eAgo(10 * time.Minute)}
		if i%4 == 3 {
			// Past its expiry, yet paid: a fault that hides the payment must not get it
			// closed.
			o.createdAt = e2eAgo(3 * time.Hour)
		}
		orders = append(orders, o)
		e.paidAtPlatform(p, o.otn, o.amount)
	}
	e.seed(orders...)
	// 40 ms a query keeps the pass going long enough to be hit in the middle.
	for _, p := range e2ePlatforms {
		e.sb.SetFault(p, sandbox.Fault{Latency: sandbox.Duration(40 * time.Millisecond)})
	}
	px, env := e2eNetProxy(t, e, target)
	// A failed check is due again at once (RECHECK_MIN 0s), so the clean run right after
	// re-checks it; a claim a failed release left PROCESSING runs out in 2 s.
	env = append(env, "RECONCILER_CONCURRENCY=4", "RECONCILER_PLATFORM_TIMEOUT=1s", "RECONCILER_DATABASE_TIMEOUT=2s",
		"RECONCILER_CLAIM_LEASE=2s", "RECONCILER_RECHECK_MIN=0s")

	var toxic string
	if !f.midPass {
		toxic = px.Add(t, f.typ, f.stream, f.attrs)
	}
	run := e.start(env, "run")
	appliedBefore := 0
	if f.midPass {
		e2eEventually(t, 30*time.Second, "the pass to apply some orders", func() bool {
			appliedBefore = e.count(`SELECT count(*) FROM payment_events`)
			return appliedBefore >= 6 || run.exited()
		})
		if run.exited() {
			t.Fatalf("the pass ended before the fault could hit it (%d applied)", appliedBefore)
		}
		toxic = px.Add(t, f.typ, f.stream, f.attrs)
		if f.heal > 0 {
			time.Sleep(f.heal)
			px.Remove(t, toxic)
		}
	}
	code := run.wait(t, 90*time.Second)
	if f.heal == 0 {
		px.Clear(t)
	}
	if !slices.Contains(want.codes, code) {
		t.Errorf("faulted run exited %d, want one of %v\nstderr:\n%s", code, want.codes, e2eTail(run.stderr.String(), 4000))
	}

	row, paid := e2eNetApplied(t, e, orders)
	switch {
	case want.allPaid && (paid != n || row.Status != "succeeded" || row.Repaired != n || row.Errors != 0):
		t.Errorf("a fault that costs only time: %d of %d orders paid, run row %s", paid, n, row)
	case want.felt && paid == n:
		t.Errorf("the fault was not felt: all %d orders paid by the faulted run (%s)", n, row)
	case want.checkErrors && (row.Status != "succeeded" || row.Scanned != n || row.Errors != int64(n-paid) || row.Repaired != int64(paid)):
		t.Errorf("a platform fault fails checks, not the pass: want %d repaired and %d errors of %d, run row %s", paid, n-paid, n, row)
	}
	// The controlled clock: a process that died holding leases frees them only when they
	// run out; move them there rather than wait.
	leftLeased := e.count(`SELECT count(*) FROM payment_orders WHERE lease_owner IS NOT NULL`)
	e.db.MustExec(`UPDATE payment_orders SET lease_until = now() - interval '1 second' WHERE lease_owner IS NOT NULL`)
	// A PROCESSING claim a failed release left behind runs out after RECONCILER_CLAIM_LEASE.
	e2eEventually(t, 10*time.Second, "PROCESSING claims to run out", func() bool { return e.processingClaims() == 0 })

	clean := e.run(env, "run")
	clean.expect(t, 0)
	e.expectRun(e.lastRun(), "succeeded", e2eCounts{scanned: -1, repaired: int64(n - paid), closed: 0, unchanged: -1, stillPending: 0, mismatches: 0, claimedElsewhere: 0, errors: 0})
	for _, o := range orders {
		if got := e.order(o.platform, o.otn); got.Status != "PAID" || got.Events != 1 || got.Outbox != 1 {
			t.Errorf("%s after the clean run: %+v, want PAID with one event and one outbox row", o.otn, got)
		}
	}
	e.invariants()
	return fmt.Sprintf("exit %d, run %s scanned=%d repaired=%d errors=%d closed=%d, %d/%d paid, %d left leased (hit at %d applied) -> clean run repaired %d, all %d PAID once (%s)",
		code, row.Status, row.Scanned, row.Repaired, row.Errors, row.Closed, paid, n, leftLeased, appliedBefore, n-paid, n, run.took.Round(time.Millisecond))
}

// e2eNetProxy puts a toxiproxy in front of target and returns the settings that route the
// worker through it.
func e2eNetProxy(t *testing.T, e *e2eEnv, target string) (*faultproxy.Toxic, []string) {
	t.Helper()
	switch target {
	case "postgres", "redis":
		raw := e.db.URL
		if target == "redis" {
			raw = e.redis.URL
		}
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		px := faultproxy.StartToxic(t, u.Host)
		u.Host = px.Addr()
		if target == "redis" {
			return px, []string{"RECONCILER_REDIS_URL=" + u.String()}
		}
		return px, []string{"RECONCILER_DATABASE_URL=" + u.String()}
	default:
		u, err := url.Parse(e.sbURL)
		if err != nil {
			t.Fatal(err)
		}
		px := faultproxy.StartToxic(t, u.Host)
		return px, e.sb.Env("http://"+px.Addr(), e.files)
	}
}

// e2eNetApplied checks what a faulted run left in the database, read directly (not through
// the proxy): every PAID order whole and the platform's, no order closed, nothing on a
// PENDING order. It returns the run row and how many orders are PAID.
func e2eNetApplied(t *testing.T, e *e2eEnv, orders []e2eOrder) (e2eRun, int) {
	t.Helper()
	paid := 0
	for _, o := range orders {
		got := e.order(o.platform, o.otn)
		switch got.Status {
		case "PAID":
			paid++
			sc := e.sb.Scenario(o.platform, o.otn)
			if got.Events != 1 || got.PaidEvents != 1 || got.Outbox != 1 || got.TradeNo.String != sc.TradeNo || got.PaidAmount.Int64 != o.amount || !got.PaidAt.Valid {
				t.Errorf("%s half-applied or not the platform's: %+v (platform trade %s)", o.otn, got, sc.TradeNo)
			}
		case "PENDING":
			if got.Events != 0 || got.Outbox != 0 {
				t.Errorf("%s PENDING with %d events and %d outbox rows", o.otn, got.Events, got.Outbox)
			}
		default:
			t.Errorf("%s is %s after a network fault; it is paid at the platform", o.otn, got.Status)
		}
	}
	if n := e.count(`SELECT count(*) FROM reconcile_mismatches`); n != 0 {
		t.Errorf("%d findings from a network fault", n)
	}
	rows := e.runs()
	if len(rows) != 1 {
		t.Fatalf("%d run rows after the faulted run, want 1", len(rows))
	}
	r := rows[0]
	if r.Closed != 0 || r.Repaired > int64(paid) {
		t.Errorf("run row %s: closed nothing and repaired at most the %d PAID orders", r, paid)
	}
	return r, paid
}

// processingClaims counts the claim keys still PROCESSING.
func (e *e2eEnv) processingClaims() int {
	e.t.Helper()
	n := 0
	for _, k := range e.claimKeys() {
		if v, _ := e.redis.Client.Get(e.t.Context(), k).Result(); v == "PROCESSING" {
			n++
		}
	}
	return n
}
