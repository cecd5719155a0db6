package render

import (
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

// TestCountByDay: each finding lands on the bar of the day (in the report's zone) it was
// first seen; findings outside the period, or before the chart's last maxChartDays days,
// count nowhere; the kinds present come in domain order.
func TestCountByDay(t *testing.T) {
	loc := time.FixedZone("CST", 8*3600)
	at := func(day, hour int) time.Time { return time.Date(2026, 11, day, hour, 0, 0, 0, loc) }
	f := func(kind reconcile.MismatchKind, seen time.Time) reconcile.Finding {
		return reconcile.Finding{Kind: kind, FirstSeenAt: seen}
	}
	from, to := at(22, 0), at(29, 0)
	dc, err := countByDay(reconcile.FindingList{
		f(reconcile.MismatchUnknownOrder, at(28, 23)), // late on the 28th, China time
		f(reconcile.MismatchAmount, at(28, 0)),        // its first second
		f(reconcile.MismatchAmount, at(25, 10)),
		f(reconcile.MismatchAmount, at(21, 23)),              // before the period
		f(reconcile.MismatchAmount, at(29, 0)),               // the period's end is not in it
		f(reconcile.MismatchPaidAfterClose, at(22, 0).UTC()), // another zone, same instant
	}, from, to, loc)
	if err != nil {
		t.Fatal(err)
	}
	if len(dc.days) != 7 || !dc.days[0].Equal(from) {
		t.Fatalf("days %v, want the 7 days from %s", dc.days, from)
	}
	want := map[int]map[reconcile.MismatchKind]int{
		0: {reconcile.MismatchPaidAfterClose: 1},
		3: {reconcile.MismatchAmount: 1},
		6: {reconcile.MismatchAmount: 1, reconcile.MismatchUnknownOrder: 1},
	}
	for i := range dc.days {
		for _, k := range reconcile.MismatchKinds {
			if got := dc.counts[i][k]; got != want[i][k] {
				t.Errorf("%s %s: %d, want %d", dc.days[i].Format(time.DateOnly), k, got, want[i][k])
			}
		}
	}
	if len(dc.kinds) != 3 || dc.kinds[0] != reconcile.MismatchAmount {
		t.Errorf("kinds %v, want the three present in domain order", dc.kinds)
	}

	// A long period draws its last maxChartDays days; older findings count nowhere.
	longFrom := to.AddDate(0, 0, -maxChartDays-10)
	dc, err = countByDay(reconcile.FindingList{f(reconcile.MismatchAmount, longFrom.Add(time.Hour)), f(reconcile.MismatchAmount, at(28, 1))}, longFrom, to, loc)
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for i := range dc.days {
		total += dc.counts[i][reconcile.MismatchAmount]
	}
	if len(dc.days) != maxChartDays || total != 1 || dc.counts[len(dc.days)-1][reconcile.MismatchAmount] != 1 {
		t.Errorf("long period: %d days, %d counted; want %d days and only the recent finding", len(dc.days), total, maxChartDays)
	}
}
