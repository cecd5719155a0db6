package main

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
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

// reportArgs asks for the report of 28 November: dates are whole days, both included.
func reportArgs(db *repotest.DB, extra ...string) []string {
	return append([]string{"report", "--database-url", db.URL, "--from", "2026-11-28", "--to", "2026-11-28"}, extra...)
}

// TestReportCSV: the CSV is one table, the day's findings in the order first seen, opened
// by a UTF-8 byte order mark and one header row in the chosen language (English by
// default, --lang zh); kinds and statuses are words of that language, amounts plain yuan,
// times RFC 3339 with their offset; a long number is kept as text with a trailing tab and
// text a spreadsheet would run as a formula is defused.
func TestReportCSV(t *testing.T) {
	t.Parallel()
	db := seedReportData(t)
	for _, lang := range []render.Lang{render.LangEN, render.LangZH} {
		code, out, errOut := reviewCLI(t, reportArgs(db, "--format", "csv", "--lang", string(lang))...)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", lang, code, errOut)
		}
		// UTF-8 with a byte order mark, so that Excel reads Chinese as Chinese.
		if !strings.HasPrefix(out, "\ufeff") {
			t.Fatalf("%s: the CSV does not start with a UTF-8 byte order mark: %q", lang, out[:min(len(out), 20)])
		}
		// One table: encoding/csv refuses a record of another width than the header's.
		recs, err := csv.NewReader(strings.NewReader(strings.TrimPrefix(out, "\ufeff"))).ReadAll()
		if err != nil {
			t.Fatalf("%s: csv is not one table: %v\n%s", lang, err, out)
		}
		labels := make([]string, len(render.FindingCSVHeader))
		for i, h := range render.FindingCSVHeader {
			labels[i] = render.Label(lang, h)
		}
		if len(recs) != 5 || !slices.Equal(recs[0], labels) {
			t.Fatalf("%s: want the header %q and the day's 4 findings, got:\n%s", lang, labels, out)
		}
		col := func(rec []string, key string) string { return rec[slices.Index(render.FindingCSVHeader, key)] }
		var tradeNos []string
		for _, f := range recs[1:] {
			tradeNos = append(tradeNos, col(f, "out_trade_no"))
		}
		want := []string{"ORD-B", "ORD-A", xssTradeNo, `'=HYPERLINK("http://evil")`}
		if !slices.Equal(tradeNos, want) {
			t.Fatalf("%s: findings %q, want %q (first seen order, the formula defused)", lang, tradeNos, want)
		}
		a := recs[2] // ORD-A
		if col(a, "local_amount") != "100.00" || col(a, "platform_amount") != "99.90" || col(a, "at_stake") != "0.10" ||
			col(a, "first_seen_at") != "2026-11-28T09:00:00+08:00" || col(a, "kind") != render.Label(lang, "AMOUNT_MISMATCH") ||
			col(a, "review_status") != render.Label(lang, "OPEN") || col(a, "platform") != render.Label(lang, "alipay") {
			t.Fatalf("%s: finding row %q", lang, a)
		}
		if lang == render.LangZH && (recs[0][1] != "差异类型" || col(a, "kind") != "金额不符" || col(recs[3], "review_status") != "已确认") {
			t.Fatalf("zh: header %q, rows %q", recs[0], recs[1:])
		}
		// The merchant account (16 digits) is kept as text and comes back whole when trimmed.
		if m := col(a, "merchant_id"); m != "2021000000000001\t" {
			t.Fatalf("%s: merchant account %q, want it kept as text", lang, m)
		}
	}
}

