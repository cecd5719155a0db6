package render_test

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"
	"golang.org/x/net/html"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/render"
)

var shanghai = time.FixedZone("CST", 8*3600)

// sampleReport is three days of findings of two kinds (and one first seen before the
// period), two runs, with amounts that need grouping.
func sampleReport() reconcile.Report {
	from := time.Date(2026, 11, 26, 0, 0, 0, 0, shanghai)
	p := func(v int64) *int64 { return &v }
	f := func(id int64, kind reconcile.MismatchKind, first time.Time, local, plat *int64, status reconcile.ReviewStatus) reconcile.Finding {
		return reconcile.Finding{ID: id, Kind: kind, Platform: reconcile.Alipay, MerchantID: "2021000000000001",
			OutTradeNo: fmt.Sprintf("ORDER-%d-WITH-A-RATHER-LONG-NUMBER", id), PlatformTradeNo: "2026112622001400001234567890",
			LocalAmountMinor: local, PlatformAmountMinor: plat, FirstSeenAt: first, LastSeenAt: first, SeenCount: 1,
			ReviewStatus: status, EvidenceVersion: 1}
	}
	findings := []reconcile.Finding{
		f(1, reconcile.MismatchAmount, from.Add(2*time.Hour), p(123456), p(100), reconcile.ReviewOpen),
		f(2, reconcile.MismatchAmount, from.Add(26*time.Hour), p(500), p(400), reconcile.ReviewPendingApproval),
		f(3, reconcile.MismatchUnknownOrder, from.Add(27*time.Hour), nil, p(99900), reconcile.ReviewOpen),
		f(4, reconcile.MismatchUnknownOrder, from.Add(50*time.Hour), nil, p(1), reconcile.ReviewResolved),
		f(5, reconcile.MismatchAmount, from.Add(-48*time.Hour), p(1), p(2), reconcile.ReviewAcknowledged),
	}
	findings[4].LastSeenAt = from.Add(time.Hour)
	rep := reconcile.Report{From: from, To: from.Add(72 * time.Hour), Findings: reconcile.FindingList(findings),
		Summary: []reconcile.SummaryRow{
			{Kind: reconcile.MismatchAmount, ReviewStatus: reconcile.ReviewOpen, Count: 1, SeenCount: 1, LocalAmountMinor: 123456, PlatformAmountMinor: 100, AtStakeMinor: 123356},
			{Kind: reconcile.MismatchUnknownOrder, ReviewStatus: reconcile.ReviewOpen, Count: 1, SeenCount: 1, PlatformAmountMinor: 99900, AtStakeMinor: 99900},
		},
		Totals: reconcile.SummaryRow{Count: 2, SeenCount: 2, LocalAmountMinor: 123456, PlatformAmountMinor: 100000, AtStakeMinor: 223256},
		Runs: []reconcile.RunRow{{ID: 1, Mode: "scheduled", Status: "succeeded", Shard: "0/1", StartedAt: from.Add(time.Hour), CounterValues: reconcile.CounterValues{Scanned: 10}},
			{ID: 2, Mode: "backfill", Status: "failed", Shard: "0/1", StartedAt: from.Add(2 * time.Hour), Error: "database lost"}},
		RunTotals: reconcile.RunTotals{Runs: 2, ByStatus: map[string]int64{"succeeded": 1, "failed": 1}, CounterValues: reconcile.CounterValues{Scanned: 10}},
	}
	return rep
}

func renderReport(t *testing.T, format string, lang render.Lang) []byte {
	t.Helper()
	var buf bytes.Buffer
	doc := render.ReportDoc{Report: sampleReport(), Loc: shanghai, Generated: time.Date(2026, 11, 29, 9, 0, 0, 0, shanghai), Lang: lang}
	if err := doc.Write(&buf, format); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// walk calls fn for every element node.
func walk(n *html.Node, fn func(*html.Node)) {
	if n.Type == html.ElementNode {
		fn(n)
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walk(c, fn)
	}
}

func textOf(n *html.Node) string {
	var b strings.Builder
	var rec func(*html.Node)
	rec = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			rec(c)
		}
	}
	rec(n)
	return b.String()
}

