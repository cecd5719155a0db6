package reconcile

import "time"

// A bill line walks one way, with one type per stage: the bill's reader yields a
// statement.Line, staging streams it into the database, the classification (one SQL
// statement, the one matching rule set-based) returns the lines that are more than a plain
// match as ClassifiedLines, the apply path takes each, and what it made of them comes back as
// LineOutcomes that the day records.

// BillLineKind says whether a bill line records money coming in or going back.
type BillLineKind string

const (
	BillPayment BillLineKind = "payment"
	BillRefund  BillLineKind = "refund"
)

// LineResult is what became of one bill line, as statement_lines.outcome records it (the
// migration's CHECK lists the same words).
type LineResult string

const (
	// LineRepaired: the apply path moved the line's order (or refund) to what the bill says.
	LineRepaired LineResult = "repaired"
	// LineMismatch: the line disagrees with our books; a finding was recorded.
	LineMismatch LineResult = "mismatch"
	// LineUnchanged: our books already said what the line says.
	LineUnchanged LineResult = "unchanged"
	// LineOtherDay: a plain match whose payment (refund) our books date on another day;
	// remembered so that day's held list leaves it out.
	LineOtherDay LineResult = "other_day"
)

// LineResults lists the line results in the order reports show them.
var LineResults = []LineResult{LineRepaired, LineMismatch, LineUnchanged, LineOtherDay}

// StatementDay is one account's business day, the day its bill covers.
type StatementDay struct {
	Account AccountKey
	BusinessDay
}

// StagedBill is what staging read: the line count and what the merchant actually received
// net of refunds. The bill's own totals are its reader's.
type StagedBill struct {
	Lines         int
	ReceivedMinor int64 // payments received minus refunds given back
}

// ClassifiedLine is a staged line that is more than a plain match: one for the apply path,
// or one an earlier run of the same day already settled (Prior set: apply nothing again).
type ClassifiedLine struct {
	No               int
	Kind             BillLineKind
	OutTradeNo       string
	PlatformTradeNo  string
	RefundNo         string // refund lines: the merchant's refund number (out_refund_no)
	PlatformRefundNo string // refund lines: the platform's refund number, where the bill has one
	RefundStatus     string // refund lines: the refund's state as the bill writes it, "" where it does not
	Currency         string
	AmountMinor      int64
	At               time.Time
	// OrderStatus is the state of the line's order when the classification began, "" when
	// there is none.
	OrderStatus   Status
	Prior         LineResult   // what an earlier run of the day made of the line, "" when new
	PriorMismatch MismatchKind // the finding that earlier run recorded, if any
}

// LineBooks is what our books hold for the lines the apply path is about to take: the
// orders they name, by out_trade_no, and the refunds they name, by out_refund_no. The apply
// path takes them as its copies (ApplyOptions), so that a day's lines cost two statements
// instead of a lookup or two each; the conditional statements still decide.
type LineBooks struct {
	Orders  map[string]Order
	Refunds map[string]Refund
}

// LineOutcome is what the apply path made of one line, remembered so that a re-run of the
// day neither applies it again nor adds a sighting.
type LineOutcome struct {
	Line     ClassifiedLine
	OrderID  int64
	Result   LineResult // repaired, mismatch or unchanged
	Mismatch MismatchKind
}

// HeldEntry is an order, or a refund, that the previous day's bill did not list and this
// day's does not either.
type HeldEntry struct {
	OrderID     int64  `db:"order_id"`
	OutTradeNo  string `db:"out_trade_no"`
	RefundID    int64  `db:"refund_id"`     // 0: the order itself is held
	OutRefundNo string `db:"out_refund_no"` // a held refund's number
	Currency    string `db:"currency"`      // a held refund's currency
}

// IsRefund says whether a refund, not its order, is held.
func (h HeldEntry) IsRefund() bool { return h.RefundID != 0 }

// RecordedLine is a bill line a statement run remembered (statement_lines): what it said and
// what became of it. Plain matches of the line's own day are not remembered: they never left
// the database, and the day's figures count them.
type RecordedLine struct {
	Platform        Platform     `db:"platform"`
	MerchantID      string       `db:"merchant_id"`
	BillDate        string       `db:"bill_date"`
	No              int          `db:"line_no"`
	Kind            BillLineKind `db:"kind"`
	OutTradeNo      string       `db:"out_trade_no"`
	PlatformTradeNo string       `db:"platform_trade_no"`
	RefundNo        string       `db:"refund_no"`
	AmountMinor     int64        `db:"amount_minor"`
	OrderID         *int64       `db:"order_id"`
	Result          LineResult   `db:"outcome"`
	MismatchKind    MismatchKind `db:"mismatch_kind"`
	MismatchID      *int64       `db:"mismatch_id"`
}
