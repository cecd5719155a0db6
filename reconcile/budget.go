package reconcile

import (
	"context"
	"math"
	"time"
)

// BudgetBurst is how many calls an account's budget lets go at once after a pause: about
// 100 ms of calls. A burst of 1 would lose every timer oversleep on a busy machine (the pacer
// could never catch up) and leave the budget unspent. The shared budget takes its calls in
// bunches of up to three quarters of it (repo/redis), the rest absorbing the oversleep: a
// paced process that wakes once per bunch rather than once per call spends far less CPU on
// waking. Any 10 s window stays within 1% of the limit.
func BudgetBurst(qps float64) int {
	return max(1, int(math.Round(qps/10)))
}

// Sleep waits d or until ctx ends, whichever comes first; it returns ctx's error in the
// second case. Every wait between retries, budget grants and polls goes through it, so a
// signal ends them all at once.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// BudgetQueue is the queue of this process's callers waiting for one call budget. A pass
// reads it to start another account's loop only while the budget can use more callers
// (BudgetQueues).
type BudgetQueue interface {
	// Waiting is how many callers wait for the budget now, and how many waiting keep it
	// spent: past that, another caller only waits longer.
	Waiting() (waiting, enough int)
	// Moved is closed the next time a caller stops waiting (its call granted, or it gave up).
	Moved() <-chan struct{}
}

// BudgetQueues finds, for an account, the budget that bounds its calls: its own, or its
// service provider's, which all the provider's sub-merchants share.
type BudgetQueues interface {
	// Queue names that budget (group: the account that owns it) and gives its queue; a nil
	// queue when the budget has none to read (it paces each call on its own).
	Queue(acct AccountKey) (group AccountKey, q BudgetQueue)
}