// TestReportListsReviewMoves: a move made through the CLI is in the report of its day (the
// database stamps it now): the audit sheet of the XLSX, the audit list of the JSON.
func TestReportListsReviewMoves(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	id := seedReview(t, db, reviewSeed{otn: "ORD-MOVED", local: 100, plat: 90})
	if code, out, errOut := reviewCLI(t, "mismatches", "ack", fmt.Sprint(id), "--by", annAddr, "--database-url", db.URL, "--note", "on it"); code != 0 {
		t.Fatalf("ack: exit %d\n%s%s", code, out, errOut)
	}
	// Yesterday and today, both included (the move is now, in whichever of the two it is
	// in Shanghai when the test runs at midnight).
	today := time.Now().In(reviewDay.Location())
	period := []string{"--from", today.AddDate(0, 0, -1).Format(time.DateOnly), "--to", today.Format(time.DateOnly)}
	code, out, errOut := reviewCLI(t, append([]string{"report", "--database-url", db.URL, "--format", "json"}, period...)...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	var rep struct {
		Audit []struct {
			Action     string `json:"action"`
			Actor      string `json:"actor"`
			OutTradeNo string `json:"out_trade_no"`
			Note       string `json:"note"`
		} `json:"audit"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Audit) != 1 || rep.Audit[0].Action != "acknowledge" || rep.Audit[0].Actor != annAddr ||
		rep.Audit[0].OutTradeNo != "ORD-MOVED" || rep.Audit[0].Note != "on it" {
		t.Fatalf("audit %+v, want ann's acknowledgement", rep.Audit)
	}
	path := filepath.Join(t.TempDir(), "moves.xlsx")
	if code, _, errOut := reviewCLI(t, append([]string{"report", "--database-url", db.URL, "--out", path, "--lang", "zh"}, period...)...); code != 0 {
		t.Fatalf("xlsx: exit %d: %s", code, errOut)
	}
	f, err := excelize.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := f.GetRows("审计记录")
	if err != nil || len(rows) != 2 || rows[1][2] != "ORD-MOVED" || rows[1][3] != "确认知悉" || rows[1][4] != annAddr {
		t.Fatalf("audit sheet %q (%v), want ann's acknowledgement in Chinese", rows, err)
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
	if got := f.GetSheetList(); !slices.Equal(got, []string{"Summary", "Findings", "Runs", "Statements", "Audit"}) {
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
		`<td class="num">¥3,733.67</td>`, `<td class="num">¥1,234.56</td>`, "2026-11-28 – 2026-11-28 (Asia/Shanghai)", // the day asked for
		"2026-11-28 09:00", // a finding's first sighting, to the minute
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
		{"one day", []string{"--from", "2026-11-28", "--to", "2026-11-28", "--format", "json"}, 0, `"to": "2026-11-29T00:00:00+08:00"`},
		{"to an RFC 3339 time, excluded", []string{"--from", "2026-11-28", "--to", "2026-11-29T00:00:00+08:00", "--format", "json"}, 0,
			`"to": "2026-11-29T00:00:00+08:00"`},
		{"the same instant twice", []string{"--from", "2026-11-28T10:00:00+08:00", "--to", "2026-11-28T10:00:00+08:00"}, 2, "before --to"},
		{"bad from", []string{"--from", "28/11/2026"}, 2, "--from"},
		{"stray argument", []string{"today"}, 2, "unexpected argument"},
		{"help", []string{"--help"}, 0, "-format"},
		{"default period", []string{"--format", "json"}, 0, `"findings": []`},
		{"to in the future", []string{"--from", "2098-12-01", "--to", "2098-12-31", "--format", "json"}, 0, `"to": "2099-01-01T00:00:00+08:00"`},
		{"a leap year", []string{"--from", "2028-01-01", "--to", "2028-12-31", "--format", "json"}, 0, `"to": "2029-01-01T00:00:00+08:00"`},
		{"366 days", []string{"--from", "2026-01-01", "--to", "2027-01-01", "--format", "json"}, 0, `"to": "2027-01-02T00:00:00+08:00"`},
		{"over a year", []string{"--from", "2026-01-01", "--to", "2027-01-02"}, 2, "longer than 366 days"},
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
