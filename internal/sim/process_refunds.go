package sim

import (
	"context"

	"github.com/payrecon/payrecon/reconcile"
)

// The refund half of ProcessStore: with it the simulated passes check refunds too (a
// Runner checks refunds only when its queue is a RefundQueue and its applier's store a
// RefundStore), and a crash mutes these calls like every other.
var (
	_ reconcile.RefundStore = (*ProcessStore)(nil)
	_ reconcile.RefundQueue = (*ProcessStore)(nil)
)

// FindRefund implements reconcile.RefundStore.
func (s *ProcessStore) FindRefund(ctx context.Context, pl reconcile.Platform, m, outRefundNo string) (reconcile.Refund, error) {
	if s.p.dead() {
		return reconcile.Refund{}, ErrCrashed
	}
	return s.p.store.FindRefund(ctx, pl, m, outRefundNo)
}

// ApplyRefundTransition implements reconcile.RefundStore. A process set to crash at a
// transition may die right after this one commits (CrashAtTransition).
func (s *ProcessStore) ApplyRefundTransition(ctx context.Context, t reconcile.RefundTransition) (reconcile.RefundMove, error) {
	if s.p.dead() {
		return reconcile.RefundMove{}, ErrCrashed
	}
	mv, err := s.p.store.ApplyRefundTransition(ctx, t)
	if err == nil && s.p.afterTransition() {
		return reconcile.RefundMove{}, ErrCrashed
	}
	return mv, err
}

// OrderRefunds implements reconcile.RefundStore.
func (s *ProcessStore) OrderRefunds(ctx context.Context, orderID int64) ([]reconcile.Refund, error) {
	if s.p.dead() {
		return nil, ErrCrashed
	}
	return s.p.store.OrderRefunds(ctx, orderID)
}

// TakeRefunds implements reconcile.RefundQueue.
func (s *ProcessStore) TakeRefunds(ctx context.Context, q reconcile.TakeQuery) ([]reconcile.DueRefund, error) {
	if s.p.dead() {
		return nil, ErrCrashed
	}
	return s.p.store.TakeRefunds(ctx, q)
}

// RefundChecked implements reconcile.RefundQueue.
func (s *ProcessStore) RefundChecked(ctx context.Context, c reconcile.RefundCheckRecord) error {
	if s.p.dead() {
		return ErrCrashed
	}
	return s.p.store.RefundChecked(ctx, c)
}