func TestReportHTMLIsOneSelfContainedPageForPeople(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		lang             render.Lang
		wantTH, wantCell []string
		htmlLang         string
	}{
		{render.LangEN, []string{"Our order no.", "Platform trade no.", "Amount at stake", "Review status", "Kind of finding"},
			[]string{"Amount differs", "Unknown order", "Awaiting approval", "Alipay", "¥1,234.56", "¥2,232.56", "Total"}, "en"},
		{render.LangZH, []string{"商户订单号", "平台交易号", "涉及金额", "复核状态", "差异类型"},
			[]string{"金额不符", "未知订单", "待审批", "支付宝", "¥1,234.56", "合计"}, "zh-Hans"},
	} {
		t.Run(string(tc.lang), func(t *testing.T) {
			page := renderReport(t, "html", tc.lang)
			doc, err := html.Parse(bytes.NewReader(page))
			if err != nil {
				t.Fatal(err)
			}
			var ths, tds []string
			var rects, svgs, tables int
			walk(doc, func(n *html.Node) {
				switch n.Data {
				case "script", "link", "iframe", "img", "object", "embed":
					t.Errorf("<%s> on a self-contained page", n.Data)
				case "svg":
					svgs++
				case "rect":
					rects++
				case "th":
					ths = append(ths, textOf(n))
				case "td":
					tds = append(tds, textOf(n))
				case "table":
					tables++
				case "html":
					for _, a := range n.Attr {
						if a.Key == "lang" && a.Val != tc.htmlLang {
							t.Errorf("html lang %q, want %q", a.Val, tc.htmlLang)
						}
					}
				}
				for _, a := range n.Attr {
					v := strings.ToLower(a.Val)
					if a.Key == "src" || a.Key == "href" || strings.Contains(v, "http:") || strings.Contains(v, "https:") ||
						strings.Contains(v, "//") || strings.Contains(v, "url(") {
						t.Errorf("<%s %s=%q> reaches outside the page", n.Data, a.Key, a.Val)
					}
				}
			})
			for _, bad := range []string{"http://", "https://", "@import", "url(", "rcYuan", "@font-face"} {
				if bytes.Contains(page, []byte(bad)) {
					t.Errorf("page contains %q", bad)
				}
			}
			if svgs != 1 || rects < 4 { // 4 findings first seen in the period, on 3 days, in 2 kinds (+ legend)
				t.Errorf("chart: %d svg, %d rects", svgs, rects)
			}
			if tables != 3 {
				t.Errorf("%d tables, want summary, findings, runs", tables)
			}
			joinedTH := "|" + strings.Join(ths, "|") + "|"
			for _, w := range tc.wantTH {
				if !strings.Contains(joinedTH, "|"+w+"|") {
					t.Errorf("no column headed %q in %q", w, ths)
				}
			}
			for _, raw := range []string{"at_stake", "platform_trade_no", "out_trade_no", "review_status", "kind", "seen_count"} {
				if strings.Contains(joinedTH, "|"+raw+"|") {
					t.Errorf("column headed with the code name %q", raw)
				}
			}
			joinedTD := "|" + strings.Join(tds, "|") + "|"
			for _, w := range tc.wantCell {
				if !strings.Contains(joinedTD, "|"+w+"|") {
					t.Errorf("no cell %q", w)
				}
			}
			if strings.Contains(joinedTD, "|AMOUNT_MISMATCH|") || strings.Contains(joinedTD, "|UNKNOWN_ORDER|") {
				t.Error("kinds shown as codes")
			}
			// Tables fit the page: fixed layout at full width, column shares adding up to 100%.
			if !bytes.Contains(page, []byte("table { width: 100%; table-layout: fixed;")) {
				t.Error("tables are not laid out to fit the page")
			}
		})
	}
}

