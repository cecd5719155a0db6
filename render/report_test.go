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
	// Identifiers a spreadsheet would mangle: an order number with leading zeros, a refund
	// number; our status, a proposal and its approval.
	findings[0].LocalStatus, findings[0].PlatformStatus = "PAID", "TRADE_SUCCESS"
	findings[2].OutTradeNo = "000123456789"
	findings[1].OutRefundNo, findings[1].Resolution, findings[1].ProposedBy = "RF-2-0001", "refunded", "ann@example.com"
	findings[3].Resolution, findings[3].ResolvedBy, findings[3].ApprovedBy = "written_off", "ann@example.com", "cfo@example.com"
	findings[3].Note = "below cost 低于成本"
	v2 := int64(2)
	audit := reconcile.AuditList{
		{AuditEntry: reconcile.AuditEntry{ID: 1, MismatchID: 4, Action: "propose", Actor: "ann@example.com", OSUser: "ann",
			DBUser: "payrecon_reviewer", FromStatus: "OPEN", ToStatus: "PENDING_APPROVAL", Resolution: "written_off", EvidenceVersion: &v2,
			Note: "below cost 低于成本", CreatedAt: from.Add(51 * time.Hour)}, OutTradeNo: "ORDER-4-WITH-A-RATHER-LONG-NUMBER"},
		{AuditEntry: reconcile.AuditEntry{ID: 2, MismatchID: 4, Action: "approve", Actor: "cfo@example.com", DBUser: "payrecon_reviewer",
			FromStatus: "PENDING_APPROVAL", ToStatus: "RESOLVED", CreatedAt: from.Add(52 * time.Hour)}, OutTradeNo: "ORDER-4-WITH-A-RATHER-LONG-NUMBER"},
	}
	rep := reconcile.Report{Audit: audit, AuditCount: int64(len(audit)), From: from, To: from.Add(72 * time.Hour), Findings: reconcile.FindingList(findings),
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
			if tables != 4 {
				t.Errorf("%d tables, want summary, findings, runs, review moves", tables)
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
			// A table wider than the page scrolls in its own box (the page itself never runs
			// off the right edge); TestReportHTMLBreaksNoToken holds its cells whole.
			if n := bytes.Count(page, []byte(`<div class="wide"><table>`)); n != tables {
				t.Errorf("%d of %d tables in a scrolling box", n, tables)
			}
		})
	}
}

// TestReportHTMLBreaksNoToken: no word is broken inside, in either language. The style
// sheet allows no break inside a word (no overflow-wrap: anywhere, break-all, hyphens);
// every cell is one line (td nowrap) but labels (kinds, statuses, actions: words, which
// wrap at spaces only, keep-all keeping a Chinese word whole, as headings do) and prose
// (notes, errors: at spaces and between CJK characters), and only the note and error
// columns hold prose; the identifiers, amounts and times of the report sit in cells that
// never wrap.
func TestReportHTMLBreaksNoToken(t *testing.T) {
	t.Parallel()
	for _, lang := range render.Langs {
		page := renderReport(t, "html", lang)
		style := string(page[bytes.Index(page, []byte("<style>")):bytes.Index(page, []byte("</style>"))])
		for _, bad := range []string{"anywhere", "break-all", "break-word", "hyphens"} {
			if strings.Contains(style, bad) {
				t.Errorf("%s: the style sheet breaks words (%q)", lang, bad)
			}
		}
		for _, rule := range []string{"td { white-space: nowrap; }", "th { background: #f6f8fa; font-weight: 600; word-break: keep-all; }",
			"td.label { white-space: normal; word-break: keep-all; }", "td.prose { white-space: normal;", ".wide { overflow-x: auto; }"} {
			if !strings.Contains(style, rule) {
				t.Errorf("%s: the style sheet lacks %q", lang, rule)
			}
		}
		doc, err := html.Parse(bytes.NewReader(page))
		if err != nil {
			t.Fatal(err)
		}
		proseColumns := []string{render.Label(lang, "note"), render.Label(lang, "error")}
		oneLine := map[string]bool{}  // the text of every cell that never wraps
		labelled := map[string]bool{} // the text of every label cell
		walk(doc, func(table *html.Node) {
			if table.Data != "table" {
				return
			}
			var heads []string
			walk(table, func(n *html.Node) {
				switch n.Data {
				case "th":
					heads = append(heads, textOf(n))
				case "tr":
					col := 0
					for c := n.FirstChild; c != nil; c = c.NextSibling {
						if c.Type != html.ElementNode || c.Data != "td" {
							continue
						}
						classes := []string{}
						for _, a := range c.Attr {
							if a.Key == "class" {
								classes = strings.Fields(a.Val)
							}
						}
						prose, label := slices.Contains(classes, "prose"), slices.Contains(classes, "label")
						inFoot := n.Parent != nil && n.Parent.Data == "tfoot"
						if prose && !inFoot && (col >= len(heads) || !slices.Contains(proseColumns, heads[col])) {
							t.Errorf("%s: a %q cell may wrap: %q", lang, heads[col], textOf(c))
						}
						switch {
						case label:
							labelled[textOf(c)] = true
						case !prose:
							oneLine[textOf(c)] = true
						}
						col++
					}
				}
			})
		})
		for _, token := range []string{"2026112622001400001234567890", "ORDER-1-WITH-A-RATHER-LONG-NUMBER", "000123456789", "RF-2-0001",
			"2021000000000001", "¥1,234.56", "2026-11-26 02:00", "ann@example.com", "4"} {
			if !oneLine[token] {
				t.Errorf("%s: %q is not in a cell that keeps it on one line", lang, token)
			}
		}
		for _, key := range []string{"AMOUNT_MISMATCH", "PENDING_APPROVAL", "audit.propose", "written_off", "alipay"} {
			if !labelled[render.Label(lang, key)] {
				t.Errorf("%s: %q is not in a label cell", lang, render.Label(lang, key))
			}
		}
	}
}

