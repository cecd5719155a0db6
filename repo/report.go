package repo

import (
	"context"
	"database/sql"
	"fmt"
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

// Run is one reconcile_runs row with its counters.
type Run struct {
	ID               int64      `json:"id" db:"id"`
	Mode             string     `json:"mode" db:"mode"`
	Status           string     `json:"status" db:"status"`
	Shard            string     `json:"shard" db:"shard"`
	StartedAt        time.Time  `json:"started_at" db:"started_at"`
	FinishedAt       *time.Time `json:"finished_at" db:"finished_at"`
	WindowFrom       *time.Time `json:"window_from" db:"window_from"`
	WindowTo         *time.Time `json:"window_to" db:"window_to"`
	DryRun           bool       `json:"dry_run" db:"dry_run"`
	Error            string     `json:"error" db:"error"`
	Scanned          int64      `json:"scanned" db:"scanned"`
	Repaired         int64      `json:"repaired" db:"repaired"`
	Closed           int64      `json:"closed" db:"closed"`
	Unchanged        int64      `json:"unchanged" db:"unchanged"`
	StillPending     int64      `json:"still_pending" db:"still_pending"`
	Mismatches       int64      `json:"mismatches" db:"mismatches"`
	ClaimedElsewhere int64      `json:"claimed_elsewhere" db:"claimed_elsewhere"`
	Errors           int64      `json:"errors" db:"errors"`
}

// RunTotals adds up the counters of a period's runs.
type RunTotals struct {
	Runs             int64            `json:"runs"`
	ByStatus         map[string]int64 `json:"by_status"`
	Scanned          int64            `json:"scanned"`
	Repaired         int64            `json:"repaired"`
	Closed           int64            `json:"closed"`
	Unchanged        int64            `json:"unchanged"`
	StillPending     int64            `json:"still_pending"`
	Mismatches       int64            `json:"mismatches"`
	ClaimedElsewhere int64            `json:"claimed_elsewhere"`
	Errors           int64            `json:"errors"`
}

// atStakeSQL is Finding.AtStakeMinor in SQL, for the summary's sums.
const atStakeSQL = `CASE kind
	WHEN 'AMOUNT_MISMATCH' THEN abs(COALESCE(platform_amount_minor, 0) - COALESCE(local_amount_minor, 0))
	WHEN 'LOCAL_PAID_PLATFORM_UNPAID' THEN COALESCE(local_amount_minor, 0)
	ELSE COALESCE(platform_amount_minor, local_amount_minor, 0) END`

// summaryOrder sorts the summary in the order the domain lists them.
const summaryOrder = `array_position(ARRAY['AMOUNT_MISMATCH', 'CURRENCY_MISMATCH', 'MERCHANT_MISMATCH',
	'UNKNOWN_ORDER', 'PAID_AFTER_CLOSE', 'DUPLICATE_PAYMENT', 'LOCAL_PAID_PLATFORM_UNPAID',
	'REFUNDED_AT_PLATFORM']::text[], kind), kind,
	array_position(ARRAY['OPEN', 'ACKNOWLEDGED', 'RESOLVED']::text[], review_status)`

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

	err = tx.SelectContext(ctx, &rep.Summary, `SELECT kind, review_status, count(*) AS count,
		COALESCE(sum(seen_count), 0)::bigint AS seen_count,
		COALESCE(sum(local_amount_minor), 0)::bigint AS local_amount_minor,
		COALESCE(sum(platform_amount_minor), 0)::bigint AS platform_amount_minor,
		COALESCE(sum(`+atStakeSQL+`), 0)::bigint AS at_stake_minor
		FROM reconcile_mismatches WHERE `+period+`
		GROUP BY kind, review_status ORDER BY `+summaryOrder, args...)
	if err != nil {
		return Report{}, fmt.Errorf("report: summarise findings: %w", err)
	}
	for _, s := range rep.Summary {
		rep.Totals.Count += s.Count
		rep.Totals.SeenCount += s.SeenCount
		rep.Totals.LocalAmountMinor += s.LocalAmountMinor
		rep.Totals.PlatformAmountMinor += s.PlatformAmountMinor
		rep.Totals.AtStakeMinor += s.AtStakeMinor
	}

	err = tx.SelectContext(ctx, &rep.Findings, `SELECT `+findingColumns+` FROM reconcile_mismatches
		WHERE `+period+` ORDER BY first_seen_at, id`, args...)
	if err != nil {
		return Report{}, fmt.Errorf("report: read findings: %w", err)
	}

	err = tx.SelectContext(ctx, &rep.Runs, `SELECT id, mode, status, shard, started_at, finished_at,
		window_from, window_to, dry_run, COALESCE(error, '') AS error, scanned, repaired, closed, unchanged,
		still_pending, mismatches, claimed_elsewhere, errors
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
		t.Scanned += run.Scanned
		t.Repaired += run.Repaired
		t.Closed += run.Closed
		t.Unchanged += run.Unchanged
		t.StillPending += run.StillPending
		t.Mismatches += run.Mismatches
		t.ClaimedElsewhere += run.ClaimedElsewhere
		t.Errors += run.Errors
	}
	return rep, nil
}
