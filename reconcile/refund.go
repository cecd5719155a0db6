package reconcile

import (
	"context"
	"fmt"
	"time"
)

// RefundStatus is a refund's local state (payment_refunds.status).
type RefundStatus string

const (
	// RefundProcessing: the merchant asked the platform to refund; the outcome is not known.
	RefundProcessing RefundStatus = "PROCESSING"
	RefundSuccess    RefundStatus = "SUCCESS"
	RefundClosed     RefundStatus = "CLOSED"
	// RefundAbnormal: WeChat Pay could not pay the buyer back (a closed card, a frozen
	// account); the merchant must act, and the refund may still succeed or close.
	RefundAbnormal RefundStatus = "ABNORMAL"
)

// RefundStatuses lists every local refund state.
var RefundStatuses = []RefundStatus{RefundProcessing, RefundSuccess, RefundClosed, RefundAbnormal}

// refundTransitions is the refund state machine. One-way: nothing leaves SUCCESS or
// CLOSED, and ABNORMAL only moves on to an outcome.
var refundTransitions = map[RefundStatus][]RefundStatus{
	RefundProcessing: {RefundSuccess, RefundClosed, RefundAbnormal},
	RefundAbnormal:   {RefundSuccess, RefundClosed},
}

// CanRefundTransition reports whether from -> to is a legal refund transition.
func CanRefundTransition(from, to RefundStatus) bool {
	for _, s := range refundTransitions[from] {
		if s == to {
			return true
		}
	}
	return false
}

// RefundPredecessors lists the statuses a refund may move to `to` from: the conditional
// update's `status IN (...)`.
func RefundPredecessors(to RefundStatus) []RefundStatus {
	var out []RefundStatus
	for _, from := range RefundStatuses {
		if CanRefundTransition(from, to) {
			out = append(out, from)
		}
	}
	return out
}

// Refund event types (payment_events.event_type of a refund transition) and the outbox kind
// of a succeeded refund.
const (
	EventRefundSuccess  EventType = "REFUND_SUCCESS"
	EventRefundClosed   EventType = "REFUND_CLOSED"
	EventRefundAbnormal EventType = "REFUND_ABNORMAL"

	OutboxKindRefundSucceeded = "refund.succeeded"
)

// RefundEvent names the event a refund transition into to records.
func RefundEvent(to RefundStatus) EventType { return EventType("REFUND_" + string(to)) }

// Refund finding kinds.
const (
	// MismatchUnknownRefund: the platform shows a refund whose out_refund_no we do not have
	// (made in the merchant portal, or lost by the app).
	MismatchUnknownRefund MismatchKind = "UNKNOWN_REFUND"
	// MismatchRefundAmount: the platform's refund amount differs from ours.
	MismatchRefundAmount MismatchKind = "REFUND_AMOUNT_MISMATCH"
	// MismatchOverRefunded: a successful refund would take more back than was paid.
	MismatchOverRefunded MismatchKind = "OVER_REFUNDED"
	// MismatchRefundAbnormal: WeChat Pay could not pay the buyer back; the merchant must act.
	MismatchRefundAbnormal MismatchKind = "REFUND_ABNORMAL"
	// MismatchRefundNotAtPlatform: a local refund the platform says does not exist (past
	// RECONCILER_REFUND_TTL), or a local SUCCESS the bills do not list.
	MismatchRefundNotAtPlatform MismatchKind = "REFUND_NOT_AT_PLATFORM"
)

// DefaultRefundTTL is how long a refund the platform does not know may stay unknown before
// it is a REFUND_NOT_AT_PLATFORM finding (RECONCILER_REFUND_TTL): the merchant's app records
// the refund before the platform has it.
const DefaultRefundTTL = time.Hour

// RefundState is a platform's answer about one refund, normalised across platforms.
type RefundState string

const (
	RefundStateSuccess    RefundState = "SUCCESS"
	RefundStateClosed     RefundState = "CLOSED"
	RefundStateProcessing RefundState = "PROCESSING"
	RefundStateAbnormal   RefundState = "ABNORMAL"
	// RefundStateNotFound: the platform has no such refund (WeChat Pay RESOURCE_NOT_EXISTS;
	// Alipay's 10000 answer without refund_amount, which also covers a refund that failed).
	RefundStateNotFound RefundState = "NOT_FOUND"
)

// status is the local status an answer moves a refund to; false for PROCESSING and
// NOT_FOUND, which move nothing.
func (s RefundState) status() (RefundStatus, bool) {
	switch s {
	case RefundStateSuccess:
		return RefundSuccess, true
	case RefundStateClosed:
		return RefundClosed, true
	case RefundStateAbnormal:
		return RefundAbnormal, true
	}
	return "", false
}

