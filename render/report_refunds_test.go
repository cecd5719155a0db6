package render_test

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/render"
)

// refundReport is a day with a refund finding (a portal refund we never recorded), a payment
// finding beside it, a run that repaired a refund and the day's bill figures with refunds.
func refundReport() reconcile.Report {
	from := time.Date(2026, 11, 28, 0, 0, 0, 0, shanghai)
	p := func(v int64) *int64 { return &v }
	order := int64(7)
	findings := []reconcile.Finding{
		{ID: 1, Kind: reconcile.MismatchUnknownRefund, Platform: reconcile.WechatPay, MerchantID: "1900000001", OrderID: &order,
			OutTradeNo: "W-ORDER-1", OutRefundNo: "PORTAL-REFUND-88", PlatformTradeNo: "4200000001202611280001",
			PlatformAmountMinor: p(1200), PlatformStatus: "SUCCESS", FirstSeenAt: from.Add(time.Hour), LastSeenAt: from.Add(time.Hour),
			SeenCount: 1, ReviewStatus: reconcile.ReviewOpen, EvidenceVersion: 1},
		{ID: 2, Kind: reconcile.MismatchAmount, Platform: reconcile.Alipay, MerchantID: "2021000000000001", OutTradeNo: "A-ORDER-2",
			LocalAmountMinor: p(500), PlatformAmountMinor: p(400), FirstSeenAt: from.Add(2 * time.Hour), LastSeenAt: from.Add(2 * time.Hour),
			SeenCount: 1, ReviewStatus: reconcile.ReviewOpen, EvidenceVersion: 1},
	}
	return reconcile.Report{From: from, To: from.Add(24 * time.Hour), Findings: reconcile.FindingList(findings),
		Summary: []reconcile.SummaryRow{
			{Kind: reconcile.MismatchUnknownRefund, ReviewStatus: reconcile.ReviewOpen, Count: 1, SeenCount: 1, PlatformAmountMinor: 1200, AtStakeMinor: 1200},
			{Kind: reconcile.MismatchAmount, ReviewStatus: reconcile.ReviewOpen, Count: 1, SeenCount: 1, LocalAmountMinor: 500, PlatformAmountMinor: 400, AtStakeMinor: 100},
		},
		Totals: reconcile.SummaryRow{Count: 2, SeenCount: 2, LocalAmountMinor: 500, PlatformAmountMinor: 1600, AtStakeMinor: 1300},
		Runs: []reconcile.RunRow{{ID: 1, Mode: "once", Status: "succeeded", Shard: "0/1", StartedAt: from.Add(time.Hour),
			CounterValues: reconcile.CounterValues{Scanned: 3, RefundsRepaired: 1}}},
		RunTotals: reconcile.RunTotals{Runs: 1, ByStatus: map[string]int64{"succeeded": 1}, CounterValues: reconcile.CounterValues{Scanned: 3, RefundsRepaired: 1}},
		Statements: []reconcile.StatementDayRow{{Platform: "wechatpay", MerchantID: "1900000001", BillDate: "2026-11-28",
			StatementFigures: reconcile.StatementFigures{Payments: 4, PaymentsMinor: 31100, Refunds: 2, RefundsMinor: 4200,
				ReceivedMinor: 26900, FeeMilliFen: 161400, NetMilliFen: 26900*1000 - 161400, Lines: 6, Matched: 5, Found: 1}}},
	}
}

