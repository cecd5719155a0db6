package reconcile

import (
	"encoding/json"
	"time"
)

// Finding is one reconcile_mismatches row. Nullable amounts and times are pointers (nil:
// NULL); nullable text is "" when NULL.
type Finding struct {
	ID                  int64           `json:"id" db:"id"`
	OrderID             *int64          `json:"order_id" db:"order_id"`
	Platform            Platform        `json:"platform" db:"platform"`
	MerchantID          string          `json:"merchant_id" db:"merchant_id"`
	OutTradeNo          string          `json:"out_trade_no" db:"out_trade_no"`
	PlatformTradeNo     string          `json:"platform_trade_no" db:"platform_trade_no"`
	OutRefundNo         string          `json:"out_refund_no" db:"out_refund_no"` // the refund a refund finding is about; "" for a payment's
	Kind                MismatchKind    `json:"kind" db:"kind"`
	LocalAmountMinor    *int64          `json:"local_amount_minor" db:"local_amount_minor"`
	PlatformAmountMinor *int64          `json:"platform_amount_minor" db:"platform_amount_minor"`
	LocalStatus         string          `json:"local_status" db:"local_status"`
	PlatformStatus      string          `json:"platform_status" db:"platform_status"`
	Detail              json.RawMessage `json:"detail" db:"detail"`
	FirstSeenAt         time.Time       `json:"first_seen_at" db:"first_seen_at"`
	LastSeenAt          time.Time       `json:"last_seen_at" db:"last_seen_at"`
	SeenCount           int64           `json:"seen_count" db:"seen_count"`
	ReviewStatus        ReviewStatus    `json:"review_status" db:"review_status"`
	Resolution          string          `json:"resolution" db:"resolution"`
	Note                string          `json:"note" db:"note"`
	ResolvedBy          string          `json:"resolved_by" db:"resolved_by"`
	ResolvedAt          *time.Time      `json:"resolved_at" db:"resolved_at"`
	// EvidenceVersion is bumped by the database when a sighting brings different figures;
	// a review move names the version it saw.
	EvidenceVersion int64 `json:"evidence_version" db:"evidence_version"`
	// A money-moving resolution: ResolvedBy is its maker (ProposedBy), ApprovedBy its checker.
	ProposedBy      string     `json:"proposed_by" db:"proposed_by"`
	ProposedAt      *time.Time `json:"proposed_at" db:"proposed_at"`
	ProposedVersion *int64     `json:"proposed_version" db:"proposed_version"`
	ApprovedBy      string     `json:"approved_by" db:"approved_by"`
}

// AtStakeMinor is the money the finding puts in question (AtStakeMinor); the
// report sums it in Go with the same rule.
func (f Finding) AtStakeMinor() int64 {
	return AtStakeMinor(f.Kind, f.LocalAmountMinor, f.PlatformAmountMinor)
}

// AuditEntry is one reconcile_mismatch_audit row. The table is append-only and its times
// come from the database clock (migration 0008).
type AuditEntry struct {
	ID         int64  `json:"id" db:"id"`
	MismatchID int64  `json:"mismatch_id" db:"mismatch_id"`
	Action     string `json:"action" db:"action"` // Audit*
	Actor      string `json:"actor" db:"actor"`
	OSUser     string `json:"os_user" db:"os_user"`
	// DBUser is the database login (session_user) the move was made under, stamped by the
	// database: the credential behind the named person.
	DBUser          string    `json:"db_user" db:"db_user"`
	FromStatus      string    `json:"from_status" db:"from_status"`
	ToStatus        string    `json:"to_status" db:"to_status"`
	Resolution      string    `json:"resolution" db:"resolution"`
	EvidenceVersion *int64    `json:"evidence_version" db:"evidence_version"`
	Note            string    `json:"note" db:"note"`
	CreatedAt       time.Time `json:"created_at" db:"created_at"`
}

