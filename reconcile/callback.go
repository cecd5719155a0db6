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
	return untilSettled(ctx, wait, func() (Applied, error) { return a.ApplyResult(ctx, r, ApplyOptions{}) })
}

// ApplyRefundCallback is ApplyCallback for a refund's outcome, under the same rule. A
// refund left still pending is not durable either: Alipay's running total that does not
// split onto this refund yet (an earlier refund of the trade has not landed); the retry, or
// the pass's query, lands it.
func (a *Applier) ApplyRefundCallback(ctx context.Context, r RefundResult, wait time.Duration) (Applied, bool, error) {
	r.Source = SourceNotify
	applied, ack, err := untilSettled(ctx, wait, func() (Applied, error) { return a.ApplyRefundResult(ctx, r, ApplyOptions{}) })
	return applied, ack && applied.Outcome != OutcomeStillPending, err
}

// claimPoll is how often a callback looks again at a claim another handler holds.
const claimPoll = 25 * time.Millisecond

// untilSettled is the wait rule of every callback: apply, and while another handler holds
// the claim, apply again every claimPoll until wait has passed. The holder either marks DONE
// (apply then answers a duplicate) or fails and its key vanishes (apply then claims and
// applies). It reports whether the outcome is durable.
func untilSettled(ctx context.Context, wait time.Duration, apply func() (Applied, error)) (Applied, bool, error) {
	deadline := time.Now().Add(wait)
	for {
		applied, err := apply()
		if err != nil {
			return applied, false, err
		}
		if applied.Outcome != OutcomeClaimedElsewhere {
			return applied, true, nil
		}
		if time.Now().Add(claimPoll).After(deadline) {
			return applied, false, nil
		}
		select {
		case <-time.After(claimPoll):
		case <-ctx.Done():
			return applied, false, ctx.Err()
		}
	}
}
