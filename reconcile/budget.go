package reconcile

import "math"

// BudgetBurst is how many calls an account's budget lets go at once after a pause: about
// 25 ms of calls. A burst of 1 would lose every timer oversleep on a busy machine (the pacer
// could never catch up) and leave the budget unspent; 25 ms keeps any 10 s window within a
// fraction of a percent of the limit.
func BudgetBurst(qps float64) int {
	return max(1, int(math.Round(qps/40)))
}
