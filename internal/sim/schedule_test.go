package sim_test

import (
	"context"
	"fmt"
	"math/rand"
	"time"

	"github.com/payrecon/payrecon/internal/sim"
	"github.com/payrecon/payrecon/reconcile"
)

func newSeedRun(w *world, seed int64) *seedRun {
	s := &seedRun{w: w, seed: seed, start: time.Now(), rng: rand.New(rand.NewSource(seed)), faults: &sim.Faults{}}
	s.ali = sim.NewPlatform(reconcile.Alipay, aliMerchant, seed*7+1, s.faults)
	s.wx = sim.NewPlatform(reconcile.WechatPay, wxMerchant, seed*7+2, s.faults)
	s.claims = sim.NewSwitch(w.up, w.down)
	s.serve = reconcile.NewApplier(repoStore(w), s.claims, s.applierSettings(), zerologNop)
	return s
}

// seedOrders creates the orders and the platform's truth about each: never paid (open or
// unknown), paid, paid with a wrong amount, closed, paid and refunded, paid twice.
func (s *seedRun) seedOrders(ctx context.Context) error {
	n := 4 + s.rng.Intn(13)
	for i := 0; i < n; i++ {
		pl := s.ali
		if s.rng.Intn(2) == 0 {
			pl = s.wx
		}
		o := order{pl: pl, otn: fmt.Sprintf("S%d-%d", s.seed, i), amount: 1 + s.rng.Int63n(100000),
			createdAt: time.Now().Add(-time.Duration(3+s.rng.Intn(50)) * time.Minute).Truncate(time.Microsecond)}
		if s.rng.Intn(3) == 0 {
			o.expiresAt = o.createdAt.Add(time.Duration(5+s.rng.Intn(80)) * time.Minute)
		}
		var expires any
		if !o.expiresAt.IsZero() {
			expires = o.expiresAt
		}
		if _, err := s.w.db.ExecContext(ctx, `INSERT INTO payment_orders (platform, merchant_id, out_trade_no, amount_minor, status, created_at, expires_at)
			VALUES ($1, $2, $3, $4, 'PENDING', $5, $6)`, string(pl.Platform()), pl.MerchantID(), o.otn, o.amount, o.createdAt, expires); err != nil {
			return fmt.Errorf("seed order: %w", err)
		}
		s.orders = append(s.orders, o)
		s.setTruth(o)
	}
	return nil
}

func (s *seedRun) setTruth(o order) {
	switch r := s.rng.Intn(20); {
	case r < 5:
		o.pl.Set(o.otn, sim.Trade{State: reconcile.StateOpen})
	case r < 7:
		// Unknown at the platform: the buyer never reached the cashier.
	case r < 12:
		o.pl.Set(o.otn, sim.Trade{State: reconcile.StateOpen})
		s.pay(o, o.amount)
	case r < 13:
		o.pl.Set(o.otn, sim.Trade{State: reconcile.StateOpen})
		s.pay(o, o.amount+1+s.rng.Int63n(500)) // a wrong amount
	case r < 15:
		o.pl.Set(o.otn, sim.Trade{State: reconcile.StateClosed})
	case r < 17:
		o.pl.Set(o.otn, sim.Trade{State: reconcile.StateOpen})
		s.pay(o, o.amount)
		o.pl.Refund(o.otn, s.now().Truncate(time.Second))
	default:
		o.pl.Set(o.otn, sim.Trade{State: reconcile.StateOpen})
		s.pay(o, o.amount)
		s.pay(o, o.amount) // paid twice
	}
}

// pay pays an order at the platform and queues the platform's callbacks: one to four
// copies (duplicates), some spoiled (bad signature, truncated: refused, sent again).
func (s *seedRun) pay(o order, amount int64) {
	s.mu.Lock()
	s.trades++
	trade := fmt.Sprintf("T%d-%d", s.seed, s.trades)
	s.mu.Unlock()
	at := s.now().Truncate(time.Second)
	if !o.pl.Pay(o.otn, trade, amount, at) {
		return
	}
	copies := 1 + s.rng.Intn(4)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := 0; i < copies; i++ {
		s.pending = append(s.pending, callback{pl: o.pl, otn: o.otn, trade: trade, amount: amount, paidAt: at, spoiled: s.rng.Intn(8) == 0})
	}
}

// deliver sends up to n queued callbacks, picked at random (reordered); a refused one is
// queued again, as the platform retries.
func (s *seedRun) deliver(ctx context.Context, n int) {
	for i := 0; i < n; i++ {
		s.mu.Lock()
		if len(s.pending) == 0 {
			s.mu.Unlock()
			return
		}
		j := s.rng.Intn(len(s.pending))
		cb := s.pending[j]
		s.pending = append(s.pending[:j], s.pending[j+1:]...)
		s.mu.Unlock()
		s.deliverOne(ctx, cb)
	}
}

func (s *seedRun) deliverOne(ctx context.Context, cb callback) {
	if cb.spoiled {
		s.faults.Add("callback_spoiled")
		cb.spoiled = false
		s.requeue(cb)
		return
	}
	res := reconcile.Result{Platform: cb.pl.Platform(), MerchantID: cb.pl.MerchantID(), OutTradeNo: cb.otn,
		PlatformTradeNo: cb.trade, State: reconcile.StatePaid, RawState: "TRADE_SUCCESS", AmountMinor: cb.amount,
		PaidAt: cb.paidAt, Source: reconcile.SourceNotify}
	applied, err := s.serve.ApplyResult(ctx, res, reconcile.ApplyOptions{})
	if err != nil || applied.Outcome == reconcile.OutcomeClaimedElsewhere {
		s.requeue(cb) // refused: the platform sends it again
		return
	}
	s.mu.Lock()
	s.acks = append(s.acks, ack{cb: cb, outcome: applied.Outcome, mismatch: applied.Mismatch})
	s.mu.Unlock()
}

func (s *seedRun) requeue(cb callback) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pending = append(s.pending, cb)
}

// startPass runs a pass (or backfill) in a process of its own; it may be interrupted (a
// signal: drain and record) or crash (at a random point: nothing more reaches the
// database or Redis, its lock session dies, its row and leases stay behind).
// passDeadline bounds one simulated pass in real time (seeds take well under a second).
const passDeadline = 20 * time.Second

func (s *seedRun) startPass(mode reconcile.RunMode, crashAfter, interruptAfter time.Duration) {
	proc := s.process()
	runner := s.runner(proc, 1+s.rng.Intn(4))
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		// A deadline, as a CronJob's activeDeadlineSeconds is: the simulated processes share
		// one small pool, and passes that each hold their lock session while waiting for
		// another connection could otherwise wait for each other for ever.
		ctx, cancel := context.WithTimeout(context.Background(), passDeadline)
		defer cancel()
		crashed := make(chan struct{})
		switch {
		case crashAfter > 0:
			s.faults.Add("process_crash")
			time.AfterFunc(crashAfter, func() {
				defer close(crashed)
				sess := proc.Crash()
				cancel()
				if sess.PID != 0 {
					s.w.terminate(context.Background(), sess.PID)
					proc.Reap()
				}
			})
		case interruptAfter > 0:
			s.faults.Add("pass_interrupted")
			time.AfterFunc(interruptAfter, cancel)
			close(crashed)
		default:
			close(crashed)
		}
		runner.Pass(ctx, s.spec(mode)) //nolint:errcheck // failures are part of the schedule
		<-crashed
	}()
}
