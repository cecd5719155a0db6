package postgres_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/repotest"
)

// insertRun seeds one reconcile_runs row.
func insertRun(t testing.TB, db *repotest.DB, mode, status string, started time.Time, counters [8]int64) int64 {
	t.Helper()
	var id int64
	err := db.Get(&id, `INSERT INTO reconcile_runs (mode, status, started_at, finished_at, window_from, window_to, shard,
		scanned, repaired, closed, unchanged, still_pending, mismatches, claimed_elsewhere, errors)
		VALUES ($1, $2, $3, $3::timestamptz + interval '1 minute', $3::timestamptz - interval '72 hours', $3, '1/4',
		$4, $5, $6, $7, $8, $9, $10, $11) RETURNING id`,
		mode, status, started, counters[0], counters[1], counters[2], counters[3], counters[4], counters[5], counters[6], counters[7])
	if err != nil {
		t.Fatalf("seed run: %v", err)
	}
	return id
}

func TestReportAggregates(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	h := time.Hour
	from, to := reviewBase, reviewBase.Add(24*h)
	in := reviewBase.Add(3 * h)
	seeds := []seedFinding{
		// In the period.
		{otn: "amt-1", kind: reconcile.MismatchAmount, local: 10000, plat: 9990, first: in, seen: 2},                  // at stake 10
		{otn: "amt-2", kind: reconcile.MismatchAmount, local: 1, plat: 100001, first: from, last: to.Add(h), seen: 5}, // first seen at the start: 100000
		{otn: "amt-3", kind: reconcile.MismatchAmount, local: 5000, plat: 5005, first: from.Add(-48 * h), last: in, // last seen in the period: 5
			status: reconcile.ReviewResolved, resolution: "ok", by: "ann", resolvedAt: in},
		{otn: "unk-1", kind: reconcile.MismatchUnknownOrder, plat: 777, first: in, platform: "wechatpay"},                          // 777
		{otn: "lpu-1", kind: reconcile.MismatchLocalPaidPlatformNot, local: 4321, first: in, status: reconcile.ReviewAcknowledged}, // 4321
		// Outside: wholly before, wholly after, ending exactly at the start, starting at the end.
		{otn: "old", kind: reconcile.MismatchAmount, local: 1, plat: 2, first: from.Add(-48 * h), last: from.Add(-24 * h)},
		{otn: "edge-before", kind: reconcile.MismatchAmount, local: 1, plat: 2, first: from.Add(-h), last: from.Add(-time.Nanosecond * 1000)},
		{otn: "future", kind: reconcile.MismatchUnknownOrder, plat: 9, first: to, last: to.Add(h)},
		// Spans the period with no sighting recorded inside it.
		{otn: "span", kind: reconcile.MismatchAmount, local: 1, plat: 2, first: from.Add(-h), last: to.Add(h)},
	}
	for _, s := range seeds {
		insertFinding(t, db, s)
	}
	r1 := insertRun(t, db, "scheduled", "succeeded", from, [8]int64{10, 2, 1, 3, 4, 1, 0, 0})
	r2 := insertRun(t, db, "backfill", "failed", in, [8]int64{5, 0, 0, 0, 0, 2, 1, 2})
	insertRun(t, db, "once", "succeeded", to, [8]int64{99, 99, 99, 99, 99, 99, 99, 99})
	insertRun(t, db, "once", "succeeded", from.Add(-time.Second), [8]int64{99, 99, 99, 99, 99, 99, 99, 99})

	rep, findings := readReport(t, postgres.NewReview(db.DB), from, to)
	if !rep.From.Equal(from) || !rep.To.Equal(to) {
		t.Fatalf("period %v - %v", rep.From, rep.To)
	}
	wantSummary := []reconcile.SummaryRow{
		{Kind: reconcile.MismatchAmount, ReviewStatus: reconcile.ReviewOpen, Count: 2, SeenCount: 7,
			LocalAmountMinor: 10001, PlatformAmountMinor: 109991, AtStakeMinor: 100010},
		{Kind: reconcile.MismatchAmount, ReviewStatus: reconcile.ReviewResolved, Count: 1, SeenCount: 1,
			LocalAmountMinor: 5000, PlatformAmountMinor: 5005, AtStakeMinor: 5},
		{Kind: reconcile.MismatchUnknownOrder, ReviewStatus: reconcile.ReviewOpen, Count: 1, SeenCount: 1,
			PlatformAmountMinor: 777, AtStakeMinor: 777},
		{Kind: reconcile.MismatchLocalPaidPlatformNot, ReviewStatus: reconcile.ReviewAcknowledged, Count: 1, SeenCount: 1,
			LocalAmountMinor: 4321, AtStakeMinor: 4321},
	}
	if !slices.Equal(rep.Summary, wantSummary) {
		t.Fatalf("summary\n got %+v\nwant %+v", rep.Summary, wantSummary)
	}
	wantTotals := reconcile.SummaryRow{Count: 5, SeenCount: 10, LocalAmountMinor: 19322, PlatformAmountMinor: 115773, AtStakeMinor: 105113}
	if rep.Totals != wantTotals {
		t.Fatalf("totals %+v, want %+v", rep.Totals, wantTotals)
	}
	if got, want := otns(findings), []string{"amt-3", "amt-2", "amt-1", "unk-1", "lpu-1"}; !slices.Equal(got, want) {
		t.Fatalf("findings %q, want %q (first seen order)", got, want)
	}
	// The report sums in SQL (atStakeSQL); the domain's rule summed in Go over the very
	// findings it lists must come to the same summary, group by group.
	if got, want := rep.Summary, summariseInGo(findings); !slices.Equal(got, want) {
		t.Fatalf("SQL and the domain disagree on the summary\n SQL %+v\n  Go %+v", got, want)
	}
	var stake int64
	for _, f := range findings {
		stake += f.AtStakeMinor()
	}
	if stake != rep.Totals.AtStakeMinor {
		t.Fatalf("SQL and the domain disagree on the amount at stake: %d vs %d", rep.Totals.AtStakeMinor, stake)
	}
	if len(rep.Runs) != 2 || rep.Runs[0].ID != r1 || rep.Runs[1].ID != r2 {
		t.Fatalf("runs %+v, want %d and %d", rep.Runs, r1, r2)
	}
	r := rep.Runs[1]
	if r.Mode != "backfill" || r.Status != "failed" || r.Shard != "1/4" || r.Scanned != 5 || r.Mismatches != 2 ||
		r.ClaimedElsewhere != 1 || r.Errors != 2 || r.FinishedAt == nil || r.WindowFrom == nil || r.WindowTo == nil ||
		!r.WindowTo.Equal(in) {
		t.Fatalf("run read back wrong: %+v", r)
	}
	rt := rep.RunTotals
	if rt.Runs != 2 || rt.ByStatus["succeeded"] != 1 || rt.ByStatus["failed"] != 1 || rt.Scanned != 15 || rt.Repaired != 2 ||
		rt.Closed != 1 || rt.Unchanged != 3 || rt.StillPending != 4 || rt.Mismatches != 3 || rt.ClaimedElsewhere != 1 || rt.Errors != 2 {
		t.Fatalf("run totals %+v", rt)
	}
}

