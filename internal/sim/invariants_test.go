package sim_test

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

// dbOrder is an order as the invariants read it back.
type dbOrder struct {
	ID         int64          `db:"id"`
	Platform   string         `db:"platform"`
	OTN        string         `db:"out_trade_no"`
	Status     string         `db:"status"`
	TradeNo    sql.NullString `db:"platform_trade_no"`
	PaidAmount sql.NullInt64  `db:"paid_amount_minor"`
	Amount     int64          `db:"amount_minor"`
	LeaseOwner sql.NullString `db:"lease_owner"`
	// Events, EventOK and PaidEvents count the order's own events (not its refunds'): all,
	// those of its status, and PAID ones.
	Events     int   `db:"events"`
	EventOK    int   `db:"event_ok"`
	PaidEvents int   `db:"paid_events"`
	Outbox     int   `db:"outbox"`
	Refunded   int64 `db:"refunded_minor"`
}

type snapshot struct {
	orders   map[string]dbOrder
	findings map[string]bool // platform/otn/kind, payment findings
	// refundFindings are the refund findings, by platform/out_refund_no/kind.
	refundFindings map[string]bool
	// why is each refund finding's evidence, for a violation's message.
	why     map[string]string
	refunds map[string]dbRefund // by out_refund_no
	// strays are refund events and outbox rows that name no refund.
	strays  int
	dupes   int
	running int
}

// read reads the world back; a connection the faults killed is retried (each of the pool's
// idle connections may be one, and the pool gives out three).
func (s *seedRun) read(ctx context.Context) (snap snapshot, err error) {
	for i := 0; i < 5; i++ {
		if snap, err = s.readOnce(ctx); err == nil {
			return snap, nil
		}
	}
	return snap, err
}

func (s *seedRun) readOnce(ctx context.Context) (snapshot, error) {
	var rows []dbOrder
	err := s.w.db.SelectContext(ctx, &rows, `SELECT o.id, o.platform, o.out_trade_no, o.status, o.platform_trade_no,
			o.paid_amount_minor, o.amount_minor, o.lease_owner,
			o.refunded_minor,
			(SELECT count(*) FROM payment_events e WHERE e.order_id = o.id AND e.refund_id IS NULL) AS events,
			(SELECT count(*) FROM payment_events e WHERE e.order_id = o.id AND e.refund_id IS NULL AND e.event_type = o.status) AS event_ok,
			(SELECT count(*) FROM payment_events e WHERE e.order_id = o.id AND e.refund_id IS NULL AND e.event_type = 'PAID') AS paid_events,
			(SELECT count(*) FROM fulfillment_outbox f WHERE f.order_id = o.id AND f.kind = 'order.paid') AS outbox
		FROM payment_orders o`)
	if err != nil {
		return snapshot{}, fmt.Errorf("read orders: %w", err)
	}
	snap := snapshot{orders: map[string]dbOrder{}, findings: map[string]bool{}, refundFindings: map[string]bool{},
		why: map[string]string{}}
	for _, r := range rows {
		snap.orders[r.Platform+"/"+r.OTN] = r
	}
	if err := s.readFindings(ctx, &snap); err != nil {
		return snapshot{}, err
	}
	if err := s.readRefunds(ctx, &snap); err != nil {
		return snapshot{}, err
	}
	err = s.w.db.GetContext(ctx, &snap.running, `SELECT count(*) FROM reconcile_runs WHERE status = 'running'`)
	return snap, err
}

// readFindings reads the findings: a payment's by platform/otn/kind, a refund's by
// platform/out_refund_no/kind (one order's refunds each have their own).
func (s *seedRun) readFindings(ctx context.Context, snap *snapshot) error {
	var fs []struct {
		Platform string `db:"platform"`
		OTN      string `db:"out_trade_no"`
		Kind     string `db:"kind"`
		Refund   string `db:"out_refund_no"`
		Why      string `db:"why"`
	}
	if err := s.w.db.SelectContext(ctx, &fs, `SELECT platform, out_trade_no, kind, out_refund_no,
		format('local %s, platform %s, seen %s times, %s', local_status, platform_status, seen_count, detail) AS why
		FROM reconcile_mismatches`); err != nil {
		return fmt.Errorf("read findings: %w", err)
	}
	for _, f := range fs {
		m, k := snap.findings, f.Platform+"/"+f.OTN+"/"+f.Kind
		if f.Refund != "" {
			m, k = snap.refundFindings, f.Platform+"/"+f.Refund+"/"+f.Kind
			snap.why[k] = f.Why
		}
		if m[k] {
			snap.dupes++
		}
		m[k] = true
	}
	return nil
}

