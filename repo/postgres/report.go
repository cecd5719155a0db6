package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payrecon/payrecon/reconcile"
)

// runCountersSQL selects the run counters under the names sqlx gives the fields of an
// embedded reconcile.CounterValues (lower case, no underscores).
var runCountersSQL = func() string {
	cols := make([]string, len(reconcile.RunCounters))
	for i, rc := range reconcile.RunCounters {
		cols[i] = rc.Name + ` AS "` + strings.ReplaceAll(rc.Name, "_", "") + `"`
	}
	return strings.Join(cols, ", ")
}()

// reportPageSize is how many findings one FETCH reads: the most findings a report holds at
// once. A variable so that a test can make the pages small.
var reportPageSize = 1000

// Report reads the report of [from, to) and hands it to fn: the summary of the findings
// first or last seen in the period by kind and review status, the runs that started in it,
// the statement days, and, streamed, the findings themselves (Report.Findings) and the
// review moves recorded in the period (Report.Audit). Everything fn reads comes from one
// read-only REPEATABLE READ snapshot, so the totals count exactly the findings and moves
// listed even while a pass or a reviewer writes; the transaction lives until fn returns. A
// period longer than reconcile.MaxReportPeriodDays is a reconcile.InputError, whoever asks.
func (r *Review) Report(ctx context.Context, from, to time.Time, fn func(reconcile.Report) error) error {
	if err := reconcile.CheckReportPeriod(from, to); err != nil {
		return err
	}
	tx, err := r.db.BeginTxx(ctx, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true})
	if err != nil {
		return fmt.Errorf("report: begin: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // read-only
	rep, err := readReport(ctx, tx, from, to)
	if err != nil {
		return err
	}
	rep.Findings = &cursorFindings{ctx: ctx, tx: tx, from: from, to: to}
	rep.Audit = &cursorAudit{ctx: ctx, tx: tx, from: from, to: to}
	return fn(rep)
}

// readReport reads all of the report but its findings: aggregates and the short lists.
func readReport(ctx context.Context, tx *sqlx.Tx, from, to time.Time) (reconcile.Report, error) {
	rep := reconcile.Report{From: from, To: to, Runs: []reconcile.RunRow{}, RunTotals: reconcile.RunTotals{ByStatus: map[string]int64{}}}
	var err error
	if rep.Summary, rep.Totals, err = summary(ctx, tx, from, to); err != nil {
		return reconcile.Report{}, err
	}
	err = tx.SelectContext(ctx, &rep.Runs, `SELECT id, mode, status, shard, started_at, finished_at,
		window_from, window_to, dry_run, COALESCE(error, '') AS error, `+runCountersSQL+`
		FROM reconcile_runs WHERE started_at >= $1 AND started_at < $2 ORDER BY started_at, id`, from, to)
	if err != nil {
		return reconcile.Report{}, fmt.Errorf("report: read runs: %w", err)
	}
	first, end := periodDays(from, to)
	if rep.Statements, err = statementDays(ctx, tx, first, end); err != nil {
		return reconcile.Report{}, fmt.Errorf("report: %w", err)
	}
	err = tx.GetContext(ctx, &rep.AuditCount, `SELECT count(*) FROM reconcile_mismatch_audit
		WHERE created_at >= $1 AND created_at < $2`, from, to)
	if err != nil {
		return reconcile.Report{}, fmt.Errorf("report: count review moves: %w", err)
	}
	t := &rep.RunTotals
	for _, run := range rep.Runs {
		t.Runs++
		t.ByStatus[run.Status]++
		t.Add(run.CounterValues)
	}
	return rep, nil
}

// periodArgs is periodSQL for [from, to) with its arguments numbered from $1.
func periodArgs(from, to time.Time) (string, []any) {
	var args []any
	where := periodSQL(from, to, func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	})
	return where, args
}

// summary groups the period's findings by kind and review status in the database, in the
// domain's order (kind, then workflow), so that no finding has to come to the process to be
// counted. The money at stake is atStakeSQL, the SQL copy of reconcile.AtStakeMinor that
// TestReportAggregates and TestSearchAtStakeMatchesTheDomain hold equal to the domain's.
// The totals add up the groups.
func summary(ctx context.Context, tx *sqlx.Tx, from, to time.Time) ([]reconcile.SummaryRow, reconcile.SummaryRow, error) {
	where, args := periodArgs(from, to)
	n := len(args)
	rows := []reconcile.SummaryRow{}
	err := tx.SelectContext(ctx, &rows, `SELECT kind, review_status, count(*) AS count,
		COALESCE(sum(seen_count), 0)::bigint AS seen_count,
		COALESCE(sum(local_amount_minor), 0)::bigint AS local_amount_minor,
		COALESCE(sum(platform_amount_minor), 0)::bigint AS platform_amount_minor,
		COALESCE(sum(`+atStakeSQL+`), 0)::bigint AS at_stake_minor
		FROM reconcile_mismatches WHERE `+where+` GROUP BY kind, review_status
		ORDER BY array_position($`+strconv.Itoa(n+1)+`::text[], kind), kind,
			array_position($`+strconv.Itoa(n+2)+`::text[], review_status), review_status`,
		append(args, pq.Array(kindOrder()), pq.Array(statusOrder()))...)
	if err != nil {
		return nil, reconcile.SummaryRow{}, fmt.Errorf("report: summarise findings: %w", err)
	}
	var total reconcile.SummaryRow
	for _, g := range rows {
		total.Count += g.Count
		total.SeenCount += g.SeenCount
		total.LocalAmountMinor += g.LocalAmountMinor
		total.PlatformAmountMinor += g.PlatformAmountMinor
		total.AtStakeMinor += g.AtStakeMinor
	}
	return rows, total, nil
}

