package sim_test

import (
	"context"
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

// step does one random thing to the world: a pass, a backfill, callbacks, a statement run
// over the day's bills, a change at the platform, a refund, or a fault.
func (s *seedRun) step(ctx context.Context, state *faultState) {
	switch r := s.rng.Intn(124); {
	case r >= 100:
		s.refundStep(ctx, r-100)
	case r < 18:
		s.startPass(reconcile.ModeOnce, s.crashDelay(), s.interruptDelay())
	case r < 28:
		s.startPass(reconcile.ModeBackfill, s.crashDelay(), s.interruptDelay())
	case r < 46:
		s.deliverAtOnce(ctx, 1+s.rng.Intn(4))
	case r < 50:
		s.startStatement(s.interruptDelay())
	case r < 60:
		s.platformChange()
	case r < 68:
		rate := []float64{0, 0.1, 0.3, 0.7}[s.rng.Intn(4)]
		s.ali.SetFaults(rate, time.Duration(s.rng.Intn(30))*time.Millisecond)
		s.wx.SetFaults(rate, time.Duration(s.rng.Intn(30))*time.Millisecond)
	case r < 74:
		state.redisDown = !state.redisDown
		s.claims.SetDown(state.redisDown)
		if state.redisDown {
			s.faults.Add("redis_down")
		}
	case r < 78:
		s.faults.Add("redis_flushed")
		s.w.flush(ctx) //nolint:errcheck
	case r < 82:
		s.takeSnapshot(ctx)
	case r < 86:
		s.restoreSnapshot(ctx)
	case r < 90:
		s.faults.Add("pg_sessions_killed")
		s.w.terminate(ctx, 0)
	case r < 94:
		state.stmtTimeout, state.stmtTouched = !state.stmtTimeout, true
		if state.stmtTimeout {
			s.faults.Add("pg_statement_timeout")
			s.w.statementTimeout(ctx, "1ms")
		} else {
			s.w.statementTimeout(ctx, "")
		}
	default:
		s.faults.Add("clock_jump")
		s.offset.Add(int64(time.Duration(1+s.rng.Intn(40)) * time.Minute))
	}
	time.Sleep(time.Duration(s.rng.Intn(8)) * time.Millisecond)
}

// faultState is what the faults left switched on.
type faultState struct{ redisDown, stmtTimeout, stmtTouched bool }

func (s *seedRun) crashDelay() time.Duration {
	if s.rng.Intn(4) != 0 {
		return 0
	}
	return time.Duration(1+s.rng.Intn(30)) * time.Millisecond
}

func (s *seedRun) interruptDelay() time.Duration {
	if s.rng.Intn(6) != 0 {
		return 0
	}
	return time.Duration(1+s.rng.Intn(30)) * time.Millisecond
}

// platformChange: a late payment, a refund, or a second payment of a paid order.
func (s *seedRun) platformChange() {
	o := s.orders[s.rng.Intn(len(s.orders))]
	switch t := o.pl.Truth(o.otn); {
	case t.State == reconcile.StateOpen:
		s.faults.Add("late_payment")
		s.pay(o, o.amount)
	case t.State == reconcile.StatePaid && s.rng.Intn(2) == 0:
		// The whole trade refunded, seen by queries and bills (REFUNDED_AT_PLATFORM); kept
		// apart from the refund records of refunds_test.go, which stay with the paid trade.
		if !o.pl.HasRefunds(o.otn) {
			s.faults.Add("refund")
			o.pl.Refund(o.otn, s.now().Truncate(time.Second))
		}
	case t.State == reconcile.StatePaid:
		s.faults.Add("paid_twice")
		s.pay(o, o.amount)
	}
}

// takeSnapshot remembers the DONE keys and their remaining lifetimes (a Redis backup).
func (s *seedRun) takeSnapshot(ctx context.Context) {
	keys, err := s.w.keys(ctx)
	if err != nil {
		return
	}
	snap := map[string]time.Duration{}
	for _, k := range keys {
		if v, err := s.w.redis.Client.Get(ctx, k).Result(); err == nil && v == "DONE" {
			if ttl, err := s.w.redis.Client.PTTL(ctx, k).Result(); err == nil && ttl > 0 {
				snap[k] = ttl
			}
		}
	}
	s.mu.Lock()
	s.snapshot = snap
	s.mu.Unlock()
}

// restoreSnapshot replaces Redis with the old snapshot: every key written since is lost.
func (s *seedRun) restoreSnapshot(ctx context.Context) {
	s.mu.Lock()
	snap := s.snapshot
	s.mu.Unlock()
	if snap == nil {
		return
	}
	s.faults.Add("redis_restored_old_snapshot")
	s.w.flush(ctx) //nolint:errcheck
	for k, ttl := range snap {
		s.w.redis.Client.Set(ctx, k, "DONE", ttl) //nolint:errcheck
	}
}
