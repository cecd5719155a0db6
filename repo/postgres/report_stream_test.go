package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/repotest"
)

// seedPagedFindings inserts n findings in one statement, first seen within five hours of
// reviewBase with about eight to a minute, so that pages end inside runs of equal first-seen
// times and only the id orders them. Finding i is PAGE-i, at stake i fen.
func seedPagedFindings(t *testing.T, db *repotest.DB, n int) {
	t.Helper()
	db.MustExec(`INSERT INTO reconcile_mismatches (platform, merchant_id, out_trade_no, kind, platform_amount_minor,
			first_seen_at, last_seen_at)
		SELECT 'alipay', '2021000000000001', 'PAGE-' || i, 'UNKNOWN_ORDER', i,
			$1::timestamptz + (i % 300) * interval '1 minute', $1::timestamptz + (i % 300) * interval '1 minute'
		FROM generate_series(1, $2::int) AS i`, reviewBase, n)
}

// reportQuery is what the report's session is running: its findings cursor's FETCH.
func reportQuery(t *testing.T, db *repotest.DB) string {
	t.Helper()
	var q string
	err := db.Get(&q, `SELECT query FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'FETCH%'`)
	if err != nil {
		t.Fatalf("the report's session: %v", err)
	}
	return q
}

// TestReportFindingsComeInPages: 2,500 findings come through the cursor 100 at a time (the
// report's session is seen fetching pages while the first and a later finding are handed
// over, so the findings are never all read first), each exactly once and in (first seen, id)
// order across every page boundary; an error from the caller stops the reading at once.
func TestReportFindingsComeInPages(t *testing.T) {
	// Not parallel: the page size is the package's.
	defer postgres.SetReportPageSize(100)()
	const n = 2500
	db := repotest.NewDB(t)
	seedPagedFindings(t, db, n)
	rv := postgres.NewReview(db.DB)

	var got []reconcile.Finding
	seen := map[string]bool{}
	err := rv.Report(context.Background(), reviewBase, reviewBase.Add(6*time.Hour), func(rep reconcile.Report) error {
		if rep.Totals.Count != n {
			t.Errorf("totals count %d findings, want %d", rep.Totals.Count, n)
		}
		return rep.Findings.Each(func(f reconcile.Finding) error {
			if len(got) == 0 || len(got) == 1234 {
				if q := reportQuery(t, db); q != "FETCH FORWARD 100 FROM report_findings_1" {
					t.Errorf("finding %d handed over while the report runs %q, want a page of 100 from its cursor", len(got), q)
				}
			}
			if seen[f.OutTradeNo] {
				t.Errorf("%s twice", f.OutTradeNo)
			}
			seen[f.OutTradeNo] = true
			got = append(got, f)
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != n || len(seen) != n {
		t.Fatalf("%d findings (%d distinct), want %d", len(got), len(seen), n)
	}
	for i := 1; i < n; i++ {
		a, b := got[i-1], got[i]
		if b.FirstSeenAt.Before(a.FirstSeenAt) || (b.FirstSeenAt.Equal(a.FirstSeenAt) && b.ID <= a.ID) {
			t.Fatalf("finding %d (%v, %d) after %d (%v, %d): not in (first seen, id) order", i, b.FirstSeenAt, b.ID, i-1, a.FirstSeenAt, a.ID)
		}
	}
	for i := 1; i <= n; i++ {
		if !seen[fmt.Sprintf("PAGE-%d", i)] {
			t.Fatalf("PAGE-%d never came", i)
		}
	}

	stop := errors.New("the client went away")
	calls := 0
	err = rv.Report(context.Background(), reviewBase, reviewBase.Add(6*time.Hour), func(rep reconcile.Report) error {
		return rep.Findings.Each(func(reconcile.Finding) error {
			if calls++; calls == 150 {
				return stop
			}
			return nil
		})
	})
	if !errors.Is(err, stop) || calls != 150 {
		t.Fatalf("stopped with %v after %d findings, want the caller's error after 150", err, calls)
	}
}

// TestReportCountsFirstSeenAsTheListDoes: the chart's per-day counts come from an SQL
// aggregate; they equal FindingList's count in Go over the findings the report lists.
func TestReportCountsFirstSeenAsTheListDoes(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	seedPagedFindings(t, db, 900)
	insertFinding(t, db, seedFinding{otn: "amount", local: 1, plat: 2, first: reviewBase.Add(90 * time.Minute)})
	insertFinding(t, db, seedFinding{otn: "before", first: reviewBase.Add(-time.Hour), last: reviewBase.Add(time.Hour)})
	from, to := reviewBase.Add(10*time.Minute), reviewBase.Add(4*time.Hour)
	// Buckets of 37 minutes from the period start to its end; a bound on a minute mark.
	bounds := []time.Time{from}
	for b := from.Add(37 * time.Minute); b.Before(to); b = b.Add(37 * time.Minute) {
		bounds = append(bounds, b)
	}
	bounds = append(bounds, reviewBase.Add(4*time.Hour))
	rv := postgres.NewReview(db.DB)
	err := rv.Report(context.Background(), from, to, func(rep reconcile.Report) error {
		sql, err := rep.Findings.CountFirstSeen(bounds)
		if err != nil {
			return err
		}
		var list reconcile.FindingList
		if err := rep.Findings.Each(func(f reconcile.Finding) error { list = append(list, f); return nil }); err != nil {
			return err
		}
		inGo, err := list.CountFirstSeen(bounds)
		if err != nil {
			return err
		}
		if len(sql) != len(bounds)-1 || fmt.Sprint(sql) != fmt.Sprint(inGo) {
			t.Errorf("per bucket\n SQL %v\n  Go %v", sql, inGo)
		}
		total := 0
		for _, b := range sql {
			for _, n := range b {
				total += n
			}
		}
		if total == 0 || total >= len(list) { // "before" is listed (last seen in) but first seen before
			t.Errorf("%d counted of %d listed", total, len(list))
		}
		if _, err := rep.Findings.CountFirstSeen(slices.Repeat([]time.Time{from}, 2)); err == nil {
			t.Error("bounds that do not ascend accepted")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
