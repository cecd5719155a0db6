package reconcile_test

import (
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

// TestRunCountersTable: the table names the reconcile_runs counter columns once each, every
// tally adds to exactly one of them, and a snapshot reads back what was added.
func TestRunCountersTable(t *testing.T) {
	want := []string{"scanned", "repaired", "closed", "unchanged", "still_pending", "mismatches", "claimed_elsewhere", "errors",
		"refunds_repaired"}
	if len(reconcile.RunCounters) != len(want) {
		t.Fatalf("%d counters, want %d", len(reconcile.RunCounters), len(want))
	}
	var k reconcile.Counters
	tallies := map[reconcile.Tally]int{}
	for i, rc := range reconcile.RunCounters {
		if rc.Name != want[i] {
			t.Fatalf("counter %d is %q, want %q", i, rc.Name, want[i])
		}
		if rc.Tally != "" {
			tallies[rc.Tally]++
			for n := 0; n <= i; n++ {
				k.Add(rc.Tally)
			}
		}
	}
	for _, tl := range []reconcile.Tally{reconcile.TallyRepaired, reconcile.TallyClosed, reconcile.TallyUnchanged,
		reconcile.TallyStillPending, reconcile.TallyMismatch, reconcile.TallyClaimedElsewhere, reconcile.TallyError,
		reconcile.TallyRefundRepaired} {
		if tallies[tl] != 1 {
			t.Errorf("tally %q adds to %d counters, want 1", tl, tallies[tl])
		}
	}
	v := k.Snapshot()
	for i, rc := range reconcile.RunCounters {
		if rc.Tally != "" && rc.Value(v) != int64(i+1) {
			t.Errorf("%s = %d, want %d", rc.Name, rc.Value(v), i+1)
		}
	}
}

// TestDefaultOrderLease: the lease outlives ten platform call timeouts and is never under two minutes.
func TestDefaultOrderLease(t *testing.T) {
	for _, tc := range []struct{ timeout, want time.Duration }{
		{0, 2 * time.Minute}, {5 * time.Second, 2 * time.Minute}, {10 * time.Second, 2 * time.Minute},
		{30 * time.Second, 5 * time.Minute}, {time.Minute, 10 * time.Minute},
	} {
		if got := reconcile.DefaultOrderLease(tc.timeout); got != tc.want {
			t.Errorf("DefaultOrderLease(%s) = %s, want %s", tc.timeout, got, tc.want)
		}
	}
}

// TestCountersLoad: a resumed backfill's counters start from its row's values, every one of
// them (a counter Load forgot would restart from zero and undercount the run).
func TestCountersLoad(t *testing.T) {
	want := reconcile.CounterValues{Scanned: 11, Repaired: 12, Closed: 13, Unchanged: 14, StillPending: 15,
		Mismatches: 16, ClaimedElsewhere: 17, Errors: 18, RefundsRepaired: 19}
	var c reconcile.Counters
	c.Load(want)
	if got := c.Snapshot(); got != want {
		t.Errorf("loaded %+v, snapshot %+v", want, got)
	}
}
