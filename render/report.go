package render

import (
	"encoding/csv"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo"
)

// ReportFormats are the formats ReportDoc.Write knows.
var ReportFormats = []string{"csv", "json", "xlsx", "html"}

// ReportDoc is a report ready to render: the data, the zone times are shown in, when it was
// made, and the language of the labels in the formats people read (HTML, XLSX).
type ReportDoc struct {
	Report    repo.Report
	Loc       *time.Location
	Generated time.Time
	Lang      Lang // "" is English
}

// Write renders the report in format (one of ReportFormats; anything else is CSV).
func (d ReportDoc) Write(w io.Writer, format string) error {
	switch format {
	case "json":
		return d.writeJSON(w)
	case "xlsx":
		return d.writeXLSX(w)
	case "html":
		return d.writeHTML(w)
	}
	return d.writeCSV(w)
}

// ---- one tabular form of the report, rendered as CSV, XLSX and HTML ----

type cellKind int

const (
	cellText cellKind = iota
	cellInt
	cellAmount // an amount in fen, shown as yuan
	// cellMilliFen is an amount in thousandths of a fen (fees, net), shown as yuan to five
	// decimals; text in the XLSX, so no spreadsheet rounds it to the fen.
	cellMilliFen
	cellTime
)

// repCell is one value of a report table. Amounts and counts keep their integer; times keep
// their instant; each renderer formats them its own way. A coded value (a kind, a status, a
// platform, a resolution) stays a code in CSV and is a Label for people.
type repCell struct {
	Kind  cellKind
	S     string
	N     int64
	T     *time.Time
	Class string // HTML class (review status colouring)
	Coded bool   // S is a label key
}

func rcText(s string) repCell    { return repCell{Kind: cellText, S: s} }
func rcCode(s string) repCell    { return repCell{Kind: cellText, S: s, Coded: true} }
func rcInt(n int64) repCell      { return repCell{Kind: cellInt, N: n} }
func rcYuan(n int64) repCell     { return repCell{Kind: cellAmount, N: n} }
func rcMilliFen(n int64) repCell { return repCell{Kind: cellMilliFen, N: n} }
func rcTime(t time.Time) repCell {
	return repCell{Kind: cellTime, T: &t}
}

func rcYuanOpt(n *int64) repCell {
	if n == nil {
		return rcText("")
	}
	return rcYuan(*n)
}

func rcTimeOpt(t *time.Time) repCell {
	if t == nil {
		return rcText("")
	}
	return rcTime(*t)
}

func rcStatus(s reconcile.ReviewStatus) repCell {
	return repCell{Kind: cellText, S: string(s), Class: "st-" + strings.ToLower(string(s)), Coded: true}
}

// text is the cell's text for people (labels) or, with lang "", for programs (codes).
func (c repCell) text(lang Lang) string {
	if c.Coded && lang != "" && c.S != "" {
		return Label(lang, c.S)
	}
	return c.S
}

// htmlCol is a column the HTML page shows and its share of the page width: the page shows
// what a person reads, at widths that fit (the XLSX and CSV keep every column).
type htmlCol struct {
	i     int // index into Header
	width int // percent of the table width
}

// repSection is one table of the report. Header holds column keys (the CSV header; Label
// turns them into headings for people).
type repSection struct {
	Key      string // CSV section name of the rows
	Sheet    string // label key of the XLSX sheet name
	Title    string // label key of the HTML heading
	Empty    string // label key of the text shown in HTML when there are no rows
	Header   []string
	Rows     [][]repCell
	Totals   []repCell // nil: no totals row
	HTMLCols []htmlCol
	Filter   bool // the XLSX sheet gets an autofilter over the table
}

