package sim_test

import (
	"context"
	"fmt"
	"time"

	"github.com/payrecon/payrecon/internal/sim"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
)

// simRefund is one refund as the simulation made it: by the merchant's app (recorded here
// PROCESSING first, then asked of the platform) or in the merchant portal (at the platform
// only). The platform's truth about it is sim.Platform's (RefundTruth).
type simRefund struct {
	o      order
	no     string // out_refund_no
	amount int64
	portal bool
	// reached: the app's call got to the platform. A refund that never did is one the
	// platform does not know (REFUND_NOT_AT_PLATFORM once older than refundTTL).
	reached bool
	// uncertain: the app's insert returned an error, so the row may or may not exist (an
	// answer lost after the commit); the app took it as failed and never called the platform.
	uncertain bool
	// plan is what the platform still has to move it through; hold is how many settling
	// steps it stays PROCESSING first; stuck: it stays where the schedule left it (still
	// PROCESSING or ABNORMAL when the seed ends).
	plan  []reconcile.RefundState
	hold  int
	stuck bool
	// createdAt is the app's record's created_at (simulated clock).
	createdAt time.Time
}

// refundKind is what the merchant's app asks back in one refund.
type refundKind int

const (
	refundPartial   refundKind = iota // part of what is left
	refundRemainder                   // exactly what is left: the order ends fully refunded
	refundBeyond                      // more than is left: the app's mistake, OVER_REFUNDED
)

// refundDraw is everything random about one app refund, drawn before the app looks at the
// order, so the seed's random sequence does not depend on what the database said.
type refundDraw struct {
	kind     refundKind
	fraction float64
	extra    int64
	lost     bool
	plan     []reconcile.RefundState
	hold     int
	stuck    bool
}

// refundStep is one refund event of the schedule: the merchant's app records refunds, the
// platform settles some, or someone refunds in the merchant portal.
func (s *seedRun) refundStep(ctx context.Context, r int) {
	switch {
	case r < 12:
		s.appRefunds(ctx)
	case r < 22:
		s.settleRefunds(1+s.rng.Intn(3), false)
	default:
		s.portalRefund()
	}
}

// refundable picks an order the buyer paid the right amount for at the platform (nil when
// there is none), whatever our books say of it: the merchant portal refunds such orders.
func (s *seedRun) refundable() *order {
	var paid []int
	for i, o := range s.orders {
		if t := o.pl.Truth(o.otn); t.State == reconcile.StatePaid && t.Amount == o.amount {
			paid = append(paid, i)
		}
	}
	if len(paid) == 0 {
		return nil
	}
	return &s.orders[paid[s.rng.Intn(len(paid))]]
}

func (s *seedRun) drawRefund() refundDraw {
	d := refundDraw{fraction: s.rng.Float64(), extra: 1 + s.rng.Int63n(500), lost: s.rng.Intn(8) == 0, stuck: s.rng.Intn(12) == 0}
	switch r := s.rng.Intn(10); {
	case r < 5:
		d.kind = refundPartial
	case r < 8:
		d.kind = refundRemainder
	default:
		d.kind = refundBeyond
	}
	switch r := s.rng.Intn(10); {
	case r < 4:
		d.plan = []reconcile.RefundState{reconcile.RefundStateSuccess}
	case r < 6:
		d.plan = []reconcile.RefundState{reconcile.RefundStateClosed}
	case r < 8:
		d.plan = []reconcile.RefundState{reconcile.RefundStateAbnormal, reconcile.RefundStateSuccess}
	case r < 9:
		d.plan = []reconcile.RefundState{reconcile.RefundStateAbnormal, reconcile.RefundStateClosed}
	default: // stuck in PROCESSING for a while
		d.plan, d.hold = []reconcile.RefundState{reconcile.RefundStateSuccess}, 1+s.rng.Intn(3)
	}
	return d
}

// amount is what the app asks back, given what it has asked of this order before: part of
// the rest, the exact rest, or (its mistake) more than is left.
func (d refundDraw) amount(paid, asked int64) int64 {
	left := paid - asked
	switch {
	case d.kind == refundPartial && left > 1:
		return 1 + int64(d.fraction*float64(left-1))
	case d.kind != refundBeyond && left > 0:
		return left
	}
	return max(left, 0) + d.extra
}

