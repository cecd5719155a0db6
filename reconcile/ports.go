package reconcile

import (
	"context"
	"time"
)

// PlatformClient is what the reconciler needs from one payment platform. Implementations
// verify every answer before returning a Result, and return *PlatformError on failure.
type PlatformClient interface {
	Platform() Platform
	// MerchantID is the account this client speaks for (Alipay app_id, WeChat mchid).
	MerchantID() string
	// Query asks the platform about one trade by the merchant's out_trade_no. A trade the
	// platform does not know is a Result with State StateNotFound, not an error.
	Query(ctx context.Context, outTradeNo string) (Result, error)
	// Close closes an unpaid trade at the platform so the buyer can no longer pay it. A trade
	// unknown at the platform is not an error; a trade paid meanwhile is KindAlreadyPaid.
	Close(ctx context.Context, outTradeNo string) error
	// QueryRefund asks the platform about one refund of a trade by the merchant's refund
	// number (Alipay out_request_no). A refund the platform does not know is a RefundResult
	// with State RefundStateNotFound, not an error.
	QueryRefund(ctx context.Context, outTradeNo, outRefundNo string) (RefundResult, error)
}

// Store is the persistence the apply path needs. Implementations translate their driver's
// errors: no row is ErrNotFound.
type Store interface {
	// FindOrder finds an order by its platform identity.
	FindOrder(ctx context.Context, p Platform, merchantID, outTradeNo string) (Order, error)
	// OutTradeNoExists reports whether the out_trade_no exists under any merchant of p.
	OutTradeNoExists(ctx context.Context, p Platform, outTradeNo string) (bool, error)
	// ApplyTransition atomically moves an order from t.From to t.To if (and only if) it is
	// still in t.From, recording the payment event and, if given, the outbox message.
	// It reports whether the order changed.
	ApplyTransition(ctx context.Context, t Transition) (bool, error)
	// RecordMismatch inserts a finding or bumps the existing one's seen count.
	RecordMismatch(ctx context.Context, m Mismatch) error
}

// Transition is one state change with its audit trail, applied in one transaction.
type Transition struct {
	OrderID         int64
	From, To        Status
	Platform        Platform
	PlatformTradeNo string
	AmountMinor     int64     // event amount; for PAID also stored as paid_amount_minor
	PaidAt          time.Time // for PAID
	Source          Source
	RawDigest       string
	// Outbox, when set, is enqueued for downstream fulfilment in the same transaction.
	Outbox *OutboxMessage
}

// OutboxKindPaid is the outbox kind of a newly paid order; relayed on <prefix>order.paid.
const OutboxKindPaid = "order.paid"

// OutboxKinds lists every kind the domain writes to the outbox.
var OutboxKinds = []string{OutboxKindPaid}

// OutboxMessage is a fulfillment_outbox row.
type OutboxMessage struct {
	Kind    string // OutboxKindPaid
	Payload map[string]any
}

// ClaimState is what a claim attempt found.
type ClaimState int

const (
	// ClaimAcquired: we hold the PROCESSING lease.
	ClaimAcquired ClaimState = iota + 1
	// ClaimHeld: another worker holds the PROCESSING lease.
	ClaimHeld
	// ClaimDone: the result was applied already (the DONE mark).
	ClaimDone
	// ClaimUnavailable: the claim store could not answer; go on without it.
	ClaimUnavailable
	// ClaimFree: (Peek only) nobody holds the key.
	ClaimFree
)

func (c ClaimState) String() string {
	switch c {
	case ClaimAcquired:
		return "acquired"
	case ClaimHeld:
		return "held"
	case ClaimDone:
		return "done"
	case ClaimUnavailable:
		return "unavailable"
	case ClaimFree:
		return "free"
	}
	return "unknown"
}

// Claimer is the load-shedding claim in front of the database (Redis SET NX EX). It is an
// optimisation, never the source of truth: implementations report ClaimUnavailable instead
// of failing when their store is down, and the conditional update decides.
type Claimer interface {
	// Peek reports ClaimDone, ClaimHeld or ClaimFree without taking the key, so a repeated
	// callback is answered without touching the database.
	Peek(ctx context.Context, key string) ClaimState
	// Claim tries SET key PROCESSING NX EX lease.
	Claim(ctx context.Context, key string, lease time.Duration) ClaimState
	// MarkDone replaces our claim with DONE for ttl.
	MarkDone(ctx context.Context, key string, ttl time.Duration)
	// Release deletes a PROCESSING claim so a retry can take it; it never deletes DONE.
	Release(ctx context.Context, key string)
}