// statusOrder is the domain's order of review statuses, as the summary lists them.
func statusOrder() []string {
	out := make([]string, len(reconcile.ReviewStatuses))
	for i, s := range reconcile.ReviewStatuses {
		out[i] = string(s)
	}
	return out
}

// cursorFindings is Review.Report's FindingSource: it reads in the report's transaction.
type cursorFindings struct {
	ctx      context.Context
	tx       *sqlx.Tx
	from, to time.Time
	cursors  int // declared so far: each Each gets a cursor of its own
}

// Each reads the findings through a server-side cursor, reportPageSize at a time: the
// database sorts them once, and the process never holds more than a page.
func (c *cursorFindings) Each(fn func(reconcile.Finding) error) error {
	c.cursors++
	where, args := periodArgs(c.from, c.to)
	return eachThroughCursor(c.ctx, c.tx, fmt.Sprintf("report_findings_%d", c.cursors), "findings",
		`SELECT `+findingColumns+` FROM reconcile_mismatches WHERE `+where+` ORDER BY first_seen_at, id`, args, fn)
}

// eachThroughCursor declares cursor (named for what, in errors) over query in tx and calls
// fn with each row, read reportPageSize at a time, so that the process never holds more
// than a page of a long list; it stops at fn's first error.
func eachThroughCursor[T any](ctx context.Context, tx *sqlx.Tx, cursor, what, query string, args []any, fn func(T) error) error {
	if _, err := tx.ExecContext(ctx, `DECLARE `+cursor+` NO SCROLL CURSOR FOR `+query, args...); err != nil {
		return fmt.Errorf("report: open the %s cursor: %w", what, err)
	}
	fetch := fmt.Sprintf("FETCH FORWARD %d FROM %s", reportPageSize, cursor)
	page := make([]T, 0, reportPageSize)
	for read := 0; ; read += len(page) {
		page = page[:0]
		if err := tx.SelectContext(ctx, &page, fetch); err != nil {
			return fmt.Errorf("report: read %s after the first %d: %w", what, read, err)
		}
		for _, row := range page {
			if err := fn(row); err != nil {
				return err
			}
		}
		if len(page) < reportPageSize {
			break
		}
	}
	if _, err := tx.ExecContext(ctx, "CLOSE "+cursor); err != nil {
		return fmt.Errorf("report: close the %s cursor: %w", what, err)
	}
	return nil
}

// CountFirstSeen counts in the database: width_bucket numbers each finding's bucket by the
// lower bounds, and only the period's findings inside the bounds count.
func (c *cursorFindings) CountFirstSeen(bounds []time.Time) ([]map[reconcile.MismatchKind]int, error) {
	out, err := reconcile.NewKindBuckets(bounds)
	if err != nil || len(out) == 0 {
		return out, err
	}
	lower := make([]string, len(out))
	for i, b := range bounds[:len(out)] {
		lower[i] = b.UTC().Format(time.RFC3339Nano)
	}
	var rows []struct {
		Bucket int                    `db:"bucket"`
		Kind   reconcile.MismatchKind `db:"kind"`
		Count  int                    `db:"count"`
	}
	err = c.tx.SelectContext(c.ctx, &rows, `SELECT width_bucket(first_seen_at, $1::timestamptz[]) AS bucket, kind, count(*) AS count
		FROM reconcile_mismatches WHERE first_seen_at >= $2 AND first_seen_at < $3 AND first_seen_at >= $4 AND first_seen_at < $5
		GROUP BY 1, 2`, pq.Array(lower), c.from, c.to, bounds[0], bounds[len(bounds)-1])
	if err != nil {
		return nil, fmt.Errorf("report: count findings by day: %w", err)
	}
	for _, r := range rows {
		reconcile.AddKindCount(out, r.Bucket-1, r.Kind, r.Count)
	}
	return out, nil
}

// cursorAudit is Review.Report's AuditSource: the review moves of the period, read in the
// report's transaction.
type cursorAudit struct {
	ctx      context.Context
	tx       *sqlx.Tx
	from, to time.Time
	cursors  int // declared so far: each Each gets a cursor of its own
}

// reportAuditColumns selects a reconcile.ReportAuditEntry from the audit row a and its
// finding m.
const reportAuditColumns = `a.id, a.mismatch_id, a.action, a.actor, COALESCE(a.os_user, '') AS os_user,
	COALESCE(a.db_user, '') AS db_user, COALESCE(a.from_status, '') AS from_status, COALESCE(a.to_status, '') AS to_status,
	COALESCE(a.resolution, '') AS resolution, a.evidence_version, COALESCE(a.note, '') AS note, a.created_at,
	COALESCE(m.out_trade_no, '') AS out_trade_no`

// Each reads the period's moves through a server-side cursor, as the findings are read: a
// month's closing can hold a move for each of 100,000 findings.
func (c *cursorAudit) Each(fn func(reconcile.ReportAuditEntry) error) error {
	c.cursors++
	return eachThroughCursor(c.ctx, c.tx, fmt.Sprintf("report_audit_%d", c.cursors), "review moves",
		`SELECT `+reportAuditColumns+` FROM reconcile_mismatch_audit a LEFT JOIN reconcile_mismatches m ON m.id = a.mismatch_id
		WHERE a.created_at >= $1 AND a.created_at < $2 ORDER BY a.created_at, a.id`, []any{c.from, c.to}, fn)
}
