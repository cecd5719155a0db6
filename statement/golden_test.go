package statement

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/payrecon/payrecon/reconcile"
)

// The golden bills under testdata are written by hand in the platforms' real formats, with
// what merchants really put in their text columns: commas, double quotes, JSON, full-width
// punctuation, a BOM, and refunds (see testdata/README.md). Every field a reader gives back
// is compared with what the file says.

func goldenAlipayLines(t *testing.T) []Line {
	created1, created2 := mustTime(t, "2026-11-28 09:14:50"), mustTime(t, "2026-11-28 10:20:00")
	line := func(l Line) Line { l.Currency = "CNY"; return l } // Alipay's bill names no currency
	return []Line{
		line(Line{No: 6, Kind: reconcile.BillPayment, OutTradeNo: "ALI-20261128-0001", PlatformTradeNo: "2026112822001411111111111101",
			AmountMinor: 12800, ReceivedMinor: 12800, FeeMilliFen: 77000, At: mustTime(t, "2026-11-28 09:15:02"), CreatedAt: created1}),
		line(Line{No: 7, Kind: reconcile.BillPayment, OutTradeNo: "ALI-20261128-0002", PlatformTradeNo: "2026112822001411111111111102",
			AmountMinor: 6490, ReceivedMinor: 5990, FeeMilliFen: 36000, At: mustTime(t, "2026-11-28 10:20:33"), CreatedAt: created2}),
		line(Line{No: 8, Kind: reconcile.BillRefund, OutTradeNo: "ALI-20261128-0001", PlatformTradeNo: "2026112822001411111111111101",
			RefundNo: "RF-ALI-20261128-0001", AmountMinor: 2800, ReceivedMinor: 2800, FeeMilliFen: -17000,
			At: mustTime(t, "2026-11-28 15:40:00"), CreatedAt: created1}),
		// Its remark is quoted across two lines: the row starts on line 9, the next on 11.
		line(Line{No: 9, Kind: reconcile.BillPayment, OutTradeNo: "ALI-20261128-0003", PlatformTradeNo: "2026112822001411111111111103",
			AmountMinor: 1, ReceivedMinor: 1, At: mustTime(t, "2026-11-28 23:59:59"), CreatedAt: mustTime(t, "2026-11-28 23:59:00")}),
		line(Line{No: 11, Kind: reconcile.BillRefund, OutTradeNo: "ALI-20261128-0002", PlatformTradeNo: "2026112822001411111111111102",
			RefundNo: "RF-ALI-20261128-0002", AmountMinor: 6490, ReceivedMinor: 5990, FeeMilliFen: -36000,
			At: mustTime(t, "2026-11-28 21:30:45"), CreatedAt: created2}),
	}
}

func goldenWeChatLines(t *testing.T) []Line {
	const mch = "1900000001"
	return []Line{
		{No: 2, Kind: reconcile.BillPayment, OutTradeNo: "ORD-20261128-0001", PlatformTradeNo: "4200001234202611281234567801", MerchantID: mch,
			Currency: "CNY", AmountMinor: 12800, ReceivedMinor: 12800, FeeMilliFen: 76800, At: mustTime(t, "2026-11-28 09:15:02")},
		{No: 3, Kind: reconcile.BillPayment, OutTradeNo: "ORD-20261128-0002", PlatformTradeNo: "4200001234202611281234567802", MerchantID: mch,
			Currency: "CNY", AmountMinor: 6490, ReceivedMinor: 5990, FeeMilliFen: 35940, At: mustTime(t, "2026-11-28 10:20:33")},
		{No: 4, Kind: reconcile.BillRefund, OutTradeNo: "ORD-20261128-0001", PlatformTradeNo: "4200001234202611281234567801", MerchantID: mch,
			RefundNo: "RF-20261128-0001", PlatformRefundNo: "50300701182026112800123456789", RefundStatus: "SUCCESS",
			Currency: "CNY", AmountMinor: 2800, ReceivedMinor: 2800, FeeMilliFen: -16800, At: mustTime(t, "2026-11-28 15:40:00")},
		{No: 5, Kind: reconcile.BillRefund, OutTradeNo: "ORD-20261128-0002", PlatformTradeNo: "4200001234202611281234567802", MerchantID: mch,
			RefundNo: "RF-20261128-0002", PlatformRefundNo: "50300801192026112800987654321", RefundStatus: "PROCESSING", Pending: true,
			Currency: "CNY", AmountMinor: 6490, ReceivedMinor: 5990, FeeMilliFen: -35940, At: mustTime(t, "2026-11-28 18:05:09")},
		// Its attach holds ",`" itself: the columns after the merchant's text still line up.
		{No: 6, Kind: reconcile.BillPayment, OutTradeNo: "ORD-20261128-0003", PlatformTradeNo: "4200001234202611281234567803", MerchantID: mch,
			Currency: "CNY", AmountMinor: 1, ReceivedMinor: 1, FeeMilliFen: 6, At: mustTime(t, "2026-11-28 23:59:59")},
	}
}