// appRefunds: the merchant's app refunds one to three times an order its own books say is
// paid (or already refunded in full: another refund is then its mistake). Each refund is
// recorded PROCESSING in our books first, then asked of the platform; 1 in 8 calls never
// gets there.
func (s *seedRun) appRefunds(ctx context.Context) {
	pick := s.rng.Float64()
	draws := make([]refundDraw, 1+s.rng.Intn(3))
	for i := range draws {
		draws[i] = s.drawRefund()
	}
	var paid []struct {
		ID   int64  `db:"id"`
		OTN  string `db:"out_trade_no"`
		Paid int64  `db:"paid_amount_minor"`
	}
	// Where the app looks: the faults (a killed session, a 1 ms statement timeout) may fail it.
	if s.w.db.SelectContext(ctx, &paid, `SELECT id, out_trade_no, paid_amount_minor FROM payment_orders
		WHERE status IN ('PAID', 'REFUNDED') ORDER BY id`) != nil || len(paid) == 0 {
		return
	}
	p := paid[int(pick*float64(len(paid)))]
	o := s.orderByOTN(p.OTN)
	store := repoStore(s.w)
	for _, d := range draws {
		if o.pl.Platform() == reconcile.Alipay && d.plan[0] == reconcile.RefundStateAbnormal {
			d.plan = d.plan[1:] // ABNORMAL is WeChat Pay's alone
		}
		if err := s.appRefund(ctx, store, o, p.ID, p.Paid, d); err != nil {
			return // the app's call failed; it gives up for now
		}
	}
}

func (s *seedRun) orderByOTN(otn string) order {
	for _, o := range s.orders {
		if o.otn == otn {
			return o
		}
	}
	panic("sim: no order " + otn)
}

func (s *seedRun) appRefund(ctx context.Context, store *postgres.Store, o order, orderID, paid int64, d refundDraw) error {
	s.mu.Lock()
	amount := d.amount(paid, s.asked[o.otn])
	no := fmt.Sprintf("R%d-%d", s.seed, len(s.refunds)+1)
	s.mu.Unlock()
	created := s.now().Truncate(time.Microsecond)
	if _, err := store.InsertRefund(ctx, postgres.NewRefund{OrderID: orderID, OutRefundNo: no, AmountMinor: amount, CreatedAt: created}); err != nil {
		s.mu.Lock()
		s.refunds = append(s.refunds, &simRefund{o: o, no: no, amount: amount, uncertain: true, createdAt: created})
		s.mu.Unlock()
		return err
	}
	r := &simRefund{o: o, no: no, amount: amount, plan: d.plan, hold: d.hold, stuck: d.stuck, createdAt: created}
	switch {
	case d.lost:
		s.faults.Add("refund_never_reached_platform")
	case o.pl.AddRefund(o.otn, no, wechatRefundID(o.pl, no), amount, false):
		r.reached = true
	default:
		// The platform refunded the whole trade already (platformChange) and refuses: to it
		// this refund does not exist, as one that never reached it.
		s.faults.Add("refund_refused_by_platform")
	}
	s.faults.Add([]string{"refund_partial", "refund_remainder", "refund_beyond_paid"}[d.kind])
	s.mu.Lock()
	defer s.mu.Unlock()
	s.asked[o.otn] += amount
	s.refunds = append(s.refunds, r)
	return nil
}

// wechatRefundID is WeChat Pay's own number for a refund; Alipay has none.
func wechatRefundID(pl *sim.Platform, no string) string {
	if pl.Platform() == reconcile.WechatPay {
		return "50" + no
	}
	return ""
}

// portalRefund: someone refunds a paid order in the merchant portal; the app never hears of
// it. It succeeds at once (1 in 5 closes), and its notification comes like any other.
func (s *seedRun) portalRefund() {
	o := s.refundable()
	if o == nil {
		return
	}
	amount := 1 + s.rng.Int63n(o.amount)
	to := reconcile.RefundStateSuccess
	if s.rng.Intn(5) == 0 {
		to = reconcile.RefundStateClosed
	}
	s.mu.Lock()
	no := fmt.Sprintf("P%d-%d", s.seed, len(s.refunds)+1)
	s.mu.Unlock()
	if !o.pl.AddRefund(o.otn, no, wechatRefundID(o.pl, no), amount, true) {
		return
	}
	s.faults.Add("refund_in_portal")
	s.mu.Lock()
	s.refunds = append(s.refunds, &simRefund{o: *o, no: no, amount: amount, portal: true, reached: true})
	s.mu.Unlock()
	s.settled(o.pl, no, to)
}

