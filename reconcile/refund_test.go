package reconcile_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
)

// paidOrder inserts a PAID order (paid in full, nothing refunded) and returns its id.
func (b *bundle) paidOrder(otn, tradeNo string, amount int64) int64 {
	b.t.Helper()
	id := b.order(orderSpec{otn: otn, amount: amount, status: reconcile.StatusPaid, tradeNo: tradeNo})
	b.db.MustExec(`UPDATE payment_orders SET paid_amount_minor = amount_minor, paid_at = now() WHERE id = $1`, id)
	return id
}

// refund records a PROCESSING refund created ago and returns its id.
func (b *bundle) refund(orderID int64, outRefundNo string, amount int64, ago time.Duration) int64 {
	b.t.Helper()
	id, err := b.store.InsertRefund(context.Background(), postgres.NewRefund{OrderID: orderID, OutRefundNo: outRefundNo,
		AmountMinor: amount, CreatedAt: time.Now().Add(-ago)})
	if err != nil {
		b.t.Fatal(err)
	}
	return id
}

// refundResult is a verified refund answer for the default Alipay merchant.
func refundResult(otn, tradeNo, outRefundNo string, amount int64, st reconcile.RefundState, src reconcile.Source) reconcile.RefundResult {
	return reconcile.RefundResult{Platform: reconcile.Alipay, MerchantID: "2021000000000001", OutTradeNo: otn,
		PlatformTradeNo: tradeNo, OutRefundNo: outRefundNo, State: st, RawState: string(st), AmountMinor: amount,
		SucceededAt: time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC), Source: src, RawDigest: "r3fund"}
}

type refundRow struct {
	Status   string `db:"status"`
	Refunded int64  `db:"refunded_minor"`
	Order    string `db:"order_status"`
}

func (b *bundle) refundState(refundID int64) refundRow {
	b.t.Helper()
	var r refundRow
	if err := b.db.Get(&r, `SELECT r.status, o.refunded_minor, o.status AS order_status
		FROM payment_refunds r JOIN payment_orders o ON o.id = r.order_id WHERE r.id = $1`, refundID); err != nil {
		b.t.Fatal(err)
	}
	return r
}

// assertRefundedOnce checks the exactly-once invariants of one succeeded refund: one
// REFUND_SUCCESS event and one refund.succeeded outbox row, both naming the refund, and the
// order's refunded_minor equal to the sum of its SUCCESS refunds.
func assertRefundedOnce(t *testing.T, b *bundle, orderID, refundID int64) {
	t.Helper()
	if n := b.count(`SELECT count(*) FROM payment_events WHERE refund_id = $1 AND event_type = 'REFUND_SUCCESS'`, refundID); n != 1 {
		t.Fatalf("%d REFUND_SUCCESS events for refund %d, want 1", n, refundID)
	}
	if n := b.count(`SELECT count(*) FROM payment_events WHERE refund_id = $1`, refundID); n != 1 {
		t.Fatalf("%d events for refund %d, want 1", n, refundID)
	}
	if n := b.count(`SELECT count(*) FROM fulfillment_outbox WHERE refund_id = $1 AND kind = 'refund.succeeded'
		AND (payload->>'refund_id')::bigint = $1`, refundID); n != 1 {
		t.Fatalf("%d refund.succeeded outbox rows for refund %d, want 1", n, refundID)
	}
	if n := b.count(`SELECT count(*) FROM payment_orders o WHERE o.id = $1 AND o.refunded_minor =
		(SELECT COALESCE(sum(amount_minor), 0) FROM payment_refunds WHERE order_id = o.id AND status = 'SUCCESS')
		AND o.refunded_minor <= o.paid_amount_minor`, orderID); n != 1 {
		t.Fatalf("order %d: refunded_minor is not the sum of its SUCCESS refunds", orderID)
	}
}