// sections are the report's tables; lang labels the few composed texts ("" for CSV).
func (d ReportDoc) sections(lang Lang) []repSection {
	r := d.Report
	summary := repSection{Key: "summary", Sheet: "report.sheet.summary", Title: "report.summary", Empty: "report.summary.empty",
		Header:   []string{"kind", "review_status", "findings", "sightings", "local_amount", "platform_amount", "at_stake"},
		HTMLCols: []htmlCol{{0, 22}, {1, 14}, {2, 10}, {3, 10}, {4, 14}, {5, 14}, {6, 16}}}
	for _, s := range r.Summary {
		summary.Rows = append(summary.Rows, []repCell{rcCode(string(s.Kind)), rcStatus(s.ReviewStatus), rcInt(s.Count),
			rcInt(s.SeenCount), rcYuan(s.LocalAmountMinor), rcYuan(s.PlatformAmountMinor), rcYuan(s.AtStakeMinor)})
	}
	t := r.Totals
	summary.Totals = []repCell{rcCode("TOTAL"), rcText(""), rcInt(t.Count), rcInt(t.SeenCount), rcYuan(t.LocalAmountMinor),
		rcYuan(t.PlatformAmountMinor), rcYuan(t.AtStakeMinor)}

	findings := repSection{Key: "finding", Sheet: "report.sheet.findings", Title: "report.findings", Empty: "report.findings.empty",
		Header: FindingCSVHeader, Filter: true,
		// id, kind, platform, merchant, our order, platform trade, ours, theirs, at stake,
		// review status, seen, first seen, resolution: what fits a page at widths where no
		// word, merchant account (16 digits), amount or date breaks; only a 28-digit trade
		// number may, inside its cell (the XLSX has every column).
		HTMLCols: []htmlCol{{0, 3}, {1, 8}, {2, 7}, {3, 12}, {4, 9}, {5, 10}, {6, 7}, {7, 7}, {8, 7},
			{14, 9}, {11, 5}, {12, 8}, {15, 8}}}
	for _, f := range r.Findings {
		order := rcText("")
		if f.OrderID != nil {
			order = rcInt(*f.OrderID)
		}
		findings.Rows = append(findings.Rows, []repCell{rcInt(f.ID), rcCode(string(f.Kind)), rcCode(string(f.Platform)),
			rcText(f.MerchantID), rcText(f.OutTradeNo), rcText(f.PlatformTradeNo), rcYuanOpt(f.LocalAmountMinor),
			rcYuanOpt(f.PlatformAmountMinor), rcYuan(f.AtStakeMinor()), rcText(f.LocalStatus), rcText(f.PlatformStatus),
			rcInt(f.SeenCount), rcTime(f.FirstSeenAt), rcTime(f.LastSeenAt), rcStatus(f.ReviewStatus), rcCode(f.Resolution),
			rcText(f.ResolvedBy), rcTimeOpt(f.ResolvedAt), rcText(f.Note), order})
	}

	runs := repSection{Key: "run", Sheet: "report.sheet.runs", Title: "report.runs", Empty: "report.runs.empty", Filter: true,
		// The page leaves out the finish time and the window (the XLSX has them) so that
		// every heading fits its column.
		HTMLCols: []htmlCol{{0, 5}, {1, 8}, {2, 9}, {3, 5}, {5, 9}, {9, 7}, {10, 7}, {11, 6}, {12, 6}, {13, 6},
			{14, 7}, {15, 7}, {16, 6}, {17, 12}},
		Header: []string{"id", "mode", "status", "shard", "dry_run", "started_at", "finished_at", "window_from", "window_to",
			"scanned", "repaired", "closed", "unchanged", "still_pending", "mismatches", "claimed_elsewhere", "errors", "error"}}
	for _, run := range r.Runs {
		runs.Rows = append(runs.Rows, []repCell{rcInt(run.ID), rcCode(run.Mode), rcCode(run.Status), rcText(run.Shard),
			rcText(strconv.FormatBool(run.DryRun)), rcTime(run.StartedAt), rcTimeOpt(run.FinishedAt), rcTimeOpt(run.WindowFrom),
			rcTimeOpt(run.WindowTo), rcInt(run.Scanned), rcInt(run.Repaired), rcInt(run.Closed), rcInt(run.Unchanged),
			rcInt(run.StillPending), rcInt(run.Mismatches), rcInt(run.ClaimedElsewhere), rcInt(run.Errors), rcText(run.Error)})
	}
	rt := r.RunTotals
	runs.Totals = []repCell{rcCode("TOTAL"), rcText(""), rcText(runStatusCounts(rt, lang)), rcText(""), rcText(""), rcText(""), rcText(""), rcText(""),
		rcText(""), rcInt(rt.Scanned), rcInt(rt.Repaired), rcInt(rt.Closed), rcInt(rt.Unchanged), rcInt(rt.StillPending),
		rcInt(rt.Mismatches), rcInt(rt.ClaimedElsewhere), rcInt(rt.Errors), rcText("")}
	return []repSection{summary, findings, runs, d.statementSection()}
}