func golden(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// utf8Resaved is the Alipay bill as a person re-saving it in a spreadsheet leaves it: UTF-8
// with a BOM.
func utf8Resaved(t *testing.T, gbkBytes []byte) []byte {
	t.Helper()
	s, err := simplifiedChineseDecode(gbkBytes)
	if err != nil {
		t.Fatal(err)
	}
	return []byte("\ufeff" + s)
}

func TestGoldenBills(t *testing.T) {
	alipayCSV, wechatCSV := golden(t, "alipay_detail_20261128.gbk.csv"), golden(t, "wechatpay_all_20261128.csv")
	if utf8.Valid(alipayCSV) || !bytes.HasPrefix(wechatCSV, utf8BOM) {
		t.Fatal("the Alipay golden bill must be GBK (as Alipay writes it) and the WeChat Pay one start with a BOM")
	}
	alipayTotals := Totals{Payments: 3, PaymentsMinor: 19291, Refunds: 2, RefundsMinor: 9290, FeeMilliFen: 60000}
	wechatTotals := Totals{Payments: 3, PaymentsMinor: 19291, Refunds: 2, RefundsMinor: 9290, FeeMilliFen: 60006}
	for _, c := range []struct {
		name     string
		platform reconcile.Platform
		data     []byte
		opts     []Option
		want     []Line
		totals   Totals
	}{
		{"alipay detail, GBK", reconcile.Alipay, alipayCSV, nil, goldenAlipayLines(t), alipayTotals},
		{"alipay detail re-saved as UTF-8 with a BOM", reconcile.Alipay, utf8Resaved(t, alipayCSV), nil, goldenAlipayLines(t), alipayTotals},
		{"alipay detail with LF line ends", reconcile.Alipay, bytes.ReplaceAll(alipayCSV, []byte("\r\n"), []byte("\n")), nil, goldenAlipayLines(t), alipayTotals},
		{"wechatpay ALL bill", reconcile.WechatPay, wechatCSV, []Option{WithSHA1(sha1Hex(wechatCSV))}, goldenWeChatLines(t), wechatTotals},
		{"wechatpay ALL bill, gzip", reconcile.WechatPay, gz(t, wechatCSV), []Option{WithSHA1(sha1Hex(wechatCSV))}, goldenWeChatLines(t), wechatTotals},
	} {
		t.Run(c.name, func(t *testing.T) {
			r, err := Open(c.platform, writeFile(t, "bill", c.data), c.opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			got, err := readAll(r)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(c.want) {
				t.Fatalf("%d lines, want %d: %+v", len(got), len(c.want), got)
			}
			for i := range c.want {
				if d := lineDiff(got[i], c.want[i]); d != "" {
					t.Errorf("line %d (file line %d): %s", i, c.want[i].No, d)
				}
			}
			if r.Totals() != c.totals {
				t.Errorf("totals %+v, want %+v", r.Totals(), c.totals)
			}
			if hr, ok := r.(HeaderReader); ok {
				start := mustTime(t, "2026-11-28 00:00:00")
				if h := hr.Header(); h.Account != "20880211096256330156" || !h.Start.Equal(start) || !h.End.Equal(start.AddDate(0, 0, 1)) {
					t.Errorf("header %+v", h)
				}
			}
		})
	}
}

// lineDiff names every field of got that differs from want; "" when none does.
func lineDiff(got, want Line) string {
	var d []string
	add := func(name string, g, w any) {
		if g != w {
			d = append(d, fmt.Sprintf("%s: got %q, want %q", name, fmt.Sprint(g), fmt.Sprint(w)))
		}
	}
	add("No", got.No, want.No)
	add("Kind", got.Kind, want.Kind)
	add("OutTradeNo", got.OutTradeNo, want.OutTradeNo)
	add("PlatformTradeNo", got.PlatformTradeNo, want.PlatformTradeNo)
	add("RefundNo", got.RefundNo, want.RefundNo)
	add("PlatformRefundNo", got.PlatformRefundNo, want.PlatformRefundNo)
	add("RefundStatus", got.RefundStatus, want.RefundStatus)
	add("MerchantID", got.MerchantID, want.MerchantID)
	add("Currency", got.Currency, want.Currency)
	add("AmountMinor", got.AmountMinor, want.AmountMinor)
	add("ReceivedMinor", got.ReceivedMinor, want.ReceivedMinor)
	add("Pending", got.Pending, want.Pending)
	add("FeeMilliFen", got.FeeMilliFen, want.FeeMilliFen)
	if !got.At.Equal(want.At) {
		add("At", got.At, want.At)
	}
	if !got.CreatedAt.Equal(want.CreatedAt) {
		add("CreatedAt", got.CreatedAt, want.CreatedAt)
	}
	return strings.Join(d, "; ")
}
