package reconcile

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// OutboxRow is one undispatched fulfillment_outbox row as a publisher reads it back. It is
// about an order (order.paid, refund.*) or a finding (finding.*): the other id is 0.
type OutboxRow struct {
	ID        int64           `db:"id"`
	OrderID   int64           `db:"order_id"`
	FindingID int64           `db:"finding_id"`
	Kind      string          `db:"kind"`
	Payload   json.RawMessage `db:"payload"`
	CreatedAt time.Time       `db:"created_at"`
}

// OutboxBatch is outbox rows a store has locked for one publisher. They stay undispatched
// until Dispatched marks the ones the broker acknowledged; Release gives them all back. A
// publisher that dies meanwhile loses its session, and the store takes the rows again.
type OutboxBatch struct {
	Rows []OutboxRow

	dispatched func(ctx context.Context, ids []int64, at time.Time) error
	release    func()
}

// NewOutboxBatch is the batch a store hands out: dispatched marks ids (and lets the others
// go), release lets every row go. A store passes nil for both when it took no rows.
func NewOutboxBatch(rows []OutboxRow, dispatched func(ctx context.Context, ids []int64, at time.Time) error, release func()) *OutboxBatch {
	return &OutboxBatch{Rows: rows, dispatched: dispatched, release: release}
}

// ErrBatchFinished is Dispatched on a batch already dispatched or released.
var ErrBatchFinished = errors.New("outbox batch already finished")

// Dispatched marks the rows ids dispatched at at and releases the rest: they stay
// undispatched for the next take. A batch is finished once, by this or Release.
func (b *OutboxBatch) Dispatched(ctx context.Context, ids []int64, at time.Time) error {
	if b.dispatched == nil {
		return ErrBatchFinished
	}
	mark := b.dispatched
	b.dispatched, b.release = nil, nil
	return mark(ctx, ids, at)
}

// Release gives the batch's rows back undispatched. It is a no-op once the batch finished.
func (b *OutboxBatch) Release() {
	if b.release != nil {
		release := b.release
		b.dispatched, b.release = nil, nil
		release()
	}
}