// TestReportHTMLColumnsFit: every table's column shares add up to 100%, and at a 1200px
// page every word a person reads (headings, kinds, statuses; not numbers or trade numbers,
// which may break) fits its column, so none wraps one letter per line.
func TestReportHTMLColumnsFit(t *testing.T) {
	t.Parallel()
	const pageWidth, charWidth, padding = 1200.0, 8.0, 12.0 // px: .8rem bold Latin text, cell padding
	doc, err := html.Parse(bytes.NewReader(renderReport(t, "html", render.LangEN)))
	if err != nil {
		t.Fatal(err)
	}
	walk(doc, func(table *html.Node) {
		if table.Data != "table" {
			return
		}
		var widths []int
		var rows [][]string
		walk(table, func(n *html.Node) {
			switch n.Data {
			case "col":
				for _, a := range n.Attr {
					var w int
					if a.Key == "style" {
						if _, err := fmt.Sscanf(a.Val, "width: %d%%", &w); err != nil || w < 3 {
							t.Errorf("column style %q", a.Val)
						}
						widths = append(widths, w)
					}
				}
			case "tr":
				var cells []string
				for c := n.FirstChild; c != nil; c = c.NextSibling {
					if c.Type == html.ElementNode && (c.Data == "td" || c.Data == "th") {
						cells = append(cells, textOf(c))
					}
				}
				rows = append(rows, cells)
			}
		})
		total := 0
		for _, w := range widths {
			total += w
		}
		if total != 100 {
			t.Errorf("column shares add up to %d%%", total)
		}
		for _, row := range rows {
			for i, cell := range row {
				if i >= len(widths) {
					t.Fatalf("row %q has more cells than columns %v", row, widths)
				}
				room := pageWidth*float64(widths[i])/100 - padding
				for _, word := range strings.Fields(cell) {
					if strings.ContainsAny(word, "0123456789") && len([]rune(word)) > 16 {
						continue // a trade number (28 digits) may break; a merchant id, an amount or a time may not
					}
					if need := float64(len([]rune(word))) * charWidth; need > room {
						t.Errorf("%q needs %.0fpx, its column (%d%%) has %.0fpx", word, need, widths[i], room)
					}
				}
			}
		}
	})
}

func TestReportXLSXForFinance(t *testing.T) {
	t.Parallel()
	for _, lang := range []render.Lang{render.LangEN, render.LangZH} {
		f, err := excelize.OpenReader(bytes.NewReader(renderReport(t, "xlsx", lang)))
		if err != nil {
			t.Fatal(err)
		}
		sheets := f.GetSheetList()
		want := []string{render.Label(lang, "report.sheet.summary"), render.Label(lang, "report.sheet.findings"), render.Label(lang, "report.sheet.runs"), render.Label(lang, "report.sheet.statements")}
		if strings.Join(sheets, ",") != strings.Join(want, ",") {
			t.Fatalf("%s: sheets %q, want %q", lang, sheets, want)
		}
		findings := want[1]
		panes, err := f.GetPanes(findings)
		if err != nil || !panes.Freeze || panes.YSplit != 1 || panes.TopLeftCell != "A2" {
			t.Errorf("%s: findings panes %+v (%v), want the header row frozen", lang, panes, err)
		}
		names := f.GetDefinedName()
		filtered := map[string]string{}
		for _, n := range names {
			if n.Name == "_xlnm._FilterDatabase" {
				filtered[n.Scope] = n.RefersTo
			}
		}
		// A to W: the twenty-three columns of FindingCSVHeader.
		if ref := filtered[findings]; !strings.Contains(ref, "$A$1:$W$6") {
			t.Errorf("%s: findings autofilter %q (all %+v)", lang, ref, names)
		}
		if _, ok := filtered[want[2]]; !ok {
			t.Errorf("%s: runs sheet has no autofilter", lang)
		}
		header, _ := f.GetCellValue(findings, "E1")
		if header != render.Label(lang, "out_trade_no") {
			t.Errorf("%s: header E1 %q", lang, header)
		}
		// G2 is the first finding's own amount: a number with the ¥ money format.
		style, err := f.GetCellStyle(findings, "G2")
		if err != nil {
			t.Fatal(err)
		}
		st, err := f.GetStyle(style)
		if err != nil || st.CustomNumFmt == nil || !strings.Contains(*st.CustomNumFmt, "#,##0.00") || !strings.Contains(*st.CustomNumFmt, "¥") {
			t.Errorf("%s: amount style %+v (%v)", lang, st, err)
		}
		if raw, _ := f.GetCellValue(findings, "G2", excelize.Options{RawCellValue: true}); raw != "1234.56" {
			t.Errorf("%s: raw amount %q", lang, raw)
		}
		// The trade number column is wide enough for the 28-digit number.
		if w, err := f.GetColWidth(findings, "F"); err != nil || w < 28 {
			t.Errorf("%s: platform trade no. column %.1f wide", lang, w)
		}
		if rows, _ := f.GetRows(want[2]); len(rows) != 4 || rows[2][len(rows[2])-1] != "database lost" {
			t.Errorf("%s: runs sheet %q", lang, rows)
		}
		// Cell types as a spreadsheet sums and sorts them: the trade number is text (never
		// 4.2E+27), the first-seen time a date, the statement's fees a number to five decimals.
		if typ, _ := f.GetCellType(findings, "F2"); typ != excelize.CellTypeSharedString && typ != excelize.CellTypeInlineString {
			t.Errorf("%s: the platform trade number is a %v cell, want text", lang, typ)
		}
		numberWithFormat := func(sheet, cell, format string) {
			t.Helper()
			style, _ := f.GetCellStyle(sheet, cell)
			st, err := f.GetStyle(style)
			raw, _ := f.GetCellValue(sheet, cell, excelize.Options{RawCellValue: true})
			if _, perr := strconv.ParseFloat(raw, 64); err != nil || perr != nil || st.CustomNumFmt == nil || !strings.Contains(*st.CustomNumFmt, format) {
				t.Errorf("%s: %s!%s is %q with format %v (%v): want a number formatted %s", lang, sheet, cell, raw, st.CustomNumFmt, err, format)
			}
		}
		numberWithFormat(findings, "M2", "yyyy-mm-dd hh:mm:ss")
		// Printed landscape, one page wide, the header row on every page.
		for _, sheet := range sheets {
			layout, err := f.GetPageLayout(sheet)
			if err != nil || layout.Orientation == nil || *layout.Orientation != "landscape" || layout.FitToWidth == nil || *layout.FitToWidth != 1 {
				t.Errorf("%s: %s prints %+v (%v), want landscape, one page wide", lang, sheet, layout, err)
			}
		}
		titles := map[string]string{}
		for _, n := range names {
			if n.Name == "_xlnm.Print_Titles" {
				titles[n.Scope] = n.RefersTo
			}
		}
		if got := titles[findings]; !strings.HasSuffix(got, "!$1:$1") {
			t.Errorf("%s: the findings sheet repeats %q on each printed page, want its header row", lang, got)
		}
		if shown, _ := f.GetCellValue(findings, "M2"); !strings.HasPrefix(shown, "2026-11-") {
			t.Errorf("%s: first seen shows %q, want the date in the report's zone", lang, shown)
		}
		f.Close()
	}
}