func applyRefundsConcurrently(t *testing.T, a *reconcile.Applier, r func(i int) reconcile.RefundResult, n int) map[reconcile.Outcome]int {
	t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		got   = map[reconcile.Outcome]int{}
		errs  []error
		start = make(chan struct{})
	)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := a.ApplyRefundResult(context.Background(), r(i), reconcile.ApplyOptions{})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			got[res.Outcome]++
		}()
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d refund applies failed, first: %v", len(errs), n, errs[0])
	}
	return got
}

// TestConcurrentRefundDeliveryAppliesOnce: callbacks, passes and bills racing on one refund's
// success, with Redis, without it and with it down: one transition, one event, one outbox
// row; the order stays PAID (partly refunded) with refunded_minor the refund's amount.
func TestConcurrentRefundDeliveryAppliesOnce(t *testing.T) {
	t.Parallel()
	for _, mode := range []claimMode{withRedis, dbOnly, redisDown} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			b := setup(t, mode)
			oid := b.paidOrder("RF-48", "T-RF48", 10000)
			rid := b.refund(oid, "RF-48-1", 2500, time.Minute)
			sources := []reconcile.Source{reconcile.SourceNotify, reconcile.SourceReconcile, reconcile.SourceStatement}
			got := applyRefundsConcurrently(t, b.applier, func(i int) reconcile.RefundResult {
				return refundResult("RF-48", "T-RF48", "RF-48-1", 2500, reconcile.RefundStateSuccess, sources[i%3])
			}, 48)
			if got[reconcile.OutcomeApplied] != 1 {
				t.Fatalf("applied %d times, want exactly 1 (outcomes %v)", got[reconcile.OutcomeApplied], got)
			}
			if rest := got[reconcile.OutcomeDuplicate] + got[reconcile.OutcomeUnchanged] + got[reconcile.OutcomeClaimedElsewhere]; rest != 47 {
				t.Fatalf("want the other 47 to be duplicates, unchanged or held claims: %v", got)
			}
			if st := b.refundState(rid); st.Status != "SUCCESS" || st.Refunded != 2500 || st.Order != "PAID" {
				t.Fatalf("after the race: %+v, want SUCCESS, 2500 refunded, order still PAID", st)
			}
			assertRefundedOnce(t, b, oid, rid)
			if mode == withRedis {
				key := b.applier.RefundClaimKey(reconcile.Alipay, "T-RF48", "RF-48-1")
				if v, _ := b.redis.Client.Get(context.Background(), key).Result(); v != "DONE" {
					t.Fatalf("refund claim %s = %q after commit, want DONE", key, v)
				}
			}
		})
	}
}

// TestRefundDuplicateAcrossProcessesAppliesOnce: four processes of 16 goroutines each.
func TestRefundDuplicateAcrossProcessesAppliesOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, withRedis)
	oid := b.paidOrder("RFP-4", "T-RFP4", 8880)
	rid := b.refund(oid, "RFP-4-1", 8880, time.Minute)
	start := time.Now().Add(1500 * time.Millisecond).UnixNano()
	total := map[string]int{}
	for i, out := range startChildren(t, b, 4, "apply-refund", "RFP-4", "T-RFP4", fmt.Sprintf("CHILD_START=%d", start)) {
		for k, v := range out {
			total[k] += v
		}
		_ = i
	}
	if total["applied"] != 1 || total["error"] != 0 || total["duplicate"]+total["claimed_elsewhere"]+total["unchanged"] != 63 {
		t.Fatalf("4 processes x 16 refund applies: %v, want exactly one applied", total)
	}
	// A full refund: the same statement moved the order to REFUNDED, with one REFUNDED event.
	if st := b.refundState(rid); st.Status != "SUCCESS" || st.Refunded != 8880 || st.Order != "REFUNDED" {
		t.Fatalf("after the race: %+v", st)
	}
	if n := b.count(`SELECT count(*) FROM payment_events WHERE order_id = $1 AND event_type = 'REFUNDED' AND refund_id IS NULL`, oid); n != 1 {
		t.Fatalf("%d REFUNDED events, want 1", n)
	}
	assertRefundedOnce(t, b, oid, rid)
}

