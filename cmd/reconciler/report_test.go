package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/xuri/excelize/v2"

	"github.com/payrecon/payrecon/render"
	"github.com/payrecon/payrecon/repo/repotest"
)

const xssTradeNo = "<script>alert(1)</script>"

// seedReportData fills a database with the findings and runs of 28 November 2026 (China
// time) and a few outside it.
func seedReportData(t *testing.T) *repotest.DB {
	t.Helper()
	db := repotest.NewDB(t)
	h := time.Hour
	for _, s := range []reviewSeed{
		{otn: "ORD-A", local: 10000, plat: 9990, at: reviewDay.Add(9 * h), seen: 2},                  // at stake 0.10
		{otn: "ORD-B", local: 250000, plat: 100, at: reviewDay.Add(-30 * h), last: reviewDay.Add(h)}, // last seen in: 2499.00
		{otn: xssTradeNo, kind: "UNKNOWN_ORDER", platform: "wechatpay", plat: 123456, at: reviewDay.Add(12 * h),
			status: "ACKNOWLEDGED"}, // 1234.56
		{otn: "=HYPERLINK(\"http://evil\")", kind: "UNKNOWN_ORDER", plat: 1, at: reviewDay.Add(13 * h)}, // 0.01
		{otn: "ORD-OUT", local: 1, plat: 99999, at: reviewDay.Add(-72 * h)},                             // outside
		{otn: "ORD-NEXT-DAY", local: 1, plat: 99999, at: reviewDay.Add(24 * h)},                         // outside: [from, to)
	} {
		seedReview(t, db, s)
	}
	for _, r := range []struct {
		mode, status string
		started      time.Time
		scanned      int
	}{
		{"scheduled", "succeeded", reviewDay.Add(h), 40},
		{"backfill", "failed", reviewDay.Add(20 * h), 7},
		{"once", "succeeded", reviewDay.Add(-h), 1000}, // outside
	} {
		db.MustExec(`INSERT INTO reconcile_runs (mode, status, started_at, finished_at, scanned, repaired, mismatches, errors, shard)
			VALUES ($1, $2, $3, $3::timestamptz + interval '2 minutes', $4, 3, 2, 1, '0/2')`, r.mode, r.status, r.started, r.scanned)
	}
	return db
}

func reportArgs(db *repotest.DB, extra ...string) []string {
	return append([]string{"report", "--database-url", db.URL, "--from", "2026-11-28", "--to", "2026-11-29"}, extra...)
}

