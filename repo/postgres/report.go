package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

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
	// Findings are those first seen or last seen in the period, oldest first, read from the
	// report's snapshot as they are written: never all in memory (a year may hold hundreds of
	// thousands). Review.Report's are good only until the function given to it returns.
	Findings FindingSource `json:"-"`
	// Runs are the reconcile_runs that started in the period, oldest first; RunTotals adds
	// up their counters.
	Runs      []RunRow  `json:"runs"`
	RunTotals RunTotals `json:"run_totals"`
	// Statements are the settlement figures of the business days (starting in the period,
	// in the zone of From) whose bills were reconciled, by day and account.
	Statements []StatementDayRow `json:"statements"`
}

// SummaryRow aggregates the findings of one kind and review status. Amounts are sums in
// minor units; AtStakeMinor sums Finding.AtStakeMinor (in the database, by atStakeSQL).
type SummaryRow struct {
	Kind                reconcile.MismatchKind `json:"kind,omitempty" db:"kind"`
	ReviewStatus        reconcile.ReviewStatus `json:"review_status,omitempty" db:"review_status"`
	Count               int64                  `json:"count" db:"count"`
	SeenCount           int64                  `json:"seen_count" db:"seen_count"`
	LocalAmountMinor    int64                  `json:"local_amount_minor" db:"local_amount_minor"`
	PlatformAmountMinor int64                  `json:"platform_amount_minor" db:"platform_amount_minor"`
	AtStakeMinor        int64                  `json:"at_stake_minor" db:"at_stake_minor"`
}

// RunRow is one reconcile_runs row as the report shows it (reconcile.Run is the run itself), with its counters.
type RunRow struct {
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
// the statement days, and the findings themselves, streamed (Report.Findings). Everything fn
// reads comes from one read-only REPEATABLE READ snapshot, so the totals count exactly the
// findings listed even while a pass writes; the transaction lives until fn returns. A period
// longer than reconcile.MaxReportPeriodDays is a reconcile.InputError, whoever asks.
func (r *Review) Report(ctx context.Context, from, to time.Time, fn func(Report) error) error {
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
	return fn(rep)
}

// readReport reads all of the report but its findings: aggregates and the short lists.
func readReport(ctx context.Context, tx *sqlx.Tx, from, to time.Time) (Report, error) {
	rep := Report{From: from, To: to, Runs: []RunRow{}, RunTotals: RunTotals{ByStatus: map[string]int64{}}}
	var err error
	if rep.Summary, rep.Totals, err = summary(ctx, tx, from, to); err != nil {
		return Report{}, err
	}
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
func summary(ctx context.Context, tx *sqlx.Tx, from, to time.Time) ([]SummaryRow, SummaryRow, error) {
	where, args := periodArgs(from, to)
	n := len(args)
	rows := []SummaryRow{}
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
		return nil, SummaryRow{}, fmt.Errorf("report: summarise findings: %w", err)
	}
	var total SummaryRow
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

// FindingSource is a report's findings, read while the report is written instead of held.
type FindingSource interface {
	// Each calls fn with every finding, oldest first (first seen, then id), and stops at the
	// first error, fn's or the read's, which it returns.
	Each(fn func(Finding) error) error
	// CountFirstSeen counts, by kind, the findings first seen in each [bounds[i],
	// bounds[i+1]) (bounds ascending): a chart's bars, without reading the findings.
	CountFirstSeen(bounds []time.Time) ([]map[reconcile.MismatchKind]int, error)
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
func (c *cursorFindings) Each(fn func(Finding) error) error {
	c.cursors++
	cursor := fmt.Sprintf("report_findings_%d", c.cursors)
	where, args := periodArgs(c.from, c.to)
	_, err := c.tx.ExecContext(c.ctx, `DECLARE `+cursor+` NO SCROLL CURSOR FOR SELECT `+findingColumns+`
		FROM reconcile_mismatches WHERE `+where+` ORDER BY first_seen_at, id`, args...)
	if err != nil {
		return fmt.Errorf("report: open the findings cursor: %w", err)
	}
	fetch := fmt.Sprintf("FETCH FORWARD %d FROM %s", reportPageSize, cursor)
	page := make([]Finding, 0, reportPageSize)
	for read := 0; ; read += len(page) {
		page = page[:0]
		if err := c.tx.SelectContext(c.ctx, &page, fetch); err != nil {
			return fmt.Errorf("report: read findings after the first %d: %w", read, err)
		}
		for _, f := range page {
			if err := fn(f); err != nil {
				return err
			}
		}
		if len(page) < reportPageSize {
			break
		}
	}
	if _, err := c.tx.ExecContext(c.ctx, "CLOSE "+cursor); err != nil {
		return fmt.Errorf("report: close the findings cursor: %w", err)
	}
	return nil
}

// CountFirstSeen counts in the database: width_bucket numbers each finding's bucket by the
// lower bounds, and only the period's findings inside the bounds count.
func (c *cursorFindings) CountFirstSeen(bounds []time.Time) ([]map[reconcile.MismatchKind]int, error) {
	out, err := newBuckets(bounds)
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
		add(out, r.Bucket-1, r.Kind, r.Count)
	}
	return out, nil
}

// newBuckets checks that bounds ascend and makes one empty bucket per pair.
func newBuckets(bounds []time.Time) ([]map[reconcile.MismatchKind]int, error) {
	for i := 1; i < len(bounds); i++ {
		if !bounds[i-1].Before(bounds[i]) {
			return nil, fmt.Errorf("report: count findings by day: bound %d (%s) is not before bound %d (%s)",
				i-1, bounds[i-1].Format(time.RFC3339Nano), i, bounds[i].Format(time.RFC3339Nano))
		}
	}
	return make([]map[reconcile.MismatchKind]int, max(len(bounds)-1, 0)), nil
}

func add(buckets []map[reconcile.MismatchKind]int, i int, kind reconcile.MismatchKind, n int) {
	if buckets[i] == nil {
		buckets[i] = map[reconcile.MismatchKind]int{}
	}
	buckets[i][kind] += n
}

// FindingList is a FindingSource over findings already in memory, in their order: for tests
// and for callers that build a report without a database.
type FindingList []Finding

// Each calls fn with each finding in order.
func (l FindingList) Each(fn func(Finding) error) error {
	for _, f := range l {
		if err := fn(f); err != nil {
			return err
		}
	}
	return nil
}

// CountFirstSeen counts as the database does: a finding first seen at t is in the bucket
// [bounds[i], bounds[i+1]) that holds t, if any.
func (l FindingList) CountFirstSeen(bounds []time.Time) ([]map[reconcile.MismatchKind]int, error) {
	out, err := newBuckets(bounds)
	if err != nil || len(out) == 0 {
		return out, err
	}
	for _, f := range l {
		// The first bound after t ends t's bucket.
		i := sort.Search(len(bounds), func(i int) bool { return bounds[i].After(f.FirstSeenAt) })
		if i > 0 && i < len(bounds) {
			add(out, i-1, f.Kind, 1)
		}
	}
	return out, nil
}
