package sim_test

import (
	"context"
	"database/sql"
	"fmt"
	"strings"

	"github.com/payrecon/payrecon/internal/sim"
	"github.com/payrecon/payrecon/reconcile"
)

// dbRefund is a refund as the invariants read it back, with its events (types in the order
// they were written) and its outbox rows.
type dbRefund struct {
	ID         int64          `db:"id"`
	OrderID    int64          `db:"order_id"`
	Platform   string         `db:"platform"`
	OTN        string         `db:"out_trade_no"`
	No         string         `db:"out_refund_no"`
	Amount     int64          `db:"amount_minor"`
	Status     string         `db:"status"`
	LeaseOwner sql.NullString `db:"lease_owner"`
	Events     string         `db:"events"`
	// Foreign counts its events filed under another order; Outbox its refund.succeeded rows
	// whose payload names it, OutboxAll all its outbox rows.
	Foreign   int `db:"foreign_events"`
	Outbox    int `db:"outbox"`
	OutboxAll int `db:"outbox_all"`
}

func (s *seedRun) readRefunds(ctx context.Context, snap *snapshot) error {
	var rows []dbRefund
	err := s.w.db.SelectContext(ctx, &rows, `SELECT r.id, r.order_id, r.platform, r.out_trade_no, r.out_refund_no,
			r.amount_minor, r.status, r.lease_owner,
			COALESCE((SELECT string_agg(e.event_type, ',' ORDER BY e.id) FROM payment_events e WHERE e.refund_id = r.id), '') AS events,
			(SELECT count(*) FROM payment_events e WHERE e.refund_id = r.id AND e.order_id <> r.order_id) AS foreign_events,
			(SELECT count(*) FROM fulfillment_outbox f WHERE f.refund_id = r.id AND f.order_id = r.order_id
				AND f.kind = 'refund.succeeded' AND f.payload->>'refund_id' = r.id::text) AS outbox,
			(SELECT count(*) FROM fulfillment_outbox f WHERE f.refund_id = r.id) AS outbox_all
		FROM payment_refunds r`)
	if err != nil {
		return fmt.Errorf("read refunds: %w", err)
	}
	snap.refunds = make(map[string]dbRefund, len(rows))
	for _, r := range rows {
		snap.refunds[r.No] = r
	}
	err = s.w.db.GetContext(ctx, &snap.strays, `SELECT
		(SELECT count(*) FROM payment_events WHERE refund_id IS NULL AND event_type IN ('REFUND_SUCCESS', 'REFUND_CLOSED', 'REFUND_ABNORMAL'))
		+ (SELECT count(*) FROM fulfillment_outbox WHERE refund_id IS NULL AND kind = 'refund.succeeded')`)
	if err != nil {
		return fmt.Errorf("read stray refund rows: %w", err)
	}
	return nil
}

// refundSafety are the refund invariants that hold at every moment (12-14, 16).
func (s *seedRun) refundSafety(snap snapshot) []string {
	var v []string
	for _, r := range snap.refunds {
		v = append(v, refundMoves(r)...)
		v = append(v, refundRows(r)...)
	}
	if snap.strays > 0 {
		v = append(v, fmt.Sprintf("%d refund events or refund.succeeded outbox rows name no refund", snap.strays))
	}
	v = append(v, refundMoney(snap)...)
	return append(v, s.refundFindingsExplained(snap)...)
}

// refundMoves (invariant 12): a refund moves at most once into each state and only forward,
// so its events, in the order written, walk the state machine from PROCESSING to its status.
func refundMoves(r dbRefund) []string {
	at := reconcile.RefundProcessing
	seen := map[reconcile.RefundStatus]bool{}
	if r.Events != "" {
		for _, e := range strings.Split(r.Events, ",") {
			to := reconcile.RefundStatus(strings.TrimPrefix(e, "REFUND_"))
			if !strings.HasPrefix(e, "REFUND_") || seen[to] || !reconcile.CanRefundTransition(at, to) {
				return []string{fmt.Sprintf("refund %s (%s): events %s are not one walk of the state machine", r.No, r.Status, r.Events)}
			}
			seen[to], at = true, to
		}
	}
	if string(at) != r.Status {
		return []string{fmt.Sprintf("refund %s is %s, its events %q end at %s", r.No, r.Status, r.Events, at)}
	}
	if r.Foreign > 0 {
		return []string{fmt.Sprintf("refund %s: %d events filed under another order", r.No, r.Foreign)}
	}
	return nil
}