// settleRefunds moves up to n refunds the platform has one step along their plans (all:
// every refund that is not stuck, to the end of its plan: the seed is over).
func (s *seedRun) settleRefunds(n int, all bool) {
	s.mu.Lock()
	var open []*simRefund
	for _, r := range s.refunds {
		if r.reached && len(r.plan) > 0 && !(all && r.stuck) {
			open = append(open, r)
		}
	}
	s.mu.Unlock()
	if all {
		for _, r := range open {
			for len(r.plan) > 0 {
				s.settleOne(r)
			}
		}
		return
	}
	for i := 0; i < n && len(open) > 0; i++ {
		j := s.rng.Intn(len(open))
		r := open[j]
		open = append(open[:j], open[j+1:]...)
		if r.hold > 0 {
			r.hold-- // still PROCESSING at the platform
			continue
		}
		if s.settleOne(r) == reconcile.RefundStateAbnormal && s.rng.Intn(2) == 0 {
			// The merchant dealt with the buyer's account at once: both notifications are
			// queued together, and may reach two handlers at the same moment.
			s.settleOne(r)
		}
	}
}

// settleOne moves a refund to the next state of its plan, and says which.
func (s *seedRun) settleOne(r *simRefund) reconcile.RefundState {
	to := r.plan[0]
	r.plan = r.plan[1:]
	s.faults.Add("refund_platform_" + string(to))
	s.settled(r.o.pl, r.no, to)
	return to
}

// settled moves a refund at the platform and queues the platform's notifications of it:
// one to four copies, some spoiled. WeChat Pay notifies every outcome (SUCCESS, CLOSED,
// ABNORMAL) with the refund's own amount; Alipay only a success, and with the trade's running
// total instead (refund_fee: AmountMinor 0), which the apply path can split onto this refund
// only while the trade's earlier refunds have landed here.
func (s *seedRun) settled(pl *sim.Platform, no string, to reconcile.RefundState) {
	at := s.now().Truncate(time.Second)
	pr, ok := pl.SettleRefund(no, to, at)
	if !ok || (pl.Platform() == reconcile.Alipay && to != reconcile.RefundStateSuccess) {
		return
	}
	res := reconcile.RefundResult{Platform: pl.Platform(), MerchantID: pl.MerchantID(), OutTradeNo: pr.OutTradeNo,
		PlatformTradeNo: pl.Truth(pr.OutTradeNo).TradeNo, OutRefundNo: no, PlatformRefundNo: pr.RefundID,
		State: to, RawState: "REFUND." + string(to), AmountMinor: pr.Amount}
	if to == reconcile.RefundStateSuccess {
		res.SucceededAt = at
	}
	if pl.Platform() == reconcile.Alipay {
		res.AmountMinor, res.RefundedTotalMinor, res.RawState = 0, pr.TotalAfter, "REFUND_SUCCESS"
	}
	copies := 1 + s.rng.Intn(4)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := 0; i < copies; i++ {
		c := res
		s.pending = append(s.pending, callback{pl: pl, otn: pr.OutTradeNo, refund: &c, spoiled: s.rng.Intn(8) == 0})
	}
}

// deliverRefund sends one refund notification through the callback service's path; one it
// does not acknowledge (an error, a claim held elsewhere, a running total that does not
// split onto the refund yet) is sent again, as the platform retries.
func (s *seedRun) deliverRefund(ctx context.Context, cb callback) {
	applied, acked, err := s.serve.ApplyRefundCallback(ctx, *cb.refund, 0)
	if err != nil || !acked {
		s.requeue(cb)
		return
	}
	s.mu.Lock()
	s.acks = append(s.acks, ack{cb: cb, outcome: applied.Outcome, mismatch: applied.Mismatch})
	s.mu.Unlock()
}
