package reconcile_test

import (
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

// TestRunCountersTable: the table names the eight reconcile_runs columns once each, every
// tally adds to exactly one of them, and a snapshot reads back what was added.
func TestRunCountersTable(t *testing.T) {
	want := []string{"scanned", "repaired", "closed", "unchanged", "still_pending", "mismatches", "claimed_elsewhere", "errors"}
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
		reconcile.TallyStillPending, reconcile.TallyMismatch, reconcile.TallyClaimedElsewhere, reconcile.TallyError} {
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

// TestLeaseFor: the lease outlives ten platform call timeouts and is never under two minutes.
func TestLeaseFor(t *testing.T) {
	for _, tc := range []struct{ timeout, want time.Duration }{
		{0, 2 * time.Minute}, {5 * time.Second, 2 * time.Minute}, {10 * time.Second, 2 * time.Minute},
		{30 * time.Second, 5 * time.Minute}, {time.Minute, 10 * time.Minute},
	} {
		if got := reconcile.LeaseFor(tc.timeout); got != tc.want {
			t.Errorf("LeaseFor(%s) = %s, want %s", tc.timeout, got, tc.want)
		}
	}
}