func renderRefundReport(t *testing.T, format string, lang render.Lang) []byte {
	t.Helper()
	var buf bytes.Buffer
	doc := render.ReportDoc{Report: refundReport(), Loc: shanghai, Generated: time.Date(2026, 11, 29, 9, 0, 0, 0, shanghai), Lang: lang}
	if err := doc.Write(&buf, format); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestReportShowsRefunds: a refund finding names its refund in every format (the column
// "refund no." / "退款单号"); the runs count repaired refunds; the statement days show the
// bill's refunds, count and amount, in both languages.
func TestReportShowsRefunds(t *testing.T) {
	t.Parallel()
	t.Run("csv", func(t *testing.T) {
		// One table of findings, headed in the report's language (English by default).
		cr := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(renderRefundReport(t, "csv", ""), []byte("\ufeff"))))
		rows, err := cr.ReadAll()
		if err != nil || len(rows) != 3 {
			t.Fatalf("csv %q (%v): want a header and two findings", rows, err)
		}
		refundCol, idCol := slices.Index(rows[0], render.Label(render.LangEN, "out_refund_no")), slices.Index(rows[0], "No.")
		if refundCol < 0 || idCol < 0 {
			t.Fatalf("csv header %q names no refund number or id", rows[0])
		}
		got := map[string]string{} // finding id -> its refund number
		for _, r := range rows[1:] {
			got[r[idCol]] = r[refundCol]
		}
		if got["1"] != "PORTAL-REFUND-88" || got["2"] != "" {
			t.Errorf("refund numbers by finding %q: want PORTAL-REFUND-88 on the refund finding only:\n%q", got, rows)
		}
	})
	t.Run("json", func(t *testing.T) {
		var doc struct {
			Findings []struct {
				OutRefundNo string `json:"out_refund_no"`
			} `json:"findings"`
		}
		if err := json.Unmarshal(renderRefundReport(t, "json", ""), &doc); err != nil {
			t.Fatal(err)
		}
		if len(doc.Findings) != 2 || doc.Findings[0].OutRefundNo != "PORTAL-REFUND-88" || doc.Findings[1].OutRefundNo != "" {
			t.Errorf("findings %+v: want the refund number on the refund finding only", doc.Findings)
		}
	})
	for _, lang := range []render.Lang{render.LangEN, render.LangZH} {
		t.Run("html-"+string(lang), func(t *testing.T) { checkRefundHTML(t, lang) })
		t.Run("xlsx-"+string(lang), func(t *testing.T) { checkRefundXLSX(t, lang) })
	}
}

func checkRefundHTML(t *testing.T, lang render.Lang) {
	page := string(renderRefundReport(t, "html", lang))
	for _, want := range []string{
		render.Label(lang, "out_refund_no"), ">PORTAL-REFUND-88<", render.Label(lang, "UNKNOWN_REFUND"),
		render.Label(lang, "refunds"), render.Label(lang, "refunds_amount"), "¥42.00", render.Label(lang, "refunds_repaired"),
	} {
		if !strings.Contains(page, want) {
			t.Errorf("%s page lacks %q", lang, want)
		}
	}
	if lang == render.LangZH {
		for _, want := range []string{"退款单号", "退款笔数", "退款金额", "未知退款"} {
			if !strings.Contains(page, want) {
				t.Errorf("zh page lacks %q", want)
			}
		}
	}
}

func checkRefundXLSX(t *testing.T, lang render.Lang) {
	f, err := excelize.OpenReader(bytes.NewReader(renderRefundReport(t, "xlsx", lang)))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := f.GetRows(render.Label(lang, "report.sheet.findings"))
	if err != nil || len(rows) != 3 {
		t.Fatalf("%s findings sheet %q (%v)", lang, rows, err)
	}
	i := slices.Index(rows[0], render.Label(lang, "out_refund_no"))
	if i < 0 || rows[1][i] != "PORTAL-REFUND-88" {
		t.Errorf("%s findings sheet header %q, first row %q: want the refund number under %q", lang, rows[0], rows[1], render.Label(lang, "out_refund_no"))
	}
	st, err := f.GetRows(render.Label(lang, "report.sheet.statements"))
	if err != nil || len(st) < 2 {
		t.Fatalf("%s statements sheet %q (%v)", lang, st, err)
	}
	j := slices.Index(st[0], render.Label(lang, "refunds"))
	if j < 0 || st[1][j] != "2" {
		t.Errorf("%s statements sheet %q: want 2 under %q", lang, st, render.Label(lang, "refunds"))
	}
	// The day's refunds in money too: 42 yuan, a number.
	sheet := render.Label(lang, "report.sheet.statements")
	amount, _ := excelize.CoordinatesToCellName(slices.Index(st[0], render.Label(lang, "refunds_amount"))+1, 2)
	if raw, _ := f.GetCellValue(sheet, amount, excelize.Options{RawCellValue: true}); raw != "42" {
		t.Errorf("%s statements sheet %q: refunds amount %q, want 42", lang, st, raw)
	}
	// The runs' totals count the repaired refund.
	runs, err := f.GetRows(render.Label(lang, "report.sheet.runs"))
	if err != nil || len(runs) != 3 {
		t.Fatalf("%s runs sheet %q (%v): want a header, a run and the totals", lang, runs, err)
	}
	if k := slices.Index(runs[0], render.Label(lang, "refunds_repaired")); k < 0 || runs[2][k] != "1" {
		t.Errorf("%s runs sheet %q: want 1 refund repaired in the totals", lang, runs)
	}
	// The fees are a number with five decimals, which a spreadsheet sums (¥1.614 here).
	fees, _ := excelize.CoordinatesToCellName(slices.Index(st[0], render.Label(lang, "fees"))+1, 2)
	style, _ := f.GetCellStyle(sheet, fees)
	sty, err := f.GetStyle(style)
	raw, _ := f.GetCellValue(sheet, fees, excelize.Options{RawCellValue: true})
	if err != nil || raw != "1.614" || sty.CustomNumFmt == nil || !strings.Contains(*sty.CustomNumFmt, "0.00000") {
		t.Errorf("%s: fees cell %s is %q with format %v (%v), want the number 1.614 to five decimals", lang, fees, raw, sty.CustomNumFmt, err)
	}
}

