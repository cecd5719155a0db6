package sim_test

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"time"

	"github.com/payrecon/payrecon/internal/sim"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/repotest"
)

func newSeedRun(w *world, seed int64) *seedRun {
	s := &seedRun{w: w, seed: seed, start: time.Now(), rng: rand.New(rand.NewSource(seed)), faults: &sim.Faults{},
		seen: &sim.Faults{}, asked: map[string]int64{}}
	s.ali = sim.NewPlatform(reconcile.Alipay, aliMerchant, seed*7+1, s.faults)
	s.wx = sim.NewPlatform(reconcile.WechatPay, wxMerchant, seed*7+2, s.faults)
	s.claims = sim.NewSwitch(w.up, w.down)
	s.serve = reconcile.NewApplier(repoStore(w), s.claims, s.applierSettings(), zerologNop)
	return s
}

// seedOrders creates the orders and the platform's truth about each: never paid (open or
// unknown), paid, paid with a wrong amount, closed, paid and refunded, paid twice, and paid
// with the payment already landed here before the schedule starts (so the merchant's app
// has orders to refund from the first step on).
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
		if _, err := repotest.TryInsertOrder(ctx, s.w.db, repotest.Order{Platform: string(pl.Platform()), MerchantID: pl.MerchantID(),
			OutTradeNo: o.otn, AmountMinor: o.amount, Status: "PENDING", CreatedAt: o.createdAt, ExpiresAt: o.expiresAt}); err != nil {
			return fmt.Errorf("seed order: %w", err)
		}
		s.orders = append(s.orders, o)
		if s.setTruth(o) {
			if err := s.land(ctx, o); err != nil {
				return err
			}
		}
	}
	return nil
}

// land applies an order's payment callback at once, as the callback service did before the
// schedule began.
func (s *seedRun) land(ctx context.Context, o order) error {
	t := o.pl.Truth(o.otn)
	res := reconcile.Result{Platform: o.pl.Platform(), MerchantID: o.pl.MerchantID(), OutTradeNo: o.otn,
		PlatformTradeNo: t.TradeNo, State: reconcile.StatePaid, RawState: "TRADE_SUCCESS", AmountMinor: t.Amount,
		PaidAt: t.PaidAt, Source: reconcile.SourceNotify}
	var err error
	for i := 0; i < 3; i++ { // a connection the last seed's kills left dead is retried
		var applied reconcile.Applied
		if applied, err = s.serve.ApplyResult(ctx, res, reconcile.ApplyOptions{}); err == nil {
			s.acks = append(s.acks, ack{cb: callback{pl: o.pl, otn: o.otn, trade: t.TradeNo, amount: t.Amount, paidAt: t.PaidAt},
				outcome: applied.Outcome, mismatch: applied.Mismatch})
			return nil
		}
	}
	return fmt.Errorf("land the payment of %s: %w", o.otn, err)
}

// setTruth sets the platform's truth about an order; true: its payment is to land at once.
func (s *seedRun) setTruth(o order) bool {
	switch r := s.rng.Intn(24); {
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
	case r < 20:
		o.pl.Set(o.otn, sim.Trade{State: reconcile.StateOpen})
		s.pay(o, o.amount)
		s.pay(o, o.amount) // paid twice
	default:
		o.pl.Set(o.otn, sim.Trade{State: reconcile.StateOpen})
		s.pay(o, o.amount)
		return true
	}
	return false
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

// deliverAtOnce sends up to n queued callbacks, each on a handler of its own at the same
// moment, as a callback service serves concurrent requests. The first is picked at random
// and the other queued notifications of the same payment or refund go with it (copies, and
// a refund's other outcomes: ABNORMAL and SUCCESS then race each other to the conditional
// update), then more picked at random.
func (s *seedRun) deliverAtOnce(ctx context.Context, n int) {
	s.mu.Lock()
	var batch []callback
	take := func(j int) {
		batch = append(batch, s.pending[j])
		s.pending = append(s.pending[:j], s.pending[j+1:]...)
	}
	if len(s.pending) > 0 {
		take(s.rng.Intn(len(s.pending)))
		for j := len(s.pending) - 1; j >= 0 && len(batch) < n; j-- {
			if subject(s.pending[j]) == subject(batch[0]) {
				take(j)
			}
		}
	}
	for len(batch) < n && len(s.pending) > 0 {
		take(s.rng.Intn(len(s.pending)))
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, cb := range batch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.deliverOne(ctx, cb)
		}()
	}
	wg.Wait()
}

// subject names what a notification is about: one payment, or one refund.
func subject(cb callback) string {
	if cb.refund != nil {
		return "refund " + cb.refund.OutRefundNo
	}
	return "payment " + cb.trade
}

func (s *seedRun) deliverOne(ctx context.Context, cb callback) {
	if cb.spoiled {
		s.faults.Add("callback_spoiled")
		cb.spoiled = false
		s.requeue(cb)
		return
	}
	if cb.refund != nil {
		s.deliverRefund(ctx, cb)
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
// signal: drain and record) or crash (at a random point, or right after its nth transition
// commits: nothing more reaches the database or Redis, its lock session dies, its row, its
// leases and its claims stay behind).
// passDeadline bounds one simulated pass in real time (seeds take well under a second).
const passDeadline = 20 * time.Second

func (s *seedRun) startPass(mode reconcile.RunMode, crashAfter, interruptAfter time.Duration) {
	proc := s.process()
	runner := s.runner(proc, 1+s.rng.Intn(4))
	atTransition := 0
	if crashAfter == 0 && s.rng.Intn(8) == 0 {
		atTransition = 1 + s.rng.Intn(3)
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		// A deadline, as a CronJob's activeDeadlineSeconds is: the simulated processes share
		// one small pool, and passes that each hold their lock session while waiting for
		// another connection could otherwise wait for each other for ever.
		ctx, cancel := context.WithTimeout(context.Background(), passDeadline)
		defer cancel()
		var once sync.Once
		die := func() {
			once.Do(func() {
				sess := proc.Crash()
				cancel()
				if sess.PID != 0 {
					s.w.terminate(context.Background(), sess.PID)
					proc.Reap()
				}
			})
		}
		crashed := make(chan struct{})
		switch {
		case crashAfter > 0:
			s.faults.Add("process_crash")
			time.AfterFunc(crashAfter, func() {
				defer close(crashed)
				die()
			})
		case interruptAfter > 0:
			s.faults.Add("pass_interrupted")
			time.AfterFunc(interruptAfter, cancel)
			close(crashed)
		default:
			close(crashed)
		}
		if atTransition > 0 {
			proc.CrashAtTransition(atTransition, func() {
				s.faults.Add("process_crash_at_transition")
				die()
			})
		}
		runner.Pass(ctx, s.spec(mode)) //nolint:errcheck // failures are part of the schedule
		<-crashed
	}()
}
