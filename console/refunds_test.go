package console_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/payrecon/payrecon/repo/repotest"
)

// refundFindings are the findings seedRefunds adds: an abnormal refund of an order with
// two refunds, and a refund made in the merchant portal that we have no record of.
type refundFindings struct {
	order             int64
	abnormal, unknown int64
}

// seedRefunds adds a WeChat Pay order of ¥100.00, partly refunded: ¥30.00 back (SUCCESS,
// by callback), ¥20.00 ABNORMAL (the buyer's card was closed), and a ¥12.00 refund the
// platform shows that the merchant's app never recorded. Every refund transition has its
// event; the findings are seen on 28 November.
func (f *fixture) seedRefunds(t *testing.T) refundFindings {
	t.Helper()
	var rf refundFindings
	db := f.db
	rf.order = repotest.InsertOrder(t, db, repotest.Order{Platform: "wechatpay", MerchantID: "1900000001", OutTradeNo: "ORD-3003",
		AmountMinor: 10000, Status: "PAID", PlatformTradeNo: "4200000003202611280003", PaidAmountMinor: 10000,
		PaidAt: base.Add(-50 * time.Minute), CreatedAt: base.Add(-time.Hour)})
	refund := func(no, platformNo string, amount int64, status string, created time.Time, succeeded any) int64 {
		var id int64
		must(t, db.Get(&id, `INSERT INTO payment_refunds (order_id, out_refund_no, platform_refund_no, amount_minor, status, succeeded_at, created_at)
			VALUES ($1, $2, NULLIF($3, ''), $4, $5, $6, $7) RETURNING id`, rf.order, no, platformNo, amount, status, succeeded, created))
		return id
	}
	ok := refund("RF-3003-1", "50300000012026112800000000001", 3000, "SUCCESS", base.Add(-40*time.Minute), base.Add(-39*time.Minute))
	bad := refund("RF-3003-2", "50300000012026112800000000002", 2000, "ABNORMAL", base.Add(-30*time.Minute), nil)
	_, err := db.Exec(`UPDATE payment_orders SET refunded_minor = 3000 WHERE id = $1`, rf.order)
	must(t, err)
	_, err = db.Exec(`INSERT INTO payment_events (order_id, platform, platform_trade_no, event_type, source, amount_minor, refund_id, created_at)
		VALUES ($1, 'wechatpay', '4200000003202611280003', 'PAID', 'notify', 10000, NULL, $2),
		       ($1, 'wechatpay', '4200000003202611280003', 'REFUND_SUCCESS', 'notify', 3000, $3, $4),
		       ($1, 'wechatpay', '4200000003202611280003', 'REFUND_ABNORMAL', 'reconcile', 2000, $5, $6)`,
		rf.order, base.Add(-50*time.Minute), ok, base.Add(-39*time.Minute), bad, base.Add(-20*time.Minute))
	must(t, err)
	finding := func(kind, refundNo string, local, platform any, localStatus, platformStatus string, seen time.Time) int64 {
		var id int64
		must(t, db.Get(&id, `INSERT INTO reconcile_mismatches (order_id, platform, merchant_id, out_trade_no, platform_trade_no,
			out_refund_no, kind, local_amount_minor, platform_amount_minor, local_status, platform_status, detail, first_seen_at, last_seen_at)
			VALUES ($1, 'wechatpay', '1900000001', 'ORD-3003', '4200000003202611280003', $2, $3, $4, $5, NULLIF($6, ''), $7,
			'{"refund": true, "source": "reconcile"}', $8, $8) RETURNING id`,
			rf.order, refundNo, kind, local, platform, localStatus, platformStatus, seen))
		return id
	}
	rf.abnormal = finding("REFUND_ABNORMAL", "RF-3003-2", 2000, 2000, "ABNORMAL", "ABNORMAL", base.Add(-20*time.Minute))
	rf.unknown = finding("UNKNOWN_REFUND", "PORTAL-3003-9", nil, 1200, "", "SUCCESS", base.Add(-10*time.Minute))
	return rf
}