func TestReportEmptyAndInvalidPeriods(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	rv := postgres.NewReview(db.DB)
	rep, findings := readReport(t, rv, reviewBase, reviewBase.Add(time.Hour))
	if len(rep.Summary) != 0 || len(findings) != 0 || len(rep.Runs) != 0 || rep.Totals != (reconcile.SummaryRow{}) {
		t.Fatalf("empty period: %+v", rep)
	}
	// A leap year's 366 days is the longest period (calendar days in from's zone).
	readReport(t, rv, reviewBase, reviewBase.AddDate(0, 0, reconcile.MaxReportPeriodDays))
	for _, to := range []time.Time{reviewBase, reviewBase.Add(-time.Hour),
		reviewBase.AddDate(0, 0, reconcile.MaxReportPeriodDays).Add(time.Second), time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)} {
		called := false
		err := rv.Report(context.Background(), reviewBase, to, func(reconcile.Report) error { called = true; return nil })
		var input *reconcile.InputError
		if !errors.As(err, &input) || called {
			t.Errorf("report of [%v, %v): %v (read: %t), want an input error before any reading", reviewBase, to, err, called)
		}
	}
	if err := rv.Report(context.Background(), time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC),
		func(reconcile.Report) error { return nil }); err == nil || !strings.Contains(err.Error(), "366 days") {
		t.Errorf("the report of all time: %v, want the limit named", err)
	}
}

// readReport reads the report of [from, to) and all its findings.
func readReport(t testing.TB, rv *postgres.Review, from, to time.Time) (reconcile.Report, []reconcile.Finding) {
	t.Helper()
	var rep reconcile.Report
	findings := []reconcile.Finding{}
	err := rv.Report(context.Background(), from, to, func(r reconcile.Report) error {
		rep = r
		return r.Findings.Each(func(f reconcile.Finding) error {
			findings = append(findings, f)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return rep, findings
}

// summariseInGo groups findings by kind and review status in the domain's order, summing
// with the domain's money rule: what the report's SQL summary must come to.
func summariseInGo(findings []reconcile.Finding) []reconcile.SummaryRow {
	out := []reconcile.SummaryRow{}
	for _, kind := range reconcile.MismatchKinds {
		for _, st := range reconcile.ReviewStatuses {
			g := reconcile.SummaryRow{Kind: kind, ReviewStatus: st}
			for _, f := range findings {
				if f.Kind == kind && f.ReviewStatus == st {
					g.Count++
					g.SeenCount += f.SeenCount
					g.LocalAmountMinor += orZero(f.LocalAmountMinor)
					g.PlatformAmountMinor += orZero(f.PlatformAmountMinor)
					g.AtStakeMinor += f.AtStakeMinor()
				}
			}
			if g.Count > 0 {
				out = append(out, g)
			}
		}
	}
	return out
}

func orZero(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