// startChildren runs n child processes of mode and returns each one's tally.
func startChildren(t *testing.T, b *bundle, n int, mode, otn, tradeNo string, extra ...string) []map[string]int {
	t.Helper()
	type child struct {
		wait func() error
		out  *bufio.Reader
	}
	var children []child
	for range n {
		cmd := childCmd(t, b, mode, otn, tradeNo, time.Minute, extra...)
		pipe, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		children = append(children, child{cmd.Wait, bufio.NewReader(pipe)})
	}
	var outs []map[string]int
	for i, c := range children {
		var tally map[string]int
		if err := json.NewDecoder(c.out).Decode(&tally); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
		if err := c.wait(); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
		outs = append(outs, tally)
	}
	return outs
}

// TestConcurrentRefundsNeverOverRefund: fifteen different refunds of one order, worth more
// than it was paid, all succeeding at the platform at once: exactly as many land as the paid
// amount covers, the rest are OVER_REFUNDED findings, and the order is REFUNDED once.
func TestConcurrentRefundsNeverOverRefund(t *testing.T) {
	t.Parallel()
	b := setup(t, withRedis)
	oid := b.paidOrder("RFO-1", "T-RFO1", 10000)
	for i := range 15 {
		b.refund(oid, fmt.Sprintf("RFO-1-%02d", i), 1000, time.Minute)
	}
	got := applyRefundsConcurrently(t, b.applier, func(i int) reconcile.RefundResult {
		return refundResult("RFO-1", "T-RFO1", fmt.Sprintf("RFO-1-%02d", i%15), 1000, reconcile.RefundStateSuccess, reconcile.SourceReconcile)
	}, 30)
	if got[reconcile.OutcomeApplied] != 10 || got[reconcile.OutcomeMismatch] < 5 {
		t.Fatalf("outcomes %v, want 10 applied and the other refunds OVER_REFUNDED", got)
	}
	if n := b.count(`SELECT count(*) FROM payment_refunds WHERE order_id = $1 AND status = 'SUCCESS'`, oid); n != 10 {
		t.Fatalf("%d SUCCESS refunds, want 10", n)
	}
	if n := b.count(`SELECT count(*) FROM reconcile_mismatches WHERE order_id = $1 AND kind = 'OVER_REFUNDED'`, oid); n != 5 {
		t.Fatalf("%d OVER_REFUNDED findings, want one per refund left over (5)", n)
	}
	if n := b.count(`SELECT count(*) FROM payment_events WHERE order_id = $1 AND event_type = 'REFUNDED'`, oid); n != 1 {
		t.Fatalf("%d REFUNDED events, want 1", n)
	}
	if n := b.count(`SELECT count(*) FROM payment_orders WHERE id = $1 AND status = 'REFUNDED' AND refunded_minor = 10000`, oid); n != 1 {
		t.Fatal("the order is not REFUNDED with 10000 refunded")
	}
	if n := b.count(`SELECT count(*) FROM fulfillment_outbox WHERE order_id = $1 AND kind = 'refund.succeeded'`, oid); n != 10 {
		t.Fatalf("%d refund.succeeded rows, want 10", n)
	}
}