func TestReportCSV(t *testing.T) {
	t.Parallel()
	db := seedReportData(t)
	code, out, errOut := reviewCLI(t, reportArgs(db, "--format", "csv")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	// UTF-8 with a byte order mark, so that Excel reads Chinese as Chinese.
	if !strings.HasPrefix(out, "\ufeff") {
		t.Fatalf("the CSV does not start with a UTF-8 byte order mark: %q", out[:min(len(out), 20)])
	}
	r := csv.NewReader(strings.NewReader(strings.TrimPrefix(out, "\ufeff")))
	r.FieldsPerRecord = -1
	recs, err := r.ReadAll()
	if err != nil {
		t.Fatalf("csv does not parse: %v\n%s", err, out)
	}
	// Every long number (a merchant account, a trade number) is kept as text for a
	// spreadsheet with a trailing tab, and comes back whole when trimmed.
	protected := 0
	for _, rec := range recs {
		for _, cell := range rec {
			digits := strings.TrimSpace(cell)
			if len(digits) >= 12 && strings.Trim(digits, "0123456789") == "" {
				if cell != digits+"\t" {
					t.Errorf("the long number %q is not kept as text", cell)
				}
				protected++
			}
		}
	}
	if protected == 0 {
		t.Fatal("no long number in the report to check")
	}
	sections := map[string][][]string{}
	headers := map[int][]string{}
	for i, rec := range recs {
		if rec[0] == "section" {
			headers[i] = rec
			continue
		}
		sections[rec[0]] = append(sections[rec[0]], rec[1:])
	}
	if len(headers) != 5 {
		t.Fatalf("want 5 section headers (report, summary, findings, runs, statements), got %d:\n%s", len(headers), out)
	}
	if got := sections["report"]; len(got) != 1 || got[0][0] != "2026-11-28T00:00:00+08:00" ||
		got[0][1] != "2026-11-29T00:00:00+08:00" || got[0][2] != "Asia/Shanghai" {
		t.Fatalf("report row %q", got)
	}
	wantSummary := [][]string{
		{"AMOUNT_MISMATCH", "OPEN", "2", "3", "2600.00", "100.90", "2499.10"},
		{"UNKNOWN_ORDER", "OPEN", "1", "1", "0.00", "0.01", "0.01"},
		{"UNKNOWN_ORDER", "ACKNOWLEDGED", "1", "1", "0.00", "1234.56", "1234.56"},
	}
	if got := sections["summary"]; !slices.EqualFunc(got, wantSummary, slices.Equal) {
		t.Fatalf("summary %q, want %q", got, wantSummary)
	}
	if got := sections["summary_total"]; len(got) != 1 || !slices.Equal(got[0], []string{"TOTAL", "", "4", "5", "2600.00", "1335.47", "3733.67"}) {
		t.Fatalf("summary total %q", got)
	}
	findings := sections["finding"]
	var tradeNos []string
	otnCol := slices.Index(render.FindingCSVHeader, "out_trade_no")
	for _, f := range findings {
		tradeNos = append(tradeNos, f[otnCol])
	}
	want := []string{"ORD-B", "ORD-A", xssTradeNo, `'=HYPERLINK("http://evil")`}
	if !slices.Equal(tradeNos, want) {
		t.Fatalf("findings %q, want %q (first seen order, the formula defused)", tradeNos, want)
	}
	if f := findings[1]; f[slices.Index(render.FindingCSVHeader, "local_amount")] != "100.00" || f[slices.Index(render.FindingCSVHeader, "platform_amount")] != "99.90" {
		t.Fatalf("finding row %q", f)
	}
	runs := sections["run"]
	if len(runs) != 2 || runs[0][1] != "scheduled" || runs[0][2] != "succeeded" || runs[0][9] != "40" ||
		runs[1][1] != "backfill" || runs[1][2] != "failed" || runs[1][3] != "0/2" {
		t.Fatalf("runs %q", runs)
	}
	if got := sections["run_total"]; len(got) != 1 || got[0][2] != "1 succeeded, 1 failed" || got[0][9] != "47" ||
		got[0][10] != "6" || got[0][14] != "4" || got[0][16] != "2" {
		t.Fatalf("run totals %q", got)
	}
}

func TestReportJSON(t *testing.T) {
	t.Parallel()
	db := seedReportData(t)
	// The format also follows the --out file's extension.
	path := filepath.Join(t.TempDir(), "report.json")
	code, _, errOut := reviewCLI(t, reportArgs(db, "--out", path)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var rep struct {
		From     string `json:"from"`
		To       string `json:"to"`
		Timezone string `json:"timezone"`
		Totals   struct {
			Count        int64  `json:"count"`
			AtStakeMinor int64  `json:"at_stake_minor"`
			AtStake      string `json:"at_stake"`
		} `json:"totals"`
		Summary []struct {
			Kind, ReviewStatus string
			Count              int64 `json:"count"`
		} `json:"summary"`
		Findings []struct {
			OutTradeNo string `json:"out_trade_no"`
			AtStake    string `json:"at_stake"`
		} `json:"findings"`
		Runs []struct {
			Mode    string `json:"mode"`
			Scanned int64  `json:"scanned"`
		} `json:"runs"`
		RunTotals struct {
			Runs     int64            `json:"runs"`
			Scanned  int64            `json:"scanned"`
			ByStatus map[string]int64 `json:"by_status"`
		} `json:"run_totals"`
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("decode: %v\n%s", err, b)
	}
	if rep.From != "2026-11-28T00:00:00+08:00" || rep.To != "2026-11-29T00:00:00+08:00" || rep.Timezone != "Asia/Shanghai" {
		t.Fatalf("period %s - %s %s", rep.From, rep.To, rep.Timezone)
	}
	if rep.Totals.Count != 4 || rep.Totals.AtStakeMinor != 373367 || rep.Totals.AtStake != "3733.67" || len(rep.Summary) != 3 {
		t.Fatalf("totals %+v summary %+v", rep.Totals, rep.Summary)
	}
	if len(rep.Findings) != 4 || rep.Findings[2].OutTradeNo != xssTradeNo || rep.Findings[2].AtStake != "1234.56" {
		t.Fatalf("findings %+v", rep.Findings)
	}
	if len(rep.Runs) != 2 || rep.RunTotals.Runs != 2 || rep.RunTotals.Scanned != 47 || rep.RunTotals.ByStatus["failed"] != 1 {
		t.Fatalf("runs %+v totals %+v", rep.Runs, rep.RunTotals)
	}
}

func TestReportXLSX(t *testing.T) {
	t.Parallel()
	db := seedReportData(t)
	path := filepath.Join(t.TempDir(), "report.xlsx")
	code, _, errOut := reviewCLI(t, reportArgs(db, "--format", "xlsx", "--out", path)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	f, err := excelize.OpenFile(path)
	if err != nil {
		t.Fatalf("the xlsx does not re-open: %v", err)
	}
	defer f.Close()
	if got := f.GetSheetList(); !slices.Equal(got, []string{"Summary", "Findings", "Runs", "Statements"}) {
		t.Fatalf("sheets %q", got)
	}
	rows, err := f.GetRows("Findings")
	if err != nil {
		t.Fatal(err)
	}
	labels := make([]string, len(render.FindingCSVHeader))
	for i, h := range render.FindingCSVHeader {
		labels[i] = render.Label(render.LangEN, h)
	}
	if len(rows) != 5 || !slices.Equal(rows[0], labels) || rows[0][4] != "Our order no." {
		t.Fatalf("findings sheet %q", rows)
	}
	otnCol := slices.Index(render.FindingCSVHeader, "out_trade_no")
	var tradeNos []string
	for _, r := range rows[1:] {
		tradeNos = append(tradeNos, r[otnCol])
	}
	if want := []string{"ORD-B", "ORD-A", xssTradeNo, `=HYPERLINK("http://evil")`}; !slices.Equal(tradeNos, want) {
		t.Fatalf("trade numbers %q, want %q", tradeNos, want)
	}
	// Platform text is a string cell, never a formula.
	otnCell, _ := excelize.CoordinatesToCellName(otnCol+1, 5)
	if formula, err := f.GetCellFormula("Findings", otnCell); err != nil || formula != "" {
		t.Fatalf("cell %s holds formula %q (%v)", otnCell, formula, err)
	}
	// Amounts are numeric cells holding the exact decimal, shown with two decimals. The
	// streamed sheet writes a number's shortest exact text: 2500 for 2500.00.
	local, _ := excelize.CoordinatesToCellName(slices.Index(render.FindingCSVHeader, "local_amount")+1, 2)
	if raw, _ := f.GetCellValue("Findings", local, excelize.Options{RawCellValue: true}); raw != "2500" {
		t.Fatalf("raw amount %q, want 2500", raw)
	}
	if shown, _ := f.GetCellValue("Findings", local); shown != "¥2,500.00" {
		t.Fatalf("shown amount %q, want ¥2,500.00", shown)
	}
	if typ, _ := f.GetCellType("Findings", local); typ == excelize.CellTypeSharedString || typ == excelize.CellTypeInlineString {
		t.Fatalf("amount cell %s is text", local)
	}
	summary, _ := f.GetRows("Summary")
	var total []string
	for _, r := range summary {
		if len(r) > 0 && r[0] == "Total" {
			total = r
		}
	}
	if !slices.Equal(total, []string{"Total", "", "4", "5", "¥2,600.00", "¥1,335.47", "¥3,733.67"}) {
		t.Fatalf("summary total row %q in %q", total, summary)
	}
	runs, _ := f.GetRows("Runs")
	if len(runs) != 4 || runs[1][1] != "Scheduled" || runs[2][1] != "Backfill" || runs[3][0] != "Total" || runs[3][9] != "47" {
		t.Fatalf("runs sheet %q", runs)
	}

	// A non-terminal stdout takes the xlsx too.
	code, out, errOut := reviewCLI(t, reportArgs(db, "--format", "xlsx")...)
	if code != 0 {
		t.Fatalf("xlsx to stdout: exit %d: %s", code, errOut)
	}
	g, err := excelize.OpenReader(bytes.NewReader([]byte(out)))
	if err != nil {
		t.Fatalf("xlsx from stdout: %v", err)
	}
	g.Close()
}

func TestReportHTMLEscapesPlatformText(t *testing.T) {
	t.Parallel()
	db := seedReportData(t)
	code, out, errOut := reviewCLI(t, reportArgs(db, "--format", "html")...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if strings.Contains(out, xssTradeNo) || strings.Contains(strings.ToLower(out), "<script") {
		t.Fatal("the finding's out_trade_no reached the page unescaped")
	}
	for _, want := range []string{
		"&lt;script&gt;alert(1)&lt;/script&gt;",
		"<!DOCTYPE html>", "<style>", "Amounts in yuan (CNY).</p>",
		"Summary by kind and review status (3)", "Findings first or last seen in the period (4)",
		"Reconciliation runs started in the period (2)",
		`<td class="num">¥3,733.67</td>`, `<td class="num">¥1,234.56</td>`, "2026-11-28 00:00", "Asia/Shanghai",
		"<svg", "Amount differs", "Our order no.",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if strings.Contains(out, "ORD-OUT") || strings.Contains(out, "ORD-NEXT-DAY") {
		t.Error("findings outside the period are on the page")
	}
	if strings.Contains(out, "<link") || strings.Contains(out, "src=") {
		t.Error("the page must be self-contained")
	}
	if strings.Contains(out, "rcYuan") || strings.Contains(out, "<th>at_stake</th>") || strings.Contains(out, "<th>platform_trade_no</th>") {
		t.Error("the page shows code names to people")
	}
	// --lang zh labels the page in Simplified Chinese; a language we lack is exit 2.
	code, out, errOut = reviewCLI(t, reportArgs(db, "--format", "html", "--lang", "zh")...)
	if code != 0 || !strings.Contains(out, `<html lang="zh-Hans">`) || !strings.Contains(out, "金额不符") || !strings.Contains(out, "商户订单号") {
		t.Fatalf("--lang zh: exit %d: %s", code, errOut)
	}
	if code, _, errOut = reviewCLI(t, reportArgs(db, "--format", "html", "--lang", "fr")...); code != 2 || !strings.Contains(errOut, "--lang") {
		t.Fatalf("--lang fr: exit %d: %s", code, errOut)
	}
}

func TestReportUsageAndPeriod(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	tests := []struct {
		name    string
		args    []string
		code    int
		wantOut string
	}{
		{"bad format", []string{"--format", "pdf"}, 2, "--format"},
		{"from after to", []string{"--from", "2026-11-29", "--to", "2026-11-28"}, 2, "before --to"},
		{"from equals to", []string{"--from", "2026-11-28", "--to", "2026-11-28"}, 2, "before --to"},
		{"bad from", []string{"--from", "28/11/2026"}, 2, "--from"},
		{"stray argument", []string{"today"}, 2, "unexpected argument"},
		{"help", []string{"--help"}, 0, "-format"},
		{"default period", []string{"--format", "json"}, 0, `"findings": []`},
		{"to in the future", []string{"--from", "2098-12-01", "--to", "2099-01-01", "--format", "json"}, 0, `"to": "2099-01-01T00:00:00+08:00"`},
		{"a leap year", []string{"--from", "2028-01-01", "--to", "2029-01-01", "--format", "json"}, 0, `"to": "2029-01-01T00:00:00+08:00"`},
		{"over a year", []string{"--from", "2026-01-01", "--to", "2027-01-03"}, 2, "longer than 366 days"},
		{"all time", []string{"--from", "0001-01-01", "--to", "9999-12-31", "--format", "csv"}, 2, "366 days"},
		{"rfc 3339", []string{"--from", "2026-11-28T10:00:00Z", "--to", "2026-11-28T12:00:00Z", "--format", "json"}, 0,
			`"from": "2026-11-28T18:00:00+08:00"`},
		{"another zone", []string{"--from", "2026-11-28", "--to", "2026-11-29", "--timezone", "UTC", "--format", "json"}, 0,
			`"from": "2026-11-28T00:00:00Z"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"report", "--database-url", db.URL}, tc.args...)
			code, out, errOut := reviewCLI(t, args...)
			if code != tc.code || !strings.Contains(out+errOut, tc.wantOut) {
				t.Fatalf("exit %d (want %d), output lacks %q\nstdout: %s\nstderr: %s", code, tc.code, tc.wantOut, out, errOut)
			}
		})
	}
}
