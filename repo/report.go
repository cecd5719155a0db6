package repo

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

// Report is the mismatch and run report for the half-open period [From, To).
type Report struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
	// Summary counts the period's findings by kind and review status, in kind then workflow
	// order; Totals adds them up.
	Summary []SummaryRow `json:"summary"`
	Totals  SummaryRow   `json:"totals"`
	// Findings are those first seen or last seen in the period, oldest first.
	Findings []Finding `json:"findings"`
	// Runs are the reconcile_runs that started in the period, oldest first; RunTotals adds
	// up their counters.
	Runs      []Run     `json:"runs"`
	RunTotals RunTotals `json:"run_totals"`
	// Statements are the settlement figures of the business days (starting in the period,
	// in the zone of From) whose bills were reconciled, by day and account.
	Statements []StatementDayRow `json:"statements"`
}

// SummaryRow aggregates the findings of one kind and review status. Amounts are sums in
// minor units; AtStakeMinor sums Finding.AtStakeMinor.
type SummaryRow struct {
	Kind                reconcile.MismatchKind `json:"kind,omitempty" db:"kind"`
	ReviewStatus        reconcile.ReviewStatus `json:"review_status,omitempty" db:"review_status"`
	Count               int64                  `json:"count" db:"count"`
	SeenCount           int64                  `json:"seen_count" db:"seen_count"`
	LocalAmountMinor    int64                  `json:"local_amount_minor" db:"local_amount_minor"`
	PlatformAmountMinor int64                  `json:"platform_amount_minor" db:"platform_amount_minor"`
	AtStakeMinor        int64                  `json:"at_stake_minor" db:"at_stake_minor"`
}

// Run is one reconcile_runs row as the report shows it, with its counters.
type Run struct {
	ID         int64      `json:"id" db:"id"`
	Mode       string     `json:"mode" db:"mode"`
	Status     string     `json:"status" db:"status"`
	Shard      string     `json:"shard" db:"shard"`
	StartedAt  time.Time  `json:"started_at" db:"started_at"`
	FinishedAt *time.Time `json:"finished_at" db:"finished_at"`
	WindowFrom *time.Time `json:"window_from" db:"window_from"`
	WindowTo   *time.Time `json:"window_to" db:"window_to"`
	DryRun     bool       `json:"dry_run" db:"dry_run"`
	Error      string     `json:"error" db:"error"`
	reconcile.CounterValues
}

// RunTotals adds up the counters of a period's runs.
type RunTotals struct {
	Runs     int64            `json:"runs"`
	ByStatus map[string]int64 `json:"by_status"`
	reconcile.CounterValues
}

// runCountersSQL selects the eight counters under the names sqlx gives the fields of an
// embedded reconcile.CounterValues (lower case, no underscores).
var runCountersSQL = func() string {
	cols := make([]string, len(reconcile.RunCounters))
	for i, rc := range reconcile.RunCounters {
		cols[i] = rc.Name + ` AS "` + strings.ReplaceAll(rc.Name, "_", "") + `"`
	}
	return strings.Join(cols, ", ")
}()

// Report builds the report of [from, to): the findings first or last seen in it, their
// summary, and the runs that started in it. All reads see one snapshot.
func (r *Review) Report(ctx context.Context, from, to time.Time) (Report, error) {
	if !from.Before(to) {
		return Report{}, fmt.Errorf("report: the period start %s is not before its end %s",
			from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	rep := Report{From: from, To: to, Summary: []SummaryRow{}, Findings: []Finding{}, Runs: []Run{},
		RunTotals: RunTotals{ByStatus: map[string]int64{}}, Statements: []StatementDayRow{}}

	// REPEATABLE READ: the summary, the findings and the runs agree even while a pass writes.
	tx, err := r.db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return Report{}, fmt.Errorf("report: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only

	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	period := periodSQL(from, to, arg)

	err = tx.SelectContext(ctx, &rep.Findings, `SELECT `+findingColumns+` FROM reconcile_mismatches
		WHERE `+period+` ORDER BY first_seen_at, id`, args...)
	if err != nil {
		return Report{}, fmt.Errorf("report: read findings: %w", err)
	}
	rep.Summary, rep.Totals = summarise(rep.Findings)

	err = tx.SelectContext(ctx, &rep.Runs, `SELECT id, mode, status, shard, started_at, finished_at,
		window_from, window_to, dry_run, COALESCE(error, '') AS error, `+runCountersSQL+`
		FROM reconcile_runs WHERE started_at >= $1 AND started_at < $2 ORDER BY started_at, id`, from, to)
	if err != nil {
		return Report{}, fmt.Errorf("report: read runs: %w", err)
	}
	first, end := periodDays(from, to)
	if rep.Statements, err = statementDays(ctx, tx, first, end); err != nil {
		return Report{}, fmt.Errorf("report: %w", err)
	}
	t := &rep.RunTotals
	for _, run := range rep.Runs {
		t.Runs++
		t.ByStatus[run.Status]++
		t.Add(run.CounterValues)
	}
	return rep, nil
}

// summarise groups the period's findings by kind and review status, in the domain's order,
// summing with the domain's money rule (Finding.AtStakeMinor): one rule, no copy in SQL.
func summarise(findings []Finding) ([]SummaryRow, SummaryRow) {
	type key struct {
		kind   reconcile.MismatchKind
		status reconcile.ReviewStatus
	}
	groups := map[key]*SummaryRow{}
	var total SummaryRow
	for _, f := range findings {
		k := key{f.Kind, f.ReviewStatus}
		g := groups[k]
		if g == nil {
			g = &SummaryRow{Kind: f.Kind, ReviewStatus: f.ReviewStatus}
			groups[k] = g
		}
		for _, row := range []*SummaryRow{g, &total} {
			row.Count++
			row.SeenCount += f.SeenCount
			row.LocalAmountMinor += orZero(f.LocalAmountMinor)
			row.PlatformAmountMinor += orZero(f.PlatformAmountMinor)
			row.AtStakeMinor += f.AtStakeMinor()
		}
	}
	out := []SummaryRow{}
	for _, kind := range reconcile.MismatchKinds {
		for _, st := range reconcile.ReviewStatuses {
			if g := groups[key{kind, st}]; g != nil {
				out = append(out, *g)
			}
		}
	}
	return out, total
}

func orZero(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
