package reconcile

import (
	"fmt"
	"strconv"
	"time"
)

// StatementFigures are what finance signs off for one account's day (a statement_days row
// but its key): the bill's totals, what its lines came to, and the bill itself. The figures
// are listed once, in StatementFigureTable; the database, the reports, the console and the
// command's summary all read them from there.
type StatementFigures struct {
	Payments      int64 `db:"payments" json:"payments"`
	PaymentsMinor int64 `db:"payments_minor" json:"payments_minor"`
	Refunds       int64 `db:"refunds" json:"refunds"`
	RefundsMinor  int64 `db:"refunds_minor" json:"refunds_minor"`
	ReceivedMinor int64 `db:"received_minor" json:"received_minor"` // received for payments minus given back for refunds
	FeeMilliFen   int64 `db:"fees_milli_fen" json:"fees_milli_fen"`
	NetMilliFen   int64 `db:"net_milli_fen" json:"net_milli_fen"` // received, less the fees
	Lines         int64 `db:"lines" json:"lines"`
	Matched       int64 `db:"lines_matched" json:"lines_matched"`
	Repaired      int64 `db:"lines_repaired" json:"lines_repaired"`
	Found         int64 `db:"lines_found" json:"lines_found"`
	Held          int64 `db:"held" json:"held"`
	// RefundsRepaired is how many refund lines moved a local refund to SUCCESS (also in
	// Repaired); RefundsUnknown how many named a refund number we do not have (UNKNOWN_REFUND,
	// also in Found).
	RefundsRepaired int64  `db:"refunds_repaired" json:"refunds_repaired"`
	RefundsUnknown  int64  `db:"refunds_unknown" json:"refunds_unknown"`
	BillSHA256      string `db:"bill_sha256" json:"bill_sha256"`
	BillLocation    string `db:"bill_location" json:"bill_location"`
}

// StatementDayRow is one saved day: the account, the business day and its figures.
type StatementDayRow struct {
	Platform   string `db:"platform" json:"platform"`
	MerchantID string `db:"merchant_id" json:"merchant_id"`
	BillDate   string `db:"bill_date" json:"bill_date"` // YYYY-MM-DD
	StatementFigures
	ReconciledAt time.Time `db:"reconciled_at" json:"reconciled_at"`
}

// FigureUnit is how a statement figure is read: a count, or money in fen or in thousandths
// of a fen (the platforms' fees and what is left after them).
type FigureUnit int

const (
	FigureCount FigureUnit = iota
	FigureFen
	FigureMilliFen
)

// StatementFigure is one of a day's figures: its statement_days column, the key reports and
// the console head its column with (a label key), its unit, and where it sits in
// StatementFigures.
type StatementFigure struct {
	Column string
	Key    string
	Unit   FigureUnit
	value  func(*StatementFigures) *int64
}

// Value reads the figure from f.
func (sf StatementFigure) Value(f StatementFigures) int64 { return *sf.value(&f) }

// Format writes the figure of f by its unit: a count as a number, money as yuan (fees and
// net to five decimals), without a currency sign.
func (sf StatementFigure) Format(f StatementFigures) string {
	v := sf.Value(f)
	switch sf.Unit {
	case FigureFen:
		return FormatYuan(v)
	case FigureMilliFen:
		return FormatYuanMilliFen(v)
	}
	return strconv.FormatInt(v, 10)
}

// StatementFigureTable is the day's figures in statement_days column order: the one list
// the day's save and read, the report's statements section, the console's statements page
// and the command's summary name them from.
var StatementFigureTable = []StatementFigure{
	{"payments", "payments", FigureCount, func(f *StatementFigures) *int64 { return &f.Payments }},
	{"payments_minor", "payments_amount", FigureFen, func(f *StatementFigures) *int64 { return &f.PaymentsMinor }},
	{"refunds", "refunds", FigureCount, func(f *StatementFigures) *int64 { return &f.Refunds }},
	{"refunds_minor", "refunds_amount", FigureFen, func(f *StatementFigures) *int64 { return &f.RefundsMinor }},
	{"received_minor", "received", FigureFen, func(f *StatementFigures) *int64 { return &f.ReceivedMinor }},
	{"fees_milli_fen", "fees", FigureMilliFen, func(f *StatementFigures) *int64 { return &f.FeeMilliFen }},
	{"net_milli_fen", "net", FigureMilliFen, func(f *StatementFigures) *int64 { return &f.NetMilliFen }},
	{"lines", "lines", FigureCount, func(f *StatementFigures) *int64 { return &f.Lines }},
	{"lines_matched", "matched", FigureCount, func(f *StatementFigures) *int64 { return &f.Matched }},
	{"lines_repaired", "repaired", FigureCount, func(f *StatementFigures) *int64 { return &f.Repaired }},
	{"lines_found", "found", FigureCount, func(f *StatementFigures) *int64 { return &f.Found }},
	{"held", "held", FigureCount, func(f *StatementFigures) *int64 { return &f.Held }},
	{"refunds_repaired", "refunds_repaired", FigureCount, func(f *StatementFigures) *int64 { return &f.RefundsRepaired }},
	{"refunds_unknown", "refunds_unknown", FigureCount, func(f *StatementFigures) *int64 { return &f.RefundsUnknown }},
}

// Add adds g's figures to f's (the bill's digest and location are not figures: f keeps its
// own): the total of several days.
func (f *StatementFigures) Add(g StatementFigures) {
	for _, sf := range StatementFigureTable {
		*sf.value(f) += sf.Value(g)
	}
}

// BusinessDay is one business day: midnight to midnight in the platforms' zone, the day a
// bill covers.
type BusinessDay struct {
	Date       string // YYYY-MM-DD
	Start, End time.Time
}

// ParseBusinessDay reads a YYYY-MM-DD date as the day it names in loc.
func ParseBusinessDay(s string, loc *time.Location) (BusinessDay, error) {
	t, err := time.ParseInLocation(time.DateOnly, s, loc)
	if err != nil {
		return BusinessDay{}, fmt.Errorf("want a date such as 2026-11-28, got %q", s)
	}
	return businessDayOf(t, loc), nil
}

// PreviousBusinessDay is the day before now's in loc: the newest bill the platforms publish.
func PreviousBusinessDay(now time.Time, loc *time.Location) BusinessDay {
	n := now.In(loc)
	return businessDayOf(time.Date(n.Year(), n.Month(), n.Day()-1, 0, 0, 0, 0, loc), loc)
}

func businessDayOf(t time.Time, loc *time.Location) BusinessDay {
	start := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
	// AddDate, not 24h: a day in a zone with daylight saving may be 23 or 25 hours long.
	return BusinessDay{Date: start.Format(time.DateOnly), Start: start, End: start.AddDate(0, 0, 1)}
}

// Prev is the day before.
func (d BusinessDay) Prev() BusinessDay {
	return businessDayOf(d.Start.AddDate(0, 0, -1), d.Start.Location())
}