// RefundResult is one verified platform answer about one refund (a query, a callback or a
// bill line). Like Result, only a platform client, a callback verifier or a bill reader
// builds it.
type RefundResult struct {
	Platform         Platform
	MerchantID       string
	OutTradeNo       string
	PlatformTradeNo  string // the refunded payment's trade number, when the answer names it
	OutRefundNo      string // the merchant's refund number (Alipay out_request_no)
	PlatformRefundNo string // WeChat Pay refund_id; empty for Alipay
	State            RefundState
	RawState         string
	// AmountMinor is this refund's amount in minor units; 0 when the answer gives only the
	// trade's running total (RefundedTotalMinor).
	AmountMinor int64
	// RefundedTotalMinor is the trade's total refunded so far, as Alipay's refund
	// notification says it (refund_fee): this refund's amount is the total less the
	// trade's earlier successful refunds.
	RefundedTotalMinor int64
	Currency           string // empty means CNY
	SucceededAt        time.Time
	Source             Source
	RawDigest          string
}

// CurrencyOrDefault returns the result's currency, DefaultCurrency when the platform named
// none.
func (r RefundResult) CurrencyOrDefault() string {
	if r.Currency == "" {
		return DefaultCurrency
	}
	return r.Currency
}

func (r RefundResult) validate() error {
	var missing string
	switch {
	case r.Platform != Alipay && r.Platform != WechatPay:
		return fmt.Errorf("refund result: unknown platform %q", r.Platform)
	case r.MerchantID == "":
		missing = "merchant id"
	case r.OutRefundNo == "":
		missing = "out_refund_no"
	case r.Source == "":
		missing = "source"
	case r.State == RefundStateSuccess && r.AmountMinor <= 0 && r.RefundedTotalMinor <= 0:
		missing = "amount of a successful refund"
	case r.AmountMinor < 0 || r.RefundedTotalMinor < 0:
		return fmt.Errorf("refund result %s/%s: negative amount", r.Platform, r.OutRefundNo)
	}
	if missing != "" {
		return fmt.Errorf("refund result %s/%s: missing %s", r.Platform, r.OutRefundNo, missing)
	}
	switch r.State {
	case RefundStateSuccess, RefundStateClosed, RefundStateProcessing, RefundStateAbnormal, RefundStateNotFound:
		return nil
	}
	return fmt.Errorf("refund result %s/%s: unknown state %q", r.Platform, r.OutRefundNo, r.State)
}

// Refund is the part of payment_refunds the apply path reads.
type Refund struct {
	ID               int64
	OrderID          int64
	Platform         Platform
	MerchantID       string
	OutTradeNo       string
	OutRefundNo      string
	PlatformRefundNo string
	AmountMinor      int64
	Currency         string
	Status           RefundStatus
	SucceededAt      time.Time
	CreatedAt        time.Time
	// CheckCount is how many consecutive checks left the refund unsettled: the re-check
	// backoff exponent, as for orders.
	CheckCount int
	// OrderCreatedAt is the refunded order's created_at: a backfill takes the refunds of
	// the orders created in its window, in their orders' order.
	OrderCreatedAt time.Time
}

// RefundTransition is one refund's state change, applied by ONE conditional statement: the
// refund moves only from a legal predecessor of To; a SUCCESS also adds the amount to the
// order's refunded_minor (never past its paid amount) and moves the order to REFUNDED when
// the sum reaches it; the refund event, and for a SUCCESS the outbox row, go with it.
type RefundTransition struct {
	RefundID         int64
	OrderID          int64
	To               RefundStatus
	Platform         Platform
	PlatformTradeNo  string
	PlatformRefundNo string
	AmountMinor      int64
	SucceededAt      time.Time
	Source           Source
	RawDigest        string
	Outbox           *OutboxMessage
}

// RefundMove is what ApplyRefundTransition did.
type RefundMove struct {
	// Changed: the refund moved.
	Changed bool
	// OrderRefunded: the same statement moved the order to REFUNDED.
	OrderRefunded bool
}

// RefundStore is what the refund apply path needs of the database, beside Store.
type RefundStore interface {
	// FindRefund finds a refund by its platform identity; ErrNotFound when there is none.
	FindRefund(ctx context.Context, p Platform, merchantID, outRefundNo string) (Refund, error)
	// ApplyRefundTransition applies t if (and only if) the refund is still in a legal
	// predecessor of t.To and, for a SUCCESS, the order can take the amount back.
	ApplyRefundTransition(ctx context.Context, t RefundTransition) (RefundMove, error)
	// OrderRefunds lists an order's refunds: what explains a trade the platform reports
	// refunded.
	OrderRefunds(ctx context.Context, orderID int64) ([]Refund, error)
}

// Notification is one verified callback as a platform sent it: a payment's outcome, a
// refund's outcome, or an event payrecon does not handle, which is acknowledged and counted,
// never refused (a refusal makes the platform retry it for a day). Exactly one is set.
type Notification struct {
	Payment *Result
	Refund  *RefundResult
	// Ignored names the event type of a notification payrecon does not handle.
	Ignored string
}

// MerchantID is the merchant the notification's payment or refund belongs to ("" for one
// payrecon ignores).
func (n Notification) MerchantID() string {
	switch {
	case n.Payment != nil:
		return n.Payment.MerchantID
	case n.Refund != nil:
		return n.Refund.MerchantID
	}
	return ""
}