// refundRows (invariant 14): a SUCCESS refund has one REFUND_SUCCESS event (refundMoves) and
// exactly one refund.succeeded outbox row carrying its refund_id; any other refund none.
func refundRows(r dbRefund) []string {
	want := 0
	if r.Status == string(reconcile.RefundSuccess) {
		want = 1
	}
	if r.Outbox != want || r.OutboxAll != want {
		return []string{fmt.Sprintf("refund %s (%s): %d outbox rows (%d refund.succeeded naming it), want %d", r.No, r.Status, r.OutboxAll, r.Outbox, want)}
	}
	return nil
}

// refundMoney (invariant 13): an order's refunded_minor is the sum of its SUCCESS refunds,
// never more than was paid, and the order is REFUNDED exactly when it equals a paid amount
// above zero (its one REFUNDED event: safety's event counts).
func refundMoney(snap snapshot) []string {
	sums := map[string]int64{}
	for _, r := range snap.refunds {
		if r.Status == string(reconcile.RefundSuccess) {
			sums[r.Platform+"/"+r.OTN] += r.Amount
		}
	}
	var v []string
	for k, o := range snap.orders {
		paid := o.PaidAmount.Int64
		full := paid > 0 && o.Refunded == paid
		if o.Refunded != sums[k] || o.Refunded > paid || full != (o.Status == "REFUNDED") {
			v = append(v, fmt.Sprintf("%s: %s, refunded_minor %d, its SUCCESS refunds sum to %d, paid %d", o.OTN, o.Status, o.Refunded, sums[k], paid))
		}
	}
	return v
}

// liveRefunds says whether the order has a refund here that is not CLOSED: what explains
// a platform that reports its trade refunded (reconcile's refundedAtPlatform).
func (snap snapshot) liveRefunds(o order) bool {
	for _, r := range snap.refunds {
		if r.Platform == string(o.pl.Platform()) && r.OTN == o.otn && r.Status != string(reconcile.RefundClosed) {
			return true
		}
	}
	return false
}

// refundsByNo indexes the refunds the simulation made.
func (s *seedRun) refundsByNo() map[string]*simRefund {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]*simRefund, len(s.refunds))
	for _, r := range s.refunds {
		out[r.no] = r
	}
	return out
}

// fits says whether the order, as read, could still take amount back: what a refund that
// succeeded at the platform but not here must fail, to be an OVER_REFUNDED one.
func fits(snap snapshot, r dbRefund) bool {
	o := snap.orders[r.Platform+"/"+r.OTN]
	return o.Status == "PAID" && o.Refunded+r.Amount <= o.PaidAmount.Int64
}

// refundFindingsExplained (invariant 16): every refund finding is one the platform's truth
// explains. UNKNOWN_REFUND: a refund made in the portal that took money back; OVER_REFUNDED:
// a refund the platform paid back that our books still hold unsettled and could not take;
// REFUND_ABNORMAL: a refund that was ABNORMAL at the platform; REFUND_NOT_AT_PLATFORM: one
// the platform never got, older than refundTTL. Nothing else (no REFUND_AMOUNT_MISMATCH: the
// platform never changes an amount). A bill's line of a whole-trade refund (statement_test.go)
// is an UNKNOWN_REFUND too, once statements match refund lines.
func (s *seedRun) refundFindingsExplained(snap snapshot) []string {
	made := s.refundsByNo()
	var v []string
	for k := range snap.refundFindings {
		parts := strings.SplitN(k, "/", 3)
		sr, kind := made[parts[1]], reconcile.MismatchKind(parts[2])
		if sr == nil && s.wholeTradeRefund(parts[1]) && kind == reconcile.MismatchUnknownRefund {
			continue // the bill's line of a whole-trade refund, which no app recorded
		}
		if sr == nil || !s.explainsRefund(snap, sr, kind) {
			v = append(v, fmt.Sprintf("refund finding %s, which nothing at the platform explains (%s)", k, snap.why[k]))
		}
	}
	return v
}