// TestFindingPageShowsRefunds: a refund finding names its refund; the order's section shows
// what was refunded of what was paid, every refund (number, the platform's number, amount,
// status, when it succeeded, when it was made) and each refund's events, in English and
// Simplified Chinese. A portal refund we never recorded says so.
func TestFindingPageShowsRefunds(t *testing.T) {
	f := newFixture(t)
	rf := f.seedRefunds(t)
	for _, c := range []struct {
		lang string
		want []string
	}{
		{"", []string{"Refund not paid back (abnormal)", "The order&#39;s refunds", "Refund no.", "Platform&#39;s refund no.", "Succeeded at",
			"Abnormal: not paid back", "Succeeded", "Refund succeeded", "Refunded / paid"}},
		{"zh-CN", []string{"退款异常", "订单的退款", "退款单号", "平台退款单号", "退款成功时间", "退款异常（未退回）", "退款成功", "已退款 / 已支付"}},
	} {
		w := f.do(t, request{method: "GET", path: findingPath(rf.abnormal), peer: trusted, who: ann, lang: c.lang})
		body := w.Body.String()
		if w.Code != http.StatusOK {
			t.Fatalf("%q: HTTP %d", c.lang, w.Code)
		}
		for _, want := range c.want {
			if !strings.Contains(body, want) {
				t.Errorf("%q: the finding page lacks %q", c.lang, want)
			}
		}
		// The finding names its refund, and the refund's row is the one marked.
		if !strings.Contains(body, `id="finding-refund"`) || !strings.Contains(body, `<tr data-refund="RF-3003-2" class="diff">`) {
			t.Errorf("%q: the page does not point at refund RF-3003-2", c.lang)
		}
		for marker, cells := range map[string][]string{
			`<tr data-refund="RF-3003-1">`: {"RF-3003-1", "50300000012026112800000000001", "¥30.00", "", "2026-11-28 09:21:00 &#43;08:00", "2026-11-28 09:20:00 &#43;08:00"},
			`<tr data-refund="RF-3003-2"`:  {"RF-3003-2", "50300000012026112800000000002", "¥20.00", "", "—", "2026-11-28 09:30:00 &#43;08:00"},
		} {
			got := rowCells(body, marker)
			if len(got) != len(cells) {
				t.Errorf("%q: refund row %s: cells %q", c.lang, marker, got)
				continue
			}
			for i, want := range cells {
				if want != "" && got[i] != want {
					t.Errorf("%q: refund row %s cell %d = %q, want %q", c.lang, marker, i, got[i], want)
				}
			}
		}
		if got := rowCells(body, `<tr id="refunded">`); len(got) != 2 || got[1] != "¥30.00 / ¥100.00" {
			t.Errorf("%q: refunded row %q, want ¥30.00 of ¥100.00", c.lang, got)
		}
		if n, e := strings.Count(body, `<tr data-refund="RF-3003-`), strings.Count(body, `<tr data-refund-event="RF-3003-`); n != 2 || e != 2 {
			t.Errorf("%q: %d refund rows and %d refund events, want 2 of each", c.lang, n, e)
		}
	}
	// A portal refund we never recorded: the page names it and says it is not ours.
	body := f.do(t, request{method: "GET", path: findingPath(rf.unknown), peer: trusted, who: ann}).Body.String()
	for _, want := range []string{"Refund we do not have", "PORTAL-3003-9", "not in our records"} {
		if !strings.Contains(body, want) {
			t.Errorf("the unknown refund's page lacks %q", want)
		}
	}
	if strings.Contains(body, `class="diff"><td>RF-`) {
		t.Error("the unknown refund's page marks one of our refunds as its own")
	}
	// The list shows which refund a refund finding is about.
	if body := f.do(t, request{method: "GET", path: "/review/", peer: trusted, who: ann}).Body.String(); !strings.Contains(body, "Refund PORTAL-3003-9") {
		t.Error("the findings list does not name the refund of a refund finding")
	}
	// A payment finding's order with no refunds says so.
	if body := f.do(t, request{method: "GET", path: findingPath(f.amount), peer: trusted, who: ann}).Body.String(); !strings.Contains(body, "No refunds.") ||
		strings.Contains(body, `id="finding-refund"`) {
		t.Error("a payment finding's page shows a refund, or no word about the order's refunds")
	}
}