// TestRefundOutcomes: what each platform answer does to each local refund, one row each.
func TestRefundOutcomes(t *testing.T) {
	t.Parallel()
	type want struct {
		outcome reconcile.Outcome
		kind    reconcile.MismatchKind
		status  reconcile.RefundStatus
	}
	cases := []struct {
		name     string
		local    reconcile.RefundStatus // "" : no local refund
		age      time.Duration
		state    reconcile.RefundState
		amount   int64
		orderOTN string // the answer's out_trade_no; "" : the refund's own order
		want     want
	}{
		{"success lands", reconcile.RefundProcessing, time.Minute, reconcile.RefundStateSuccess, 3000, "", want{reconcile.OutcomeApplied, "", reconcile.RefundSuccess}},
		{"closed lands", reconcile.RefundProcessing, time.Minute, reconcile.RefundStateClosed, 3000, "", want{reconcile.OutcomeApplied, "", reconcile.RefundClosed}},
		{"abnormal lands and is a finding", reconcile.RefundProcessing, time.Minute, reconcile.RefundStateAbnormal, 3000, "", want{reconcile.OutcomeApplied, "", reconcile.RefundAbnormal}},
		{"abnormal then success", reconcile.RefundAbnormal, time.Minute, reconcile.RefundStateSuccess, 3000, "", want{reconcile.OutcomeApplied, "", reconcile.RefundSuccess}},
		{"abnormal seen again", reconcile.RefundAbnormal, time.Minute, reconcile.RefundStateAbnormal, 3000, "", want{reconcile.OutcomeMismatch, reconcile.MismatchRefundAbnormal, reconcile.RefundAbnormal}},
		{"still processing", reconcile.RefundProcessing, time.Minute, reconcile.RefundStateProcessing, 3000, "", want{reconcile.OutcomeStillPending, "", reconcile.RefundProcessing}},
		{"amount differs", reconcile.RefundProcessing, time.Minute, reconcile.RefundStateSuccess, 2999, "", want{reconcile.OutcomeMismatch, reconcile.MismatchRefundAmount, reconcile.RefundProcessing}},
		{"another order's refund", reconcile.RefundProcessing, time.Minute, reconcile.RefundStateSuccess, 3000, "RX-other", want{reconcile.OutcomeMismatch, reconcile.MismatchUnknownRefund, reconcile.RefundProcessing}},
		{"unknown to the platform, young", reconcile.RefundProcessing, time.Minute, reconcile.RefundStateNotFound, 0, "", want{reconcile.OutcomeStillPending, "", reconcile.RefundProcessing}},
		{"unknown to the platform, past the TTL", reconcile.RefundProcessing, 2 * time.Hour, reconcile.RefundStateNotFound, 0, "", want{reconcile.OutcomeMismatch, reconcile.MismatchRefundNotAtPlatform, reconcile.RefundProcessing}},
		{"success here, closed there", reconcile.RefundSuccess, time.Minute, reconcile.RefundStateClosed, 3000, "", want{reconcile.OutcomeMismatch, reconcile.MismatchRefundNotAtPlatform, reconcile.RefundSuccess}},
		{"closed here, paid back there", reconcile.RefundClosed, time.Minute, reconcile.RefundStateSuccess, 3000, "", want{reconcile.OutcomeMismatch, reconcile.MismatchUnknownRefund, reconcile.RefundClosed}},
		{"abnormal after success is late news", reconcile.RefundSuccess, time.Minute, reconcile.RefundStateAbnormal, 3000, "", want{reconcile.OutcomeUnchanged, "", reconcile.RefundSuccess}},
		{"abnormal after closed is late news", reconcile.RefundClosed, time.Minute, reconcile.RefundStateAbnormal, 3000, "", want{reconcile.OutcomeUnchanged, "", reconcile.RefundClosed}},
		{"success again", reconcile.RefundSuccess, time.Minute, reconcile.RefundStateSuccess, 3000, "", want{reconcile.OutcomeUnchanged, "", reconcile.RefundSuccess}},
		{"a portal refund", "", 0, reconcile.RefundStateSuccess, 3000, "", want{reconcile.OutcomeMismatch, reconcile.MismatchUnknownRefund, ""}},
		{"a refund of an unknown order", "", 0, reconcile.RefundStateSuccess, 3000, "RX-nobody", want{reconcile.OutcomeMismatch, reconcile.MismatchUnknownOrder, ""}},
		{"a closed refund we never had", "", 0, reconcile.RefundStateClosed, 3000, "", want{reconcile.OutcomeUnchanged, "", ""}},
	}
	b := setup(t, dbOnly)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			otn, tradeNo, rno := fmt.Sprintf("RO-%d", i), fmt.Sprintf("T-RO-%d", i), fmt.Sprintf("RO-%d-1", i)
			oid := b.paidOrder(otn, tradeNo, 10000)
			var rid int64
			if c.local != "" {
				rid = b.refund(oid, rno, 3000, c.age)
				if c.local == reconcile.RefundSuccess {
					b.db.MustExec(`UPDATE payment_refunds SET status = 'SUCCESS' WHERE id = $1`, rid)
					b.db.MustExec(`UPDATE payment_orders SET refunded_minor = 3000 WHERE id = $1`, oid)
				} else {
					b.db.MustExec(`UPDATE payment_refunds SET status = $2 WHERE id = $1`, rid, string(c.local))
				}
			}
			if c.orderOTN != "" {
				otn = c.orderOTN
			}
			got, err := b.applier.ApplyRefundResult(context.Background(),
				refundResult(otn, tradeNo, rno, c.amount, c.state, reconcile.SourceReconcile), reconcile.ApplyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Outcome != c.want.outcome || got.Mismatch != c.want.kind {
				t.Fatalf("outcome %s %s, want %s %s", got.Outcome, got.Mismatch, c.want.outcome, c.want.kind)
			}
			if rid != 0 {
				if st := b.refundState(rid); st.Status != string(c.want.status) {
					t.Fatalf("refund is %s, want %s", st.Status, c.want.status)
				}
			}
			if c.want.kind != "" {
				if n := b.count(`SELECT count(*) FROM reconcile_mismatches WHERE kind = $1 AND out_refund_no = $2`, string(c.want.kind), rno); n != 1 {
					t.Fatalf("%d %s findings for %s, want 1", n, c.want.kind, rno)
				}
			} else if c.state != reconcile.RefundStateAbnormal || c.local != reconcile.RefundProcessing {
				if n := b.count(`SELECT count(*) FROM reconcile_mismatches WHERE out_refund_no = $1`, rno); n != 0 {
					t.Fatalf("%d findings for %s, want none", n, rno)
				}
			}
			if c.state == reconcile.RefundStateAbnormal && c.local == reconcile.RefundProcessing {
				if n := b.count(`SELECT count(*) FROM reconcile_mismatches WHERE kind = 'REFUND_ABNORMAL' AND out_refund_no = $1`, rno); n != 1 {
					t.Fatalf("an abnormal refund left no REFUND_ABNORMAL finding")
				}
			}
		})
	}
}

