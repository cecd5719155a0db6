package reconcile

import (
	"context"
	"time"
)

// ApplyCallback applies a callback's verified result and says whether the platform may stop
// retrying. It acknowledges only a durable outcome: applied, already applied, or a finding
// recorded. A claim held by another handler is waited on for up to wait (polling: the holder
// either marks DONE, or fails and its key vanishes, and then this handler claims and
// applies); still held at the end, or any error: not acknowledged, and the platform retries.
func (a *Applier) ApplyCallback(ctx context.Context, r Result, wait time.Duration) (Applied, bool, error) {
	r.Source = SourceNotify
	deadline := time.Now().Add(wait)
	const poll = 25 * time.Millisecond
	for {
		applied, err := a.ApplyResult(ctx, r, ApplyOptions{})
		if err != nil {
			return applied, false, err
		}
		if applied.Outcome != OutcomeClaimedElsewhere {
			return applied, true, nil
		}
		if time.Now().Add(poll).After(deadline) {
			return applied, false, nil
		}
		select {
		case <-time.After(poll):
		case <-ctx.Done():
			return applied, false, ctx.Err()
		}
	}
}