// TestWriteDetailsShowsRefunds: `mismatches show` names the finding's refund and prints the
// order's refunded amount, its refunds and which refund each event is about; the JSON form
// carries the refunds with times in the zone.
func TestWriteDetailsShowsRefunds(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 28, 1, 20, 0, 0, time.UTC) // 09:20 China time
	order, refundID, paid, back := int64(7), int64(3), int64(10000), int64(3000)
	fr := refundReport()
	var f reconcile.Finding
	fr.Findings.Each(func(x reconcile.Finding) error { //nolint:errcheck // a list in memory
		if f.ID == 0 {
			f = x
		}
		return nil
	})
	d := reconcile.FindingDetails{Finding: f,
		Order: &reconcile.OrderState{ID: order, Platform: "wechatpay", MerchantID: "1900000001", OutTradeNo: "W-ORDER-1", AmountMinor: 10000,
			Currency: "CNY", Status: "PAID", PaidAmountMinor: &paid, RefundedMinor: 3000, CreatedAt: at, UpdatedAt: at},
		Events: []reconcile.PaymentEvent{{ID: 1, EventType: "REFUND_SUCCESS", Source: "notify", AmountMinor: &back,
			RefundID: &refundID, OutRefundNo: "RF-1", CreatedAt: at}},
		Refunds: []reconcile.RefundRecord{{ID: refundID, OutRefundNo: "RF-1", PlatformRefundNo: "503000000120261128", AmountMinor: 3000,
			Currency: "CNY", Status: "SUCCESS", SucceededAt: &at, CreatedAt: at, UpdatedAt: at}},
	}
	var out strings.Builder
	if err := render.WriteDetails(&out, d, shanghai); err != nil {
		t.Fatal(err)
	}
	text := strings.Join(strings.Fields(out.String()), " ") // the columns' padding aside
	for _, want := range []string{"refund no PORTAL-REFUND-88", "refunded 30.00", "REFUND_SUCCESS notify - 30.00 - RF-1",
		"RF-1 503000000120261128 30.00 CNY SUCCESS 2026-11-28 09:20:00 +08:00 2026-11-28 09:20:00 +08:00"} {
		if !strings.Contains(text, want) {
			t.Errorf("show lacks %q:\n%s", want, text)
		}
	}
	var js bytes.Buffer
	if err := render.WriteJSON(&js, render.DetailsView(d, shanghai)); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"out_refund_no": "PORTAL-REFUND-88"`, `"refunded_minor": 3000`, `"succeeded_at": "2026-11-28T09:20:00+08:00"`} {
		if !strings.Contains(js.String(), want) {
			t.Errorf("show --format json lacks %s:\n%s", want, js.String())
		}
	}
}
