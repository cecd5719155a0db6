package worker

import (
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/redis"
)

// budgetQueues lets a pass read the queue of the budget that bounds each account's calls
// (reconcile.BudgetQueues): a sub-merchant's provider's, which all its sub-merchants share,
// or a direct account's own.
type budgetQueues struct {
	owners map[reconcile.AccountKey]budgetOwner
	queues map[reconcile.AccountKey]*redis.Budget
}

// budgetQueues is nil without Redis: the local buckets pace each call on its own, with no
// queue to read.
func (a *App) budgetQueues() reconcile.BudgetQueues {
	if len(a.queues) == 0 {
		return nil
	}
	return budgetQueues{owners: a.owners, queues: a.queues}
}

func (b budgetQueues) Queue(acct reconcile.AccountKey) (reconcile.AccountKey, reconcile.BudgetQueue) {
	owner := acct
	if o, ok := b.owners[acct]; ok {
		owner = o.owner
	}
	if q, ok := b.queues[owner]; ok {
		return owner, q
	}
	return owner, nil // never a typed nil: the pass tests for nil
}
