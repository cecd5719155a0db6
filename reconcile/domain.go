// Package reconcile is payrecon's domain: order states and their legal transitions, the
// platform results that drive them, and the one apply path shared by callbacks and the
// reconciler. It imports no adapter; the repo and platformclient adapters implement the small interfaces
// declared here.
package reconcile

import (
	"fmt"
	"slices"
	"time"
)

// Platform names a payment platform as stored in payment_orders.platform.
type Platform string

const (
	Alipay    Platform = "alipay"
	WechatPay Platform = "wechatpay"
)

// Platforms is every platform payrecon speaks, in the order pages and reports list them.
func Platforms() []Platform { return []Platform{Alipay, WechatPay} }

// ParsePlatform accepts exactly the stored names.
func ParsePlatform(s string) (Platform, error) {
	if slices.Contains(Platforms(), Platform(s)) {
		return Platform(s), nil
	}
	return "", fmt.Errorf("unknown platform %q (want alipay or wechatpay)", s)
}

// DefaultCurrency is the currency of an amount whose platform names none: Alipay's answers
// and bills never do, WeChat Pay's may leave it out.
const DefaultCurrency = "CNY"

// Status is an order's local state (payment_orders.status).
type Status string

const (
	StatusPending  Status = "PENDING"
	StatusPaid     Status = "PAID"
	StatusClosed   Status = "CLOSED"
	StatusFailed   Status = "FAILED"
	StatusRefunded Status = "REFUNDED"
)

// AllStatuses lists every local state, for exhaustive tests and validation.
var AllStatuses = []Status{StatusPending, StatusPaid, StatusClosed, StatusFailed, StatusRefunded}

// transitions is the whole state machine. Transitions are one-way: nothing leaves CLOSED,
// FAILED or REFUNDED, and nothing moves a PAID order back to PENDING or CLOSED; a closed
// order that turns out paid is a finance decision (PAID_AFTER_CLOSE), never automatic: an
// approved accept_payment, which the database's approval makes (migration 0017).
var transitions = map[Status][]Status{
	StatusPending: {StatusPaid, StatusClosed, StatusFailed},
	StatusPaid:    {StatusRefunded},
}