func (snap snapshot) finding(o order, kind reconcile.MismatchKind) bool {
	return snap.findings[string(o.pl.Platform())+"/"+o.otn+"/"+string(kind)]
}

// safety are the invariants that hold at every moment: at most one legal transition per
// order with its one event, outbox rows only for PAID, no closing of anything the platform
// took money for, no finding twice.
func (s *seedRun) safety(snap snapshot) []string {
	var v []string
	for _, o := range s.orders {
		r, ok := snap.orders[string(o.pl.Platform())+"/"+o.otn]
		if !ok {
			v = append(v, fmt.Sprintf("%s: order missing", o.otn))
			continue
		}
		truth := o.pl.Truth(o.otn)
		wantEvents, wantOutbox := 1, 0
		switch r.Status {
		case "PENDING":
			wantEvents = 0
		case "PAID", "REFUNDED":
			// A REFUNDED order was PAID first: its PAID event and outbox row, and the
			// REFUNDED event its last refund's transition wrote (invariant 13).
			wantOutbox = 1
			if r.Status == "REFUNDED" {
				wantEvents = 2
			}
			if r.PaidEvents != 1 {
				v = append(v, fmt.Sprintf("%s: %s with %d PAID events", o.otn, r.Status, r.PaidEvents))
			}
			if !slices.Contains(truth.Payments, r.TradeNo.String) || r.PaidAmount.Int64 != o.amount {
				v = append(v, fmt.Sprintf("%s: %s with trade %q amount %d, platform payments %v amount %d", o.otn, r.Status, r.TradeNo.String, r.PaidAmount.Int64, truth.Payments, o.amount))
			}
		case "CLOSED":
			if truth.EverPaid {
				v = append(v, fmt.Sprintf("%s: CLOSED though the buyer paid (%v, platform %s)", o.otn, truth.Payments, truth.State))
			}
			if truth.State == reconcile.StateOpen || (truth.State == reconcile.StateNotFound && s.now().Before(o.expiry())) {
				v = append(v, fmt.Sprintf("%s: CLOSED while the platform says %s and it expires at %s (now %s)", o.otn, truth.State, o.expiry().Format(time.RFC3339), s.now().Format(time.RFC3339)))
			}
		default:
			v = append(v, fmt.Sprintf("%s: illegal status %s", o.otn, r.Status))
		}
		if r.Events != wantEvents || (wantEvents == 1 && r.EventOK != 1) {
			v = append(v, fmt.Sprintf("%s: %s with %d events (%d of its status)", o.otn, r.Status, r.Events, r.EventOK))
		}
		if r.Outbox != wantOutbox {
			v = append(v, fmt.Sprintf("%s: %s with %d outbox rows", o.otn, r.Status, r.Outbox))
		}
	}
	if snap.dupes > 0 {
		v = append(v, fmt.Sprintf("%d duplicated finding rows", snap.dupes))
	}
	for k := range snap.findings {
		if kind := k[strings.LastIndex(k, "/")+1:]; !explained[reconcile.MismatchKind(kind)] {
			v = append(v, fmt.Sprintf("finding %s, which nothing at the platform explains", k))
		}
	}
	return append(v, s.refundSafety(snap)...)
}

// explained are the finding kinds the simulated platform can cause: a wrong amount, a second
// payment, a refund. Every order is ours and of the right merchant, nothing closed is paid
// (safety), and a bill lists every payment of its day, so anything else is a false finding.
var explained = map[reconcile.MismatchKind]bool{
	reconcile.MismatchAmount: true, reconcile.MismatchDuplicatePayment: true, reconcile.MismatchRefundedAtPlatform: true,
}

