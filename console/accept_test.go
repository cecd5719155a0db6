package console_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/payrecon/payrecon/repo/repotest"
)

// seedLatePayment adds an order we closed and the PAID_AFTER_CLOSE finding of the payment the
// platform took for it anyway, 40 minutes before the finding's first sighting.
func (f *fixture) seedLatePayment(t *testing.T, platform, merchant, otn, tradeNo string, amount int64) (order, finding int64) {
	t.Helper()
	order = repotest.InsertOrder(t, f.db, repotest.Order{Platform: platform, MerchantID: merchant, OutTradeNo: otn,
		AmountMinor: amount, Status: "CLOSED", CreatedAt: base.Add(-3 * time.Hour)})
	must(t, f.db.Get(&finding, `INSERT INTO reconcile_mismatches (order_id, platform, merchant_id, out_trade_no, platform_trade_no,
		kind, local_amount_minor, platform_amount_minor, local_status, platform_status, detail, first_seen_at, last_seen_at)
		VALUES ($1, $2, $3, $4, $5, 'PAID_AFTER_CLOSE', $6, $6, 'CLOSED', 'SUCCESS', jsonb_build_object('paid_at', $7::text), $8, $8)
		RETURNING id`, order, platform, merchant, otn, tradeNo, amount, base.Add(-40*time.Minute).UTC().Format(time.RFC3339), base))
	return order, finding
}

// TestAcceptPaymentInTheConsole: the finding page offers accept_payment only where it fits
// and says what it will do; once a second person approves it in the console, the order is
// PAID with one event of source review and one outbox row, and the page shows that event.
func TestAcceptPaymentInTheConsole(t *testing.T) {
	f := newFixture(t)
	order, late := f.seedLatePayment(t, "wechatpay", "1900000003", "ORD-3003", "4200000003", 2500)
	page := func(who string, id int64, lang string) string {
		return f.do(t, request{method: "GET", path: findingPath(id), peer: trusted, who: who, lang: lang}).Body.String()
	}

	body := page(ann, late, "")
	if !strings.Contains(body, `<option value="accept_payment">`) || !strings.Contains(body, "the order becomes PAID") {
		t.Errorf("a payment made after the close is not offered accept_payment with what it does")
	}
	if zh := page(ann, late, "zh-CN"); !strings.Contains(zh, "确认收款入账") || !strings.Contains(zh, "订单按平台实收金额变为") {
		t.Errorf("the Chinese page does not name accept_payment and what it does")
	}
	if strings.Contains(page(ann, f.unknown, ""), `value="accept_payment"`) {
		t.Errorf("an UNKNOWN_ORDER is offered accept_payment")
	}

	post := func(who, action string, form map[string]string) int {
		form["csrf"] = f.tokenFor(t, who)
		return f.do(t, request{method: "POST", path: actionPath(late, action), peer: trusted, who: who, form: form}).Code
	}
	if c := post(ann, "resolve", map[string]string{"version": "1", "resolution": "accept_payment"}); c != http.StatusSeeOther {
		t.Fatalf("propose accept_payment: HTTP %d", c)
	}
	var status string
	must(t, f.db.Get(&status, `SELECT status FROM payment_orders WHERE id = $1`, order))
	if status != "CLOSED" {
		t.Fatalf("the proposal alone moved the order to %s", status)
	}
	if c := post(cfo, "approve", map[string]string{"version": "1"}); c != http.StatusSeeOther {
		t.Fatalf("approve: HTTP %d", c)
	}
	var got struct {
		Status string `db:"status"`
		Events int    `db:"events"`
		Outbox int    `db:"outbox"`
	}
	must(t, f.db.Get(&got, `SELECT status,
		(SELECT count(*) FROM payment_events WHERE order_id = o.id AND event_type = 'PAID' AND source = 'review') AS events,
		(SELECT count(*) FROM fulfillment_outbox WHERE order_id = o.id AND kind = 'order.paid') AS outbox
		FROM payment_orders o WHERE id = $1`, order))
	if got.Status != "PAID" || got.Events != 1 || got.Outbox != 1 {
		t.Fatalf("after the console's approval: %+v, want PAID with one review event and one outbox row", got)
	}
	if !strings.Contains(page(ann, late, ""), "Finance review") {
		t.Errorf("the finding page does not show the order's payment event from the review")
	}
}