// OrderState is the current payment_orders row a finding points at.
type OrderState struct {
	ID              int64      `json:"id" db:"id"`
	Platform        string     `json:"platform" db:"platform"`
	MerchantID      string     `json:"merchant_id" db:"merchant_id"`
	OutTradeNo      string     `json:"out_trade_no" db:"out_trade_no"`
	AmountMinor     int64      `json:"amount_minor" db:"amount_minor"`
	Currency        string     `json:"currency" db:"currency"`
	Status          string     `json:"status" db:"status"`
	PlatformTradeNo string     `json:"platform_trade_no" db:"platform_trade_no"`
	PaidAmountMinor *int64     `json:"paid_amount_minor" db:"paid_amount_minor"`
	RefundedMinor   int64      `json:"refunded_minor" db:"refunded_minor"` // its SUCCESS refunds added up: a PAID order with some back is partly refunded
	PaidAt          *time.Time `json:"paid_at" db:"paid_at"`
	ExpiresAt       *time.Time `json:"expires_at" db:"expires_at"`
	CreatedAt       time.Time  `json:"created_at" db:"created_at"`
	UpdatedAt       time.Time  `json:"updated_at" db:"updated_at"`
	Version         int64      `json:"version" db:"version"`
	NextCheckAt     *time.Time `json:"next_check_at" db:"next_check_at"`
	CheckCount      int64      `json:"check_count" db:"check_count"`
	LastCheckedAt   *time.Time `json:"last_checked_at" db:"last_checked_at"`
}

// PaymentEvent is one payment_events row of an order. A refund's event names the refund
// (RefundID, and its number OutRefundNo); the order's own events name none.
type PaymentEvent struct {
	ID              int64     `json:"id" db:"id"`
	EventType       string    `json:"event_type" db:"event_type"`
	Source          string    `json:"source" db:"source"`
	PlatformTradeNo string    `json:"platform_trade_no" db:"platform_trade_no"`
	AmountMinor     *int64    `json:"amount_minor" db:"amount_minor"`
	RawDigest       string    `json:"raw_digest" db:"raw_digest"`
	RefundID        *int64    `json:"refund_id" db:"refund_id"`
	OutRefundNo     string    `json:"out_refund_no" db:"out_refund_no"`
	CreatedAt       time.Time `json:"created_at" db:"created_at"`
}

// RefundRecord is one payment_refunds row of an order, as a reviewer reads it.
type RefundRecord struct {
	ID               int64      `json:"id" db:"id"`
	OutRefundNo      string     `json:"out_refund_no" db:"out_refund_no"`
	PlatformRefundNo string     `json:"platform_refund_no" db:"platform_refund_no"` // "" for Alipay, or not yet known
	AmountMinor      int64      `json:"amount_minor" db:"amount_minor"`
	Currency         string     `json:"currency" db:"currency"`
	Status           string     `json:"status" db:"status"`
	SucceededAt      *time.Time `json:"succeeded_at" db:"succeeded_at"`
	CreatedAt        time.Time  `json:"created_at" db:"created_at"`
	UpdatedAt        time.Time  `json:"updated_at" db:"updated_at"`
}

// FindingDetails is everything `mismatches show` prints about one finding.
type FindingDetails struct {
	Finding Finding        `json:"finding"`
	Audit   []AuditEntry   `json:"audit"`
	Order   *OrderState    `json:"order"`   // nil when the finding names no order
	Events  []PaymentEvent `json:"events"`  // the order's events, its refunds' included, oldest first
	Refunds []RefundRecord `json:"refunds"` // the order's refunds, oldest first
	// Lines are the bill lines that recorded this finding, by day and line number.
	Lines []RecordedLine `json:"lines"`
}

// OrderHistory is an order as it stands, with every payment event and refund it has had.
type OrderHistory struct {
	Order   OrderState     `json:"order"`
	Events  []PaymentEvent `json:"events"`
	Refunds []RefundRecord `json:"refunds"`
}

// ReviewMove is the outcome of a successful move: the finding as it now stands and the
// audit row written with it.
type ReviewMove struct {
	Finding Finding    `json:"finding"`
	Audit   AuditEntry `json:"audit"`
}

// ReviewInput is who asks for a move and on what evidence. A console passes the signed-in
// person as By; the CLI passes --by and the operating-system user.
type ReviewInput struct {
	By     string // the person answerable for the move (required)
	OSUser string // the operating-system account that ran the CLI; "" from the console
	// Version is the evidence version the person read; 0: not named (see
	// ReviewRequest.SeenVersion).
	Version    int64
	Note       string
	Resolution Resolution // Resolve only
}

// ReviewState is what the review rules need of a finding: the store decides each move on it,
// and the console asks it which moves to offer.
func (f Finding) ReviewState() FindingReviewState {
	st := FindingReviewState{ID: f.ID, Status: f.ReviewStatus, EvidenceVersion: f.EvidenceVersion,
		ProposedBy: f.ProposedBy, Kind: f.Kind, Refund: f.OutRefundNo != ""}
	if f.ProposedVersion != nil {
		st.ProposedVersion = *f.ProposedVersion
	}
	return st
}