func TestYuan(t *testing.T) {
	t.Parallel()
	for in, want := range map[int64]string{0: "¥0.00", 5: "¥0.05", 123456: "¥1,234.56", 100000000: "¥1,000,000.00",
		-99999: "-¥999.99", 99999999999: "¥999,999,999.99"} {
		if got := render.Yuan(in); got != want {
			t.Errorf("Yuan(%d) = %q, want %q", in, got, want)
		}
	}
}

func TestLabel(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in   string
		want render.Lang
		ok   bool
	}{{"", render.LangEN, true}, {"en-US", render.LangEN, true}, {"zh", render.LangZH, true}, {"zh-CN", render.LangZH, true},
		{"zh-Hans", render.LangZH, true}, {"fr", "", false}} {
		got, err := render.ParseLang(tc.in)
		if got != tc.want || (err == nil) != tc.ok {
			t.Errorf("ParseLang(%q) = %q, %v", tc.in, got, err)
		}
	}
	// Every kind, status and resolution people can meet has a label in both languages.
	var keys []string
	for _, k := range reconcile.MismatchKinds {
		keys = append(keys, string(k))
	}
	for _, s := range reconcile.ReviewStatuses {
		keys = append(keys, string(s))
	}
	for _, r := range reconcile.Resolutions {
		keys = append(keys, string(r))
	}
	keys = append(keys, render.FindingCSVHeader...)
	for _, k := range keys {
		en, zh := render.Label(render.LangEN, k), render.Label(render.LangZH, k)
		if en == k && k != "id" || zh == en {
			t.Errorf("key %q: en %q zh %q", k, en, zh)
		}
	}
	if got := render.Label(render.LangZH, "no-such-key"); got != "no-such-key" {
		t.Errorf("unknown key: %q", got)
	}
}

// TestReportCSVTotalsRows: the CSV's totals rows carry the code TOTAL whatever the language
// (scripts read it), where the pages show a word for people.
func TestReportCSVTotalsRows(t *testing.T) {
	t.Parallel()
	for _, lang := range []render.Lang{render.LangEN, render.LangZH} {
		cr := csv.NewReader(bytes.NewReader(renderReport(t, "csv", lang)))
		cr.FieldsPerRecord = -1 // each section has its own columns
		rows, err := cr.ReadAll()
		if err != nil {
			t.Fatal(err)
		}
		totals := 0
		for _, r := range rows {
			if len(r) > 1 && r[1] == "TOTAL" {
				totals++
			}
			if slices.Contains(r, "Total") || slices.Contains(r, "合计") {
				t.Errorf("%s: a CSV row shows the word, not the code: %q", lang, r)
			}
		}
		if totals == 0 {
			t.Errorf("%s: no TOTAL row in the CSV", lang)
		}
	}
}
