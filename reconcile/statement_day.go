package reconcile

import "time"

// StatementFigures are what finance signs off for one account's day (statement_days).
type StatementFigures struct {
	Payments      int
	PaymentsMinor int64
	Refunds       int
	RefundsMinor  int64
	ReceivedMinor int64 // received for payments minus given back for refunds
	FeeMilliFen   int64
	NetMilliFen   int64 // received, less the fees
	Lines         int
	Matched       int
	Repaired      int
	Found         int
	Held          int
	// RefundsRepaired is how many refund lines moved a local refund to SUCCESS (also in
	// Repaired); RefundsUnknown how many named a refund number we do not have (UNKNOWN_REFUND,
	// also in Found).
	RefundsRepaired int
	RefundsUnknown  int
	BillSHA256      string
	BillLocation    string
}

// StatementDayRow is one saved day, for reports and tests.
type StatementDayRow struct {
	Platform      string `db:"platform" json:"platform"`
	MerchantID    string `db:"merchant_id" json:"merchant_id"`
	BillDate      string `db:"bill_date" json:"bill_date"` // YYYY-MM-DD
	Payments      int    `db:"payments" json:"payments"`
	PaymentsMinor int64  `db:"payments_minor" json:"payments_minor"`
	Refunds       int    `db:"refunds" json:"refunds"`
	RefundsMinor  int64  `db:"refunds_minor" json:"refunds_minor"`
	ReceivedMinor int64  `db:"received_minor" json:"received_minor"`
	FeeMilliFen   int64  `db:"fees_milli_fen" json:"fees_milli_fen"`
	NetMilliFen   int64  `db:"net_milli_fen" json:"net_milli_fen"`
	Lines         int    `db:"lines" json:"lines"`
	Matched       int    `db:"lines_matched" json:"lines_matched"`
	Repaired      int    `db:"lines_repaired" json:"lines_repaired"`
	Found         int    `db:"lines_found" json:"lines_found"`
	Held          int    `db:"held" json:"held"`
	// RefundsRepaired and RefundsUnknown are StatementFigures'.
	RefundsRepaired int       `db:"refunds_repaired" json:"refunds_repaired"`
	RefundsUnknown  int       `db:"refunds_unknown" json:"refunds_unknown"`
	BillSHA256      string    `db:"bill_sha256" json:"bill_sha256"`
	BillLocation    string    `db:"bill_location" json:"bill_location"`
	ReconciledAt    time.Time `db:"reconciled_at" json:"reconciled_at"`
}