// wholeTradeRefund says whether no is the bill's number of a whole-trade refund the
// platform made (sim.Platform.Refund).
func (s *seedRun) wholeTradeRefund(no string) bool {
	for _, o := range s.orders {
		if wholeTradeRefundNo(o.otn) == no {
			return o.pl.Truth(o.otn).State == reconcile.StateRefunded
		}
	}
	return false
}

func (s *seedRun) explainsRefund(snap snapshot, sr *simRefund, kind reconcile.MismatchKind) bool {
	t := sr.o.pl.RefundTruth(sr.no)
	local, have := snap.refunds[sr.no]
	switch kind {
	case reconcile.MismatchUnknownRefund:
		return sr.portal && (t.State == reconcile.RefundStateSuccess || t.WasAbnormal)
	case reconcile.MismatchOverRefunded:
		return have && t.State == reconcile.RefundStateSuccess && local.Status != string(reconcile.RefundSuccess) && !fits(snap, local)
	case reconcile.MismatchRefundAbnormal:
		return t.WasAbnormal
	case reconcile.MismatchRefundNotAtPlatform:
		return !sr.reached && s.now().Sub(sr.createdAt) >= refundTTL
	}
	return false
}

// refundsConverged (invariant 15): after the clean rounds every refund agrees with the
// platform's truth, or carries the finding that says why not, and none is leased.
func (s *seedRun) refundsConverged(snap snapshot) []string {
	made := s.refundsByNo()
	var v []string
	for _, r := range snap.refunds {
		if made[r.No] == nil {
			v = append(v, fmt.Sprintf("refund %s (%s) was never made", r.No, r.Status))
		}
		if r.LeaseOwner.Valid {
			v = append(v, fmt.Sprintf("refund %s: still leased to %s after every process ended", r.No, r.LeaseOwner.String))
		}
	}
	for _, sr := range made {
		if msg := s.refundConverged(snap, sr); msg != "" {
			v = append(v, fmt.Sprintf("refund %s of %s (%d, platform %s): %s after clean passes", sr.no, sr.o.otn, sr.amount, sr.o.pl.RefundTruth(sr.no).State, msg))
		}
	}
	return v
}

// refundConverged says what is wrong with one refund after the clean rounds ("" if nothing).
func (s *seedRun) refundConverged(snap snapshot, sr *simRefund) string {
	t := sr.o.pl.RefundTruth(sr.no)
	finding := func(kind reconcile.MismatchKind) bool {
		return snap.refundFindings[string(sr.o.pl.Platform())+"/"+sr.no+"/"+string(kind)]
	}
	local, have := snap.refunds[sr.no]
	switch {
	case sr.portal:
		if have {
			return "a portal refund is in our books"
		}
		if (t.State == reconcile.RefundStateSuccess || t.WasAbnormal) && !finding(reconcile.MismatchUnknownRefund) {
			return "no UNKNOWN_REFUND finding"
		}
		return ""
	case !have:
		if sr.uncertain {
			return "" // the app's insert failed: maybe it never happened
		}
		return "missing from our books"
	}
	return s.localRefundConverged(snap, sr, t, local, finding)
}