// statementSection is the settlement figures finance signs off, per business day and account.
// Fees and net keep their five decimals (text: no spreadsheet rounding to the fen).
func (d ReportDoc) statementSection() repSection {
	sec := repSection{Key: "statement", Sheet: "report.sheet.statements", Title: "report.statements", Empty: "report.statements.empty",
		Header: []string{"bill_date", "platform", "merchant_id", "payments", "payments_amount", "refunds", "refunds_amount",
			"received", "fees", "net", "lines", "matched", "repaired", "found", "held", "bill_sha256", "bill_location"},
		// Day, account and the figures finance signs off; the digest and location stay in
		// the XLSX and CSV.
		// Received, bill lines and held stay in the XLSX and CSV too: the page keeps
		// columns wide enough that no heading breaks inside a word.
		HTMLCols: []htmlCol{{0, 9}, {1, 8}, {2, 11}, {3, 8}, {4, 9}, {5, 7}, {6, 9}, {8, 8}, {9, 10},
			{11, 7}, {12, 7}, {13, 7}}}
	var tot repo.StatementDayRow
	for _, s := range d.Report.Statements {
		sec.Rows = append(sec.Rows, []repCell{rcText(s.BillDate), rcCode(s.Platform), rcText(s.MerchantID), rcInt(int64(s.Payments)),
			rcYuan(s.PaymentsMinor), rcInt(int64(s.Refunds)), rcYuan(s.RefundsMinor), rcYuan(s.ReceivedMinor),
			rcMilliFen(s.FeeMilliFen), rcMilliFen(s.NetMilliFen),
			rcInt(int64(s.Lines)), rcInt(int64(s.Matched)), rcInt(int64(s.Repaired)), rcInt(int64(s.Found)), rcInt(int64(s.Held)),
			rcText(s.BillSHA256), rcText(s.BillLocation)})
		tot.Payments, tot.PaymentsMinor, tot.Refunds, tot.RefundsMinor = tot.Payments+s.Payments, tot.PaymentsMinor+s.PaymentsMinor, tot.Refunds+s.Refunds, tot.RefundsMinor+s.RefundsMinor
		tot.ReceivedMinor, tot.FeeMilliFen, tot.NetMilliFen = tot.ReceivedMinor+s.ReceivedMinor, tot.FeeMilliFen+s.FeeMilliFen, tot.NetMilliFen+s.NetMilliFen
		tot.Lines, tot.Matched, tot.Repaired, tot.Found, tot.Held = tot.Lines+s.Lines, tot.Matched+s.Matched, tot.Repaired+s.Repaired, tot.Found+s.Found, tot.Held+s.Held
	}
	if len(sec.Rows) > 0 {
		sec.Totals = []repCell{rcCode("TOTAL"), rcText(""), rcText(""), rcInt(int64(tot.Payments)), rcYuan(tot.PaymentsMinor),
			rcInt(int64(tot.Refunds)), rcYuan(tot.RefundsMinor), rcYuan(tot.ReceivedMinor), rcMilliFen(tot.FeeMilliFen),
			rcMilliFen(tot.NetMilliFen), rcInt(int64(tot.Lines)), rcInt(int64(tot.Matched)),
			rcInt(int64(tot.Repaired)), rcInt(int64(tot.Found)), rcInt(int64(tot.Held)), rcText(""), rcText("")}
	}
	return sec
}

// runStatusCounts renders "2 succeeded, 1 failed" in a fixed order.
func runStatusCounts(rt repo.RunTotals, lang Lang) string {
	var parts []string
	for _, s := range []string{"succeeded", "failed", "interrupted", "running"} {
		if n := rt.ByStatus[s]; n > 0 {
			name := s
			if lang != "" {
				name = Label(lang, s)
			}
			parts = append(parts, fmt.Sprintf("%d %s", n, name))
		}
	}
	if len(parts) == 0 {
		if lang != "" {
			return Label(lang, "report.no_runs")
		}
		return "0 runs"
	}
	return strings.Join(parts, ", ")
}

// ---- CSV ----