// TestAlipayRefundNotificationsNameTheRunningTotal: Alipay's notification says what the
// trade has refunded in all; this refund's amount is that less the earlier successful
// refunds. A total that does not split onto the refund leaves it for the pass's query.
func TestAlipayRefundNotificationsNameTheRunningTotal(t *testing.T) {
	t.Parallel()
	b := setup(t, withRedis)
	oid := b.paidOrder("RA-1", "T-RA1", 10000)
	first := b.refund(oid, "RA-1-1", 3000, time.Minute)
	second := b.refund(oid, "RA-1-2", 7000, time.Minute)
	notify := func(outRefundNo string, total int64) reconcile.Applied {
		r := refundResult("RA-1", "T-RA1", outRefundNo, 0, reconcile.RefundStateSuccess, reconcile.SourceNotify)
		r.RefundedTotalMinor = total
		got, err := b.applier.ApplyRefundResult(context.Background(), r, reconcile.ApplyOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	// The second refund's notification arrives first: 10000 in all is not 7000 on top of 0.
	if got := notify("RA-1-2", 10000); got.Outcome != reconcile.OutcomeStillPending {
		t.Fatalf("out-of-order total: %s, want left for the query", got.Outcome)
	}
	if got := notify("RA-1-1", 3000); got.Outcome != reconcile.OutcomeApplied {
		t.Fatalf("first refund: %s, want applied", got.Outcome)
	}
	if got := notify("RA-1-2", 10000); got.Outcome != reconcile.OutcomeApplied {
		t.Fatalf("second refund, retried: %s, want applied", got.Outcome)
	}
	if got := notify("RA-1-2", 10000); got.Outcome != reconcile.OutcomeDuplicate {
		t.Fatalf("repeat: %s, want duplicate", got.Outcome)
	}
	if st := b.refundState(second); st.Order != "REFUNDED" || st.Refunded != 10000 {
		t.Fatalf("after both: %+v", st)
	}
	assertRefundedOnce(t, b, oid, first)
	assertRefundedOnce(t, b, oid, second)
}

// TestRefundDatabaseFailureLeavesNothingHalfApplied: the outbox insert fails inside the
// refund's statement: nothing moved, no event, the claim released; the retry lands once.
func TestRefundDatabaseFailureLeavesNothingHalfApplied(t *testing.T) {
	t.Parallel()
	b := setup(t, withRedis)
	oid := b.paidOrder("RFF-1", "T-RFF1", 5000)
	rid := b.refund(oid, "RFF-1-1", 5000, time.Minute)
	b.db.MustExec(`CREATE FUNCTION fail_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'outbox is broken'; END $$`)
	b.db.MustExec(`CREATE TRIGGER fail_outbox BEFORE INSERT ON fulfillment_outbox FOR EACH ROW EXECUTE FUNCTION fail_outbox()`)
	r := refundResult("RFF-1", "T-RFF1", "RFF-1-1", 5000, reconcile.RefundStateSuccess, reconcile.SourceNotify)
	if _, err := b.applier.ApplyRefundResult(context.Background(), r, reconcile.ApplyOptions{}); !errors.Is(err, reconcile.ErrRetryable) {
		t.Fatalf("err = %v, want retryable", err)
	}
	if st := b.refundState(rid); st.Status != "PROCESSING" || st.Refunded != 0 || st.Order != "PAID" {
		t.Fatalf("half-applied: %+v", st)
	}
	if n := b.count(`SELECT count(*) FROM payment_events WHERE order_id = $1`, oid); n != 0 {
		t.Fatalf("%d events after a failed refund", n)
	}
	key := b.applier.RefundClaimKey(reconcile.Alipay, "T-RFF1", "RFF-1-1")
	if v, _ := b.redis.Client.Get(context.Background(), key).Result(); v != "" {
		t.Fatalf("claim left behind: %q", v)
	}
	b.db.MustExec(`DROP TRIGGER fail_outbox ON fulfillment_outbox`)
	if got, err := b.applier.ApplyRefundResult(context.Background(), r, reconcile.ApplyOptions{}); err != nil || got.Outcome != reconcile.OutcomeApplied {
		t.Fatalf("retry: %v %v", got.Outcome, err)
	}
	assertRefundedOnce(t, b, oid, rid)
}

// TestRefundedTradeExplainedByItsRefunds: a trade query that reports a paid order refunded
// (WeChat Pay REFUND, Alipay TRADE_CLOSED after payment) is a REFUNDED_AT_PLATFORM finding
// only when the order's own refunds do not explain it: WeChat Pay says REFUND once any refund
// started, Alipay closes the trade only when the whole of it went back. A PENDING order the
// platform reports refunded is never closed: money went in and back out.
func TestRefundedTradeExplainedByItsRefunds(t *testing.T) {
	t.Parallel()
	type localRefund struct {
		amount int64
		status reconcile.RefundStatus
	}
	wechat, alipay := reconcile.WechatPay, reconcile.Alipay
	cases := []struct {
		name     string
		platform reconcile.Platform
		state    reconcile.PlatformState // StateRefunded, or StateClosed (Alipay TRADE_CLOSED read without its payment date)
		pending  bool                    // the order is still PENDING here
		refunds  []localRefund
		finding  bool
	}{
		{"wechat refund, none of ours", wechat, reconcile.StateRefunded, false, nil, true},
		{"wechat refund, ours in flight", wechat, reconcile.StateRefunded, false, []localRefund{{3000, reconcile.RefundProcessing}}, false},
		{"wechat refund, ours abnormal", wechat, reconcile.StateRefunded, false, []localRefund{{3000, reconcile.RefundAbnormal}}, false},
		{"wechat refund, ours only closed", wechat, reconcile.StateRefunded, false, []localRefund{{3000, reconcile.RefundClosed}}, true},
		{"alipay refunded, ours partial", alipay, reconcile.StateRefunded, false, []localRefund{{3000, reconcile.RefundSuccess}}, true},
		{"alipay refunded, ours whole in flight", alipay, reconcile.StateRefunded, false, []localRefund{{3000, reconcile.RefundSuccess}, {7000, reconcile.RefundProcessing}}, false},
		{"alipay closed after payment, ours partial", alipay, reconcile.StateClosed, false, []localRefund{{3000, reconcile.RefundSuccess}}, true},
		{"alipay closed after payment, ours whole", alipay, reconcile.StateClosed, false, []localRefund{{10000, reconcile.RefundProcessing}}, false},
		{"alipay closed after payment, none of ours", alipay, reconcile.StateClosed, false, nil, true},
		{"alipay refunded, pending here", alipay, reconcile.StateRefunded, true, nil, true},
		{"wechat refund, pending here", wechat, reconcile.StateRefunded, true, nil, true},
	}
	b := setup(t, dbOnly)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			otn, tradeNo := fmt.Sprintf("RT-%d", i), fmt.Sprintf("T-RT-%d", i)
			var oid int64
			if c.pending {
				oid = b.order(orderSpec{otn: otn, amount: 10000, platform: c.platform, merchant: "2021000000000001"})
			} else {
				oid = b.order(orderSpec{otn: otn, amount: 10000, status: reconcile.StatusPaid, tradeNo: tradeNo,
					platform: c.platform, merchant: "2021000000000001"})
				b.db.MustExec(`UPDATE payment_orders SET paid_amount_minor = amount_minor, paid_at = now() WHERE id = $1`, oid)
			}
			var succeeded int64
			for j, r := range c.refunds {
				id := b.refund(oid, fmt.Sprintf("%s-%d", otn, j), r.amount, time.Minute)
				b.db.MustExec(`UPDATE payment_refunds SET status = $2 WHERE id = $1`, id, string(r.status))
				if r.status == reconcile.RefundSuccess {
					succeeded += r.amount
				}
			}
			b.db.MustExec(`UPDATE payment_orders SET refunded_minor = $2 WHERE id = $1`, oid, succeeded)
			res := stateResult(otn, c.state, reconcile.SourceBackfill)
			res.Platform, res.PlatformTradeNo = c.platform, tradeNo
			got, err := b.applier.ApplyResult(context.Background(), res, reconcile.ApplyOptions{})
			if err != nil {
				t.Fatal(err)
			}
			n := b.count(`SELECT count(*) FROM reconcile_mismatches WHERE kind = 'REFUNDED_AT_PLATFORM' AND out_trade_no = $1`, otn)
			if c.finding && (got.Mismatch != reconcile.MismatchRefundedAtPlatform || n != 1) {
				t.Fatalf("outcome %s %s and %d findings, want a REFUNDED_AT_PLATFORM finding", got.Outcome, got.Mismatch, n)
			}
			if !c.finding && (got.Outcome != reconcile.OutcomeUnchanged || n != 0) {
				t.Fatalf("outcome %s %s and %d findings, want unchanged: the order's refunds explain it", got.Outcome, got.Mismatch, n)
			}
			want := "PAID"
			if c.pending {
				want = "PENDING"
			}
			if st := b.count(`SELECT count(*) FROM payment_orders WHERE id = $1 AND status = $2`, oid, want); st != 1 {
				t.Fatalf("the order left %s", want)
			}
		})
	}
}