func (s *seedRun) localRefundConverged(snap snapshot, sr *simRefund, t sim.PlatformRefund, local dbRefund, finding func(reconcile.MismatchKind) bool) string {
	status := reconcile.RefundStatus(local.Status)
	switch t.State {
	case reconcile.RefundStateSuccess:
		if status == reconcile.RefundSuccess {
			return ""
		}
		if !finding(reconcile.MismatchOverRefunded) || fits(snap, local) || status == reconcile.RefundClosed {
			return fmt.Sprintf("local %s without a justified OVER_REFUNDED finding", status)
		}
	case reconcile.RefundStateClosed, reconcile.RefundStateProcessing:
		if want := reconcile.RefundStatus(t.State); status != want {
			return fmt.Sprintf("local %s, want %s", status, want)
		}
	case reconcile.RefundStateAbnormal:
		if status != reconcile.RefundAbnormal || !finding(reconcile.MismatchRefundAbnormal) {
			return fmt.Sprintf("local %s, want ABNORMAL with its REFUND_ABNORMAL finding", status)
		}
	case reconcile.RefundStateNotFound:
		if status != reconcile.RefundProcessing {
			return fmt.Sprintf("never at the platform, local %s", status)
		}
		// The last clean round's backfill checked it at lastClean or later.
		if s.lastClean.Sub(sr.createdAt) >= refundTTL && !finding(reconcile.MismatchRefundNotAtPlatform) {
			return fmt.Sprintf("never at the platform, %s old, no REFUND_NOT_AT_PLATFORM finding", s.lastClean.Sub(sr.createdAt).Round(1e9))
		}
	}
	return ""
}

// refundDurable (invariant 7, for refunds): an acknowledged refund notification's outcome is
// in the database.
func refundDurable(snap snapshot, a ack) []string {
	res := a.cb.refund
	local, have := snap.refunds[res.OutRefundNo]
	to := reconcile.RefundStatus(res.State)
	// An ABNORMAL outcome is durable in ABNORMAL or past it (SUCCESS, CLOSED): applied, or
	// late news of a refund that had already moved on.
	reached := have && (local.Status == string(to) || (to == reconcile.RefundAbnormal && local.Status != string(reconcile.RefundProcessing)))
	ok := true
	switch a.outcome {
	case reconcile.OutcomeApplied, reconcile.OutcomeDuplicate:
		ok = reached
	case reconcile.OutcomeMismatch:
		ok = snap.refundFindings[string(res.Platform)+"/"+res.OutRefundNo+"/"+string(a.mismatch)]
	}
	if !ok {
		return []string{fmt.Sprintf("refund %s: %s notification acknowledged as %s %s, refund here %q (have %v)", res.OutRefundNo, res.State, a.outcome, a.mismatch, local.Status, have)}
	}
	return nil
}

// unacknowledged are the notifications the platform is still sending. One may stay for good:
// Alipay's running total of a refund our books could not take (an over-refund), which never
// splits onto it; the platform gives up on it after a day of retries.
func (s *seedRun) unacknowledged(snap snapshot) (stuck []callback, given int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, cb := range s.pending {
		if r := cb.refund; r != nil && r.AmountMinor == 0 && r.RefundedTotalMinor > 0 {
			if local, ok := snap.refunds[r.OutRefundNo]; ok && local.Status != string(reconcile.RefundSuccess) {
				given++
				continue
			}
		}
		stuck = append(stuck, cb)
	}
	return stuck, given
}

// tallyRefunds counts what the seed left: refunds by local status, orders fully refunded,
// refund findings by kind, and refund notifications acknowledged by kind and outcome.
func (s *seedRun) tallyRefunds(snap snapshot) {
	for _, r := range snap.refunds {
		s.seen.Add("refund_" + r.Status)
	}
	for _, o := range snap.orders {
		if o.Status == "REFUNDED" {
			s.seen.Add("order_REFUNDED")
		}
	}
	for k := range snap.refundFindings {
		s.seen.Add("finding_" + k[strings.LastIndex(k, "/")+1:])
	}
	for _, a := range s.acks {
		if r := a.cb.refund; r != nil {
			kind := "notify_amount_"
			if r.AmountMinor == 0 {
				kind = "notify_running_total_"
			}
			s.seen.Add(kind + string(a.outcome))
		}
	}
}
