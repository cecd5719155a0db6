package reconcile_test

import (
	"errors"
	"testing"

	"github.com/payrecon/payrecon/reconcile"
)

func TestCheckTallyAndCounters(t *testing.T) {
	cases := []struct {
		name  string
		check reconcile.Check
		want  reconcile.Tally
		field func(reconcile.CounterValues) int64
	}{
		{"paid", reconcile.Check{Applied: reconcile.Applied{Outcome: reconcile.OutcomeApplied, To: reconcile.StatusPaid}},
			reconcile.TallyRepaired, func(v reconcile.CounterValues) int64 { return v.Repaired }},
		{"closed", reconcile.Check{Applied: reconcile.Applied{Outcome: reconcile.OutcomeApplied, To: reconcile.StatusClosed}},
			reconcile.TallyClosed, func(v reconcile.CounterValues) int64 { return v.Closed }},
		{"mismatch", reconcile.Check{Applied: reconcile.Applied{Outcome: reconcile.OutcomeMismatch}},
			reconcile.TallyMismatch, func(v reconcile.CounterValues) int64 { return v.Mismatches }},
		{"claimed", reconcile.Check{Applied: reconcile.Applied{Outcome: reconcile.OutcomeClaimedElsewhere}},
			reconcile.TallyClaimedElsewhere, func(v reconcile.CounterValues) int64 { return v.ClaimedElsewhere }},
		{"pending", reconcile.Check{Applied: reconcile.Applied{Outcome: reconcile.OutcomeStillPending}},
			reconcile.TallyStillPending, func(v reconcile.CounterValues) int64 { return v.StillPending }},
		{"unchanged", reconcile.Check{Applied: reconcile.Applied{Outcome: reconcile.OutcomeUnchanged}},
			reconcile.TallyUnchanged, func(v reconcile.CounterValues) int64 { return v.Unchanged }},
		{"duplicate", reconcile.Check{Applied: reconcile.Applied{Outcome: reconcile.OutcomeDuplicate}},
			reconcile.TallyUnchanged, func(v reconcile.CounterValues) int64 { return v.Unchanged }},
		{"refund moved", reconcile.Check{Applied: reconcile.Applied{Outcome: reconcile.OutcomeApplied, RefundFrom: reconcile.RefundProcessing, RefundTo: reconcile.RefundSuccess}},
			reconcile.TallyRefundRepaired, func(v reconcile.CounterValues) int64 { return v.RefundsRepaired }},
		{"refund closed is not an order closed", reconcile.Check{Applied: reconcile.Applied{Outcome: reconcile.OutcomeApplied, RefundFrom: reconcile.RefundProcessing, RefundTo: reconcile.RefundClosed}},
			reconcile.TallyRefundRepaired, func(v reconcile.CounterValues) int64 { return v.RefundsRepaired }},
		{"error wins", reconcile.Check{Err: errors.New("boom"), Applied: reconcile.Applied{Outcome: reconcile.OutcomeApplied, To: reconcile.StatusPaid}},
			reconcile.TallyError, func(v reconcile.CounterValues) int64 { return v.Errors }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.check.Tally(); got != tc.want {
				t.Fatalf("Tally() = %q, want %q", got, tc.want)
			}
			var k reconcile.Counters
			k.Add(tc.check.Tally())
			v := k.Snapshot()
			if tc.field(v) != 1 {
				t.Fatalf("counter for %q not incremented: %+v", tc.want, v)
			}
			if sum := v.Repaired + v.Closed + v.Unchanged + v.StillPending + v.Mismatches + v.ClaimedElsewhere + v.Errors + v.RefundsRepaired; sum != 1 {
				t.Fatalf("one check must add to exactly one counter, got %+v", v)
			}
		})
	}
}

func TestParseShard(t *testing.T) {
	cases := []struct {
		in   string
		want reconcile.Shard
		ok   bool
	}{
		{"0/1", reconcile.Shard{Index: 0, Count: 1}, true},
		{"2/3", reconcile.Shard{Index: 2, Count: 3}, true},
		{"3/3", reconcile.Shard{}, false},
		{"-1/3", reconcile.Shard{}, false},
		{"0/0", reconcile.Shard{}, false},
		{"01/3", reconcile.Shard{}, false},
		{"1/3x", reconcile.Shard{}, false},
		{"", reconcile.Shard{}, false},
	}
	for _, tc := range cases {
		got, err := reconcile.ParseShard(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseShard(%q) = %v, %v; want %v, ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
		if tc.ok && got.String() != tc.in {
			t.Errorf("ParseShard(%q).String() = %q", tc.in, got.String())
		}
	}
}