// writeCSV writes every section into one CSV: each row starts with its section (report,
// summary, summary_total, finding, run, run_total), each section opens with its own header
// row (first cell "section") and sections are separated by an empty line, which CSV readers
// skip. Amounts are yuan with two decimals; times RFC 3339 in the report's zone.
func (d ReportDoc) writeCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"section", "from", "to", "timezone", "generated_at"}) //nolint:errcheck // Flush reports it
	cw.Write([]string{"report", rfc3339In(d.Report.From, d.Loc), rfc3339In(d.Report.To, d.Loc), d.Loc.String(),
		rfc3339In(d.Generated, d.Loc)}) //nolint:errcheck
	for _, s := range d.sections("") {
		cw.Write(nil)                                      //nolint:errcheck
		cw.Write(append([]string{"section"}, s.Header...)) //nolint:errcheck
		for _, row := range s.Rows {
			cw.Write(d.csvRecord(s.Key, row)) //nolint:errcheck
		}
		if s.Totals != nil {
			cw.Write(d.csvRecord(s.Key+"_total", s.Totals)) //nolint:errcheck
		}
	}
	cw.Flush()
	return cw.Error()
}

func (d ReportDoc) csvRecord(key string, row []repCell) []string {
	rec := make([]string, 0, len(row)+1)
	rec = append(rec, key)
	for _, c := range row {
		switch c.Kind {
		case cellInt:
			rec = append(rec, strconv.FormatInt(c.N, 10))
		case cellAmount:
			rec = append(rec, reconcile.FormatYuan(c.N))
		case cellMilliFen:
			rec = append(rec, reconcile.FormatYuanMilliFen(c.N))
		case cellTime:
			rec = append(rec, rfc3339In(*c.T, d.Loc))
		default:
			rec = append(rec, csvText(c.S))
		}
	}
	return rec
}

// ---- JSON ----

type summaryView struct {
	repo.SummaryRow
	LocalAmount    string `json:"local_amount"`
	PlatformAmount string `json:"platform_amount"`
	AtStake        string `json:"at_stake"`
}

func newSummaryView(s repo.SummaryRow) summaryView {
	return summaryView{SummaryRow: s, LocalAmount: reconcile.FormatYuan(s.LocalAmountMinor),
		PlatformAmount: reconcile.FormatYuan(s.PlatformAmountMinor), AtStake: reconcile.FormatYuan(s.AtStakeMinor)}
}

type reportJSON struct {
	From        time.Time       `json:"from"`
	To          time.Time       `json:"to"`
	Timezone    string          `json:"timezone"`
	GeneratedAt time.Time       `json:"generated_at"`
	Summary     []summaryView   `json:"summary"`
	Totals      summaryView     `json:"totals"`
	Findings    []FindingView   `json:"findings"`
	Runs        []repo.RunRow   `json:"runs"`
	RunTotals   repo.RunTotals  `json:"run_totals"`
	Statements  []statementView `json:"statements"`
}

// statementView is a day's figures with its amounts also written as yuan (fees and net to
// five decimals).
type statementView struct {
	repo.StatementDayRow
	PaymentsAmount string `json:"payments_amount"`
	RefundsAmount  string `json:"refunds_amount"`
	Received       string `json:"received"`
	Fees           string `json:"fees"`
	Net            string `json:"net"`
}

func (d ReportDoc) writeJSON(w io.Writer) error {
	r, loc := d.Report, d.Loc
	out := reportJSON{From: r.From.In(loc), To: r.To.In(loc), Timezone: loc.String(), GeneratedAt: d.Generated.In(loc),
		Summary: make([]summaryView, len(r.Summary)), Totals: newSummaryView(r.Totals),
		Findings: make([]FindingView, len(r.Findings)), Runs: make([]repo.RunRow, len(r.Runs)), RunTotals: r.RunTotals}
	for i, s := range r.Summary {
		out.Summary[i] = newSummaryView(s)
	}
	for i, f := range r.Findings {
		out.Findings[i] = NewFindingView(f, loc)
	}
	out.Statements = make([]statementView, len(r.Statements))
	for i, s := range r.Statements {
		s.ReconciledAt = s.ReconciledAt.In(loc)
		out.Statements[i] = statementView{StatementDayRow: s, PaymentsAmount: reconcile.FormatYuan(s.PaymentsMinor),
			RefundsAmount: reconcile.FormatYuan(s.RefundsMinor), Received: reconcile.FormatYuan(s.ReceivedMinor),
			Fees: reconcile.FormatYuanMilliFen(s.FeeMilliFen), Net: reconcile.FormatYuanMilliFen(s.NetMilliFen)}
	}
	for i, run := range r.Runs {
		run.StartedAt = run.StartedAt.In(loc)
		run.FinishedAt, run.WindowFrom, run.WindowTo = timeInLoc(run.FinishedAt, loc), timeInLoc(run.WindowFrom, loc), timeInLoc(run.WindowTo, loc)
		out.Runs[i] = run
	}
	return WriteJSON(w, out)
}