// CanTransition reports whether from -> to is a legal transition.
func CanTransition(from, to Status) bool {
	for _, s := range transitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// EventType is payment_events.event_type: the state a transition entered.
type EventType string

const (
	EventPaid     EventType = "PAID"
	EventClosed   EventType = "CLOSED"
	EventFailed   EventType = "FAILED"
	EventRefunded EventType = "REFUNDED"
)

// eventFor names the event a transition into status records.
func eventFor(to Status) EventType { return EventType(to) }

// Source says where a result came from (payment_events.source).
type Source string

const (
	SourceNotify    Source = "notify"
	SourceReconcile Source = "reconcile"
	SourceBackfill  Source = "backfill"
	SourceStatement Source = "statement"
	// SourceReview is a payment finance took into the books (resolution accept_payment):
	// written by the database's approval, never by the apply path.
	SourceReview Source = "review"
)

// PlatformState is a platform's answer about one trade, normalised across platforms.
type PlatformState string

const (
	// StatePaid: Alipay TRADE_SUCCESS / TRADE_FINISHED, WeChat Pay SUCCESS.
	StatePaid PlatformState = "PAID"
	// StateOpen: still payable (WAIT_BUYER_PAY, NOTPAY, USERPAYING).
	StateOpen PlatformState = "OPEN"
	// StateClosed: closed at the platform. For Alipay TRADE_CLOSED this also means "fully
	// refunded after payment", so on a locally PAID order it is read as a refund signal.
	StateClosed PlatformState = "CLOSED"
	// StateRefunded: WeChat Pay REFUND (a refund was started on a paid order).
	StateRefunded PlatformState = "REFUNDED"
	// StateFailed: the payment attempt failed or was revoked (WeChat PAYERROR, REVOKED).
	StateFailed PlatformState = "FAILED"
	// StateNotFound: the platform has no such trade (the buyer never reached it).
	StateNotFound PlatformState = "NOT_FOUND"
)

// Result is one verified platform answer about one trade. Only a platform client or a
// callback verifier builds it, after the signature has checked out: a Result is trusted.
type Result struct {
	Platform Platform
	// MerchantID is the Alipay app_id or the WeChat Pay mchid the answer belongs to.
	MerchantID      string
	OutTradeNo      string
	PlatformTradeNo string // Alipay trade_no, WeChat transaction_id; empty when unknown
	State           PlatformState
	// RawState is the platform's own word (TRADE_SUCCESS, NOTPAY, ...), kept for reports.
	RawState    string
	AmountMinor int64  // total amount in minor units; 0 when the platform did not say
	Currency    string // ISO code; empty means CNY (Alipay never names one)
	PaidAt      time.Time
	// SellerID is the seller (Alipay seller_id) or app id (WeChat appid) the answer names,
	// checked against the configured account when one is configured.
	SellerID  string
	Source    Source
	RawDigest string // hex SHA-256 of the raw body the result was read from
}

// CurrencyOrDefault returns the result's currency, DefaultCurrency when the platform named
// none.
func (r Result) CurrencyOrDefault() string {
	if r.Currency == "" {
		return DefaultCurrency
	}
	return r.Currency
}

// Order is the part of payment_orders the apply path reads.
type Order struct {
	ID              int64
	Platform        Platform
	MerchantID      string
	OutTradeNo      string
	AmountMinor     int64
	Currency        string
	Status          Status
	PlatformTradeNo string
	PaidAmountMinor int64
	// RefundedMinor is the sum of the order's SUCCESS refunds (payment_orders.refunded_minor).
	RefundedMinor int64
	PaidAt        time.Time
	CreatedAt     time.Time
	ExpiresAt     time.Time // zero: created_at + configured order TTL
	Version       int64
	// CheckCount is how many consecutive checks left the order pending: the re-check
	// backoff exponent.
	CheckCount int
}

// ExpiryAt returns when the order stops being payable.
func (o Order) ExpiryAt(orderTTL time.Duration) time.Time {
	if !o.ExpiresAt.IsZero() {
		return o.ExpiresAt
	}
	return o.CreatedAt.Add(orderTTL)
}

// MismatchKind is reconcile_mismatches.kind.
type MismatchKind string

const (
	MismatchAmount               MismatchKind = "AMOUNT_MISMATCH"
	MismatchCurrency             MismatchKind = "CURRENCY_MISMATCH"
	MismatchMerchant             MismatchKind = "MERCHANT_MISMATCH"
	MismatchUnknownOrder         MismatchKind = "UNKNOWN_ORDER"
	MismatchPaidAfterClose       MismatchKind = "PAID_AFTER_CLOSE"
	MismatchDuplicatePayment     MismatchKind = "DUPLICATE_PAYMENT"
	MismatchLocalPaidPlatformNot MismatchKind = "LOCAL_PAID_PLATFORM_UNPAID"
	MismatchRefundedAtPlatform   MismatchKind = "REFUNDED_AT_PLATFORM"
)

// Mismatch is one finding for finance. Recording the same finding again (same platform,
// merchant, out_trade_no and kind) bumps its seen count instead of adding a row.
type Mismatch struct {
	OrderID         int64 // 0 when no order matched
	Platform        Platform
	MerchantID      string
	OutTradeNo      string
	PlatformTradeNo string
	// OutRefundNo names the refund a refund finding is about ("" for payment findings): an
	// order's refunds each have findings of their own.
	OutRefundNo         string
	Kind                MismatchKind
	LocalAmountMinor    int64 // 0: unknown
	PlatformAmountMinor int64
	LocalStatus         Status
	PlatformStatus      string
	Detail              map[string]any
}
