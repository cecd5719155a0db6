package reconcile

import (
	"errors"
	"fmt"
	"sort"
	"time"
)

// MaxReportPeriodDays bounds the period of one report: a year, leap day included. A report
// of a longer period (a typo such as 0001-01-01 to 9999-12-31) would read every finding
// there is in one request; finance asks for several reports instead.
const MaxReportPeriodDays = 366

// Why CheckReportPeriod refuses a period (each wrapped in the InputError it returns).
var (
	ErrReportPeriodEmpty   = errors.New("the report period is empty or reversed")
	ErrReportPeriodTooLong = errors.New("the report period is longer than a report covers")
)

// CheckReportPeriod accepts the report period [from, to) when from is before to and to is
// at most MaxReportPeriodDays calendar days after from (in from's zone, so a daylight-saving
// change never makes a year an hour too long). Anything else is an InputError wrapping
// ErrReportPeriodEmpty or ErrReportPeriodTooLong.
func CheckReportPeriod(from, to time.Time) error {
	if !from.Before(to) {
		return &InputError{Err: ErrReportPeriodEmpty, Msg: fmt.Sprintf("report: the period start %s is not before its end %s",
			from.Format(time.RFC3339), to.Format(time.RFC3339))}
	}
	if to.After(from.AddDate(0, 0, MaxReportPeriodDays)) {
		return &InputError{Err: ErrReportPeriodTooLong, Msg: fmt.Sprintf(
			"report: the period %s to %s is longer than %d days, the most one report covers: ask for several shorter ones",
			from.Format(time.RFC3339), to.Format(time.RFC3339), MaxReportPeriodDays)}
	}
	return nil
}

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
	// Audit is the review moves recorded in the period (reconcile_mismatch_audit.created_at
	// in [From, To)), oldest first, streamed like Findings from the same snapshot; AuditCount
	// is how many there are. A report built without one has none.
	Audit      AuditSource `json:"-"`
	AuditCount int64       `json:"audit_count"`
}

// ReportAuditEntry is one review move as the report lists it: the audit row and the order
// number of its finding, so that a reader needs no second file to know which order it was.
type ReportAuditEntry struct {
	AuditEntry
	OutTradeNo string `json:"out_trade_no" db:"out_trade_no"`
}

// AuditSource is a report's review moves, read while the report is written instead of held.
type AuditSource interface {
	// Each calls fn with every move, oldest first (created_at, then id), and stops at the
	// first error, fn's or the read's, which it returns.
	Each(fn func(ReportAuditEntry) error) error
}

// AuditList is an AuditSource over moves already in memory, in their order.
type AuditList []ReportAuditEntry

// Each calls fn with each move in order.
func (l AuditList) Each(fn func(ReportAuditEntry) error) error {
	for _, a := range l {
		if err := fn(a); err != nil {
			return err
		}
	}
	return nil
}

// SummaryRow aggregates the findings of one kind and review status. Amounts are sums in
// minor units; AtStakeMinor sums Finding.AtStakeMinor (in the database, by atStakeSQL).
type SummaryRow struct {
	Kind                MismatchKind `json:"kind,omitempty" db:"kind"`
	ReviewStatus        ReviewStatus `json:"review_status,omitempty" db:"review_status"`
	Count               int64        `json:"count" db:"count"`
	SeenCount           int64        `json:"seen_count" db:"seen_count"`
	LocalAmountMinor    int64        `json:"local_amount_minor" db:"local_amount_minor"`
	PlatformAmountMinor int64        `json:"platform_amount_minor" db:"platform_amount_minor"`
	AtStakeMinor        int64        `json:"at_stake_minor" db:"at_stake_minor"`
}

// RunRow is one reconcile_runs row as the report shows it (Run is the run itself), with its counters.
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
	CounterValues
}

// RunTotals adds up the counters of a period's runs.
type RunTotals struct {
	Runs     int64            `json:"runs"`
	ByStatus map[string]int64 `json:"by_status"`
	CounterValues
}

// FindingSource is a report's findings, read while the report is written instead of held.
type FindingSource interface {
	// Each calls fn with every finding, oldest first (first seen, then id), and stops at the
	// first error, fn's or the read's, which it returns.
	Each(fn func(Finding) error) error
	// CountFirstSeen counts, by kind, the findings first seen in each [bounds[i],
	// bounds[i+1]) (bounds ascending): a chart's bars, without reading the findings.
	CountFirstSeen(bounds []time.Time) ([]map[MismatchKind]int, error)
}

// NewKindBuckets checks that bounds ascend and makes one empty bucket per pair.
func NewKindBuckets(bounds []time.Time) ([]map[MismatchKind]int, error) {
	for i := 1; i < len(bounds); i++ {
		if !bounds[i-1].Before(bounds[i]) {
			return nil, fmt.Errorf("report: count findings by day: bound %d (%s) is not before bound %d (%s)",
				i-1, bounds[i-1].Format(time.RFC3339Nano), i, bounds[i].Format(time.RFC3339Nano))
		}
	}
	return make([]map[MismatchKind]int, max(len(bounds)-1, 0)), nil
}

// AddKindCount adds n findings of kind to bucket i.
func AddKindCount(buckets []map[MismatchKind]int, i int, kind MismatchKind, n int) {
	if buckets[i] == nil {
		buckets[i] = map[MismatchKind]int{}
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
func (l FindingList) CountFirstSeen(bounds []time.Time) ([]map[MismatchKind]int, error) {
	out, err := NewKindBuckets(bounds)
	if err != nil || len(out) == 0 {
		return out, err
	}
	for _, f := range l {
		// The first bound after t ends t's bucket.
		i := sort.Search(len(bounds), func(i int) bool { return bounds[i].After(f.FirstSeenAt) })
		if i > 0 && i < len(bounds) {
			AddKindCount(out, i-1, f.Kind, 1)
		}
	}
	return out, nil
}