// converged: after the faults stop and clean passes run, every order agrees with the
// platform's final truth (or a finding says why not), no lease and no running row is left.
func (s *seedRun) converged(snap snapshot) []string {
	var v []string
	for _, o := range s.orders {
		r := snap.orders[string(o.pl.Platform())+"/"+o.otn]
		t := o.pl.Truth(o.otn)
		expired := !s.now().Before(o.expiry())
		bad := false
		switch t.State {
		case reconcile.StatePaid:
			if t.Amount != o.amount {
				// The platform reports its first payment, of the wrong amount: a finding. A
				// second payment of the right amount may have paid the order meanwhile.
				bad = r.Status == "CLOSED" || !snap.finding(o, reconcile.MismatchAmount)
			} else {
				bad = (r.Status != "PAID" && r.Status != "REFUNDED") || (len(t.Payments) > 1 && !snap.finding(o, reconcile.MismatchDuplicatePayment))
			}
		case reconcile.StateRefunded:
			// A finding, unless the order's own refunds (landed, in flight or abnormal)
			// account for the platform's word, as they do when the app's refund is under way.
			bad = r.Status == "CLOSED" || (!snap.finding(o, reconcile.MismatchRefundedAtPlatform) && !snap.liveRefunds(o))
		case reconcile.StateClosed:
			bad = r.Status != "CLOSED"
		case reconcile.StateOpen:
			bad = r.Status != "PENDING" || expired
		case reconcile.StateNotFound:
			bad = (r.Status == "PENDING") == expired
		}
		if bad {
			v = append(v, fmt.Sprintf("%s: local %s, platform %s (payments %v, amount %d of %d, expired %v) after clean passes",
				o.otn, r.Status, t.State, t.Payments, t.Amount, o.amount, expired))
		}
		if r.LeaseOwner.Valid {
			v = append(v, fmt.Sprintf("%s: still leased to %s after every process ended", o.otn, r.LeaseOwner.String))
		}
	}
	if snap.running > 0 {
		v = append(v, fmt.Sprintf("%d runs still 'running' after every process ended and clean passes ran", snap.running))
	}
	return append(v, s.refundsConverged(snap)...)
}

// durable: every acknowledged callback's outcome is in the database.
func (s *seedRun) durable(snap snapshot) []string {
	var v []string
	for _, a := range s.acks {
		if a.cb.refund != nil {
			v = append(v, refundDurable(snap, a)...)
			continue
		}
		o := order{pl: a.cb.pl, otn: a.cb.otn}
		r := snap.orders[string(o.pl.Platform())+"/"+o.otn]
		switch a.outcome {
		case reconcile.OutcomeApplied, reconcile.OutcomeDuplicate:
			if (r.Status != "PAID" && r.Status != "REFUNDED") || r.TradeNo.String != a.cb.trade {
				v = append(v, fmt.Sprintf("%s: callback %s acknowledged as %s, order %s with trade %q", o.otn, a.cb.trade, a.outcome, r.Status, r.TradeNo.String))
			}
		case reconcile.OutcomeMismatch:
			if !snap.finding(o, a.mismatch) {
				v = append(v, fmt.Sprintf("%s: callback %s acknowledged with finding %s, which is not recorded", o.otn, a.cb.trade, a.mismatch))
			}
		default:
			if r.Status == "PENDING" {
				v = append(v, fmt.Sprintf("%s: callback %s acknowledged as %s, order still PENDING", o.otn, a.cb.trade, a.outcome))
			}
		}
	}
	return v
}

// claimsWithinLease: no claim key is PROCESSING without an expiry within its lease.
func (s *seedRun) claimsWithinLease(ctx context.Context) []string {
	var v []string
	keys, err := s.w.keys(ctx)
	if err != nil {
		return []string{fmt.Sprintf("list claim keys: %v", err)}
	}
	for _, k := range keys {
		if val, err := s.w.redis.Client.Get(ctx, k).Result(); err == nil && val == "PROCESSING" {
			if ttl, err := s.w.redis.Client.PTTL(ctx, k).Result(); err == nil && (ttl < 0 || ttl > claimLease) {
				v = append(v, fmt.Sprintf("claim %s PROCESSING with %s left (lease %s)", k, ttl, claimLease))
			}
		}
	}
	return v
}