func TestReportXLSXForFinance(t *testing.T) {
	t.Parallel()
	for _, lang := range []render.Lang{render.LangEN, render.LangZH} {
		f, err := excelize.OpenReader(bytes.NewReader(renderReport(t, "xlsx", lang)))
		if err != nil {
			t.Fatal(err)
		}
		sheets := f.GetSheetList()
		want := []string{render.Label(lang, "report.sheet.summary"), render.Label(lang, "report.sheet.findings"), render.Label(lang, "report.sheet.runs"),
			render.Label(lang, "report.sheet.statements"), render.Label(lang, "report.sheet.audit")}
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
		checkXLSXCells(t, f, lang)
		f.Close()
	}
}

// checkXLSXCells reads the workbook as a spreadsheet does: amounts and counts are numbers,
// times are dates (a number with a date format), identifiers are text that keeps every
// digit, and every coded value (kind, status, resolution, our status, dry run, audit
// action) is a word of lang, never its code; the platform's status stays its own word.
func checkXLSXCells(t *testing.T, f *excelize.File, lang render.Lang) {
	t.Helper()
	findings, runs, audit := render.Label(lang, "report.sheet.findings"), render.Label(lang, "report.sheet.runs"), render.Label(lang, "report.sheet.audit")
	typed := func(sheet, cell string, want excelize.CellType) string {
		t.Helper()
		typ, err := f.GetCellType(sheet, cell)
		if want == excelize.CellTypeNumber && typ == excelize.CellTypeUnset {
			typ = excelize.CellTypeNumber // a streamed number carries no type attribute
		}
		if err != nil || typ != want {
			t.Errorf("%s: %s!%s is a %v cell (%v), want %v", lang, sheet, cell, typ, err, want)
		}
		v, _ := f.GetCellValue(sheet, cell)
		return v
	}
	text := func(sheet, cell, want string) {
		t.Helper()
		if got := typed(sheet, cell, excelize.CellTypeInlineString); got != want {
			t.Errorf("%s: %s!%s shows %q, want %q", lang, sheet, cell, got, want)
		}
	}
	date := func(sheet, cell string) {
		t.Helper()
		typed(sheet, cell, excelize.CellTypeNumber)
		style, _ := f.GetCellStyle(sheet, cell)
		if st, err := f.GetStyle(style); err != nil || st.CustomNumFmt == nil || !strings.Contains(*st.CustomNumFmt, "yyyy-mm-dd") {
			t.Errorf("%s: %s!%s has no date format", lang, sheet, cell)
		}
	}
	// Findings: row 2 is finding 1, row 3 finding 2 (proposed), row 4 finding 3.
	typed(findings, "A2", excelize.CellTypeNumber) // id
	text(findings, "B2", render.Label(lang, "AMOUNT_MISMATCH"))
	text(findings, "C2", render.Label(lang, "alipay"))
	text(findings, "D2", "2021000000000001")
	text(findings, "E4", "000123456789") // leading zeros kept
	text(findings, "F2", "2026112622001400001234567890")
	for _, c := range []string{"G2", "H2", "I2", "L2"} { // our amount, theirs, at stake, times seen
		typed(findings, c, excelize.CellTypeNumber)
	}
	text(findings, "J2", render.Label(lang, "PAID"))
	text(findings, "K2", "TRADE_SUCCESS")
	date(findings, "M2")
	date(findings, "N2")
	text(findings, "O2", render.Label(lang, "OPEN"))
	text(findings, "O3", render.Label(lang, "PENDING_APPROVAL"))
	text(findings, "P3", render.Label(lang, "refunded"))
	text(findings, "U3", "RF-2-0001")
	text(findings, "V3", "ann@example.com")
	// Runs: a yes or no for people, not true/false.
	text(runs, "E2", render.Label(lang, "no"))
	text(runs, "B2", render.Label(lang, "scheduled"))
	// The review moves of the period, with who, what and why.
	header, _ := f.GetRows(audit)
	if len(header) != 3 || header[0][3] != render.Label(lang, "action") {
		t.Fatalf("%s: audit sheet %q, want a header and two moves", lang, header)
	}
	date(audit, "A2")
	typed(audit, "B2", excelize.CellTypeNumber) // finding id
	text(audit, "C2", "ORDER-4-WITH-A-RATHER-LONG-NUMBER")
	text(audit, "D2", render.Label(lang, "audit.propose"))
	text(audit, "E2", "ann@example.com")
	text(audit, "F2", "ann")
	text(audit, "G2", "payrecon_reviewer")
	text(audit, "H2", render.Label(lang, "OPEN"))
	text(audit, "I2", render.Label(lang, "PENDING_APPROVAL"))
	text(audit, "J2", render.Label(lang, "written_off"))
	typed(audit, "K2", excelize.CellTypeNumber) // evidence version
	text(audit, "L2", "below cost 低于成本")
	text(audit, "D3", render.Label(lang, "audit.approve"))
	if lang == render.LangZH {
		// Spelled out, so that a label table gone wrong cannot pass by agreeing with itself.
		for cell, want := range map[string]string{"B2": "金额不符", "O2": "待处理", "O3": "待审批", "J2": "已支付", "P3": "已退款"} {
			if got, _ := f.GetCellValue(findings, cell); got != want {
				t.Errorf("zh: %s!%s shows %q, want %q", findings, cell, got, want)
			}
		}
		if got, _ := f.GetCellValue(runs, "E2"); got != "否" {
			t.Errorf("zh: dry run shows %q, want 否", got)
		}
		if got, _ := f.GetCellValue(audit, "D2"); got != "提议" {
			t.Errorf("zh: the audit action shows %q, want 提议", got)
		}
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

// TestReportCSVIsOneTableForSpreadsheets: the CSV is the findings alone, one table a CSV
// reader takes whole (every record as wide as the header: csv.Reader's default check). It
// opens with a UTF-8 byte order mark, its one header row and its coded values are in the
// report's language, amounts are plain yuan and times RFC 3339 with their offset, and every
// identifier (order, 28-digit trade and refund numbers, merchant account) comes back
// exactly once its trailing tab, which keeps a long or zero-led number text in a
// spreadsheet, is trimmed.
func TestReportCSVIsOneTableForSpreadsheets(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		lang     render.Lang
		header   []string // the first columns
		kindOpen [2]string
	}{
		{render.LangEN, []string{"No.", "Kind of finding", "Platform", "Merchant account", "Our order no.", "Platform trade no."}, [2]string{"Amount differs", "Open"}},
		{render.LangZH, []string{"编号", "差异类型", "支付平台", "商户号", "商户订单号", "平台交易号"}, [2]string{"金额不符", "待处理"}},
	} {
		raw := renderReport(t, "csv", tc.lang)
		if !bytes.HasPrefix(raw, []byte("\xef\xbb\xbf")) {
			t.Fatalf("%s: no UTF-8 byte order mark: %q", tc.lang, raw[:min(len(raw), 16)])
		}
		rows, err := csv.NewReader(bytes.NewReader(raw[3:])).ReadAll()
		if err != nil {
			t.Fatalf("%s: not one table: %v\n%s", tc.lang, err, raw)
		}
		if len(rows) != 6 || !slices.Equal(rows[0][:len(tc.header)], tc.header) || len(rows[0]) != len(render.FindingCSVHeader) {
			t.Fatalf("%s: %d rows, header %q; want one header (%q...) and the five findings", tc.lang, len(rows), rows[0], tc.header)
		}
		col := func(key string) int { return slices.Index(render.FindingCSVHeader, key) }
		for _, r := range rows {
			if slices.Contains(r, "section") || slices.Contains(r, "TOTAL") || slices.Contains(r, "AMOUNT_MISMATCH") || slices.Contains(r, "OPEN") {
				t.Errorf("%s: a row of another table, or a code: %q", tc.lang, r)
			}
		}
		first := rows[1]
		if first[col("kind")] != tc.kindOpen[0] || first[col("review_status")] != tc.kindOpen[1] || first[col("local_status")] != render.Label(tc.lang, "PAID") {
			t.Errorf("%s: first finding %q: want kind, review status and our status in words", tc.lang, first)
		}
		if first[col("local_amount")] != "1234.56" || first[col("at_stake")] != "1233.56" || first[col("first_seen_at")] != "2026-11-26T02:00:00+08:00" {
			t.Errorf("%s: first finding %q: want plain yuan and RFC 3339 times", tc.lang, first)
		}
		// Every identifier survives, and the long or zero-led ones are kept as text.
		want := map[string][]string{
			"out_trade_no":      {"ORDER-1-WITH-A-RATHER-LONG-NUMBER", "ORDER-2-WITH-A-RATHER-LONG-NUMBER", "000123456789", "ORDER-4-WITH-A-RATHER-LONG-NUMBER", "ORDER-5-WITH-A-RATHER-LONG-NUMBER"},
			"platform_trade_no": slices.Repeat([]string{"2026112622001400001234567890"}, 5),
			"merchant_id":       slices.Repeat([]string{"2021000000000001"}, 5),
			"out_refund_no":     {"", "RF-2-0001", "", "", ""},
		}
		for key, ids := range want {
			for i, id := range ids {
				cell := rows[i+1][col(key)]
				if strings.TrimSpace(cell) != id {
					t.Errorf("%s: finding %d's %s reads %q, want %q", tc.lang, i+1, key, cell, id)
				}
				if digits := strings.Trim(id, "0123456789") == ""; digits && id != "" && cell != id+"\t" {
					t.Errorf("%s: finding %d's %s %q is not kept as text (want a trailing tab)", tc.lang, i+1, key, cell)
				}
			}
		}
	}
}

// TestReportNamesThePeriodAsPeopleGaveIt: a period of whole days reads as its first and
// last days, both included (the day asked for, not the midnight after it), on the page and
// in the workbook; a period of exact instants reads as them, the end excluded.
func TestReportNamesThePeriodAsPeopleGaveIt(t *testing.T) {
	t.Parallel()
	days := sampleReport() // 26 November 00:00 to 29 November 00:00
	instants := sampleReport()
	instants.From, instants.To = instants.From.Add(10*time.Hour), instants.From.Add(12*time.Hour)
	for _, c := range []struct {
		rep                reconcile.Report
		page               string
		toLabel, from, end string
	}{
		{days, "2026-11-26 – 2026-11-28 (CST)", "report.to_day", "2026-11-26", "2026-11-28"},
		{instants, "2026-11-26 10:00 – 2026-11-26 12:00 (CST)", "report.to", "2026-11-26 10:00:00", "2026-11-26 12:00:00"},
	} {
		for _, lang := range render.Langs {
			doc := render.ReportDoc{Report: c.rep, Loc: shanghai, Generated: c.rep.To, Lang: lang}
			var page, book bytes.Buffer
			if err := doc.Write(&page, "html"); err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(page.String(), c.page) {
				t.Errorf("%s: the page does not name the period %q", lang, c.page)
			}
			if err := doc.Write(&book, "xlsx"); err != nil {
				t.Fatal(err)
			}
			f, err := excelize.OpenReader(&book)
			if err != nil {
				t.Fatal(err)
			}
			sheet := render.Label(lang, "report.sheet.summary")
			a3, _ := f.GetCellValue(sheet, "A3")
			b2, _ := f.GetCellValue(sheet, "B2")
			b3, _ := f.GetCellValue(sheet, "B3")
			if a3 != render.Label(lang, c.toLabel) || b2 != c.from || b3 != c.end {
				t.Errorf("%s: the workbook names the period %q %q, %q %q", lang, "from", b2, a3, b3)
			}
			f.Close()
		}
	}
}
