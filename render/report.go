package render

import (
	"encoding/csv"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/xuri/excelize/v2"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo"
)

// ReportFormats are the formats ReportDoc.Write knows.
var ReportFormats = []string{"csv", "json", "xlsx", "html"}

// ReportDoc is a report ready to render: the data, the zone times are shown in, and when it
// was made.
type ReportDoc struct {
	Report    repo.Report
	Loc       *time.Location
	Generated time.Time
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
	cellTime
)

// repCell is one value of a report table. Amounts and counts keep their integer; times keep
// their instant; each renderer formats them its own way.
type repCell struct {
	Kind  cellKind
	S     string
	N     int64
	T     *time.Time
	Class string // HTML class (review status colouring)
}

func rcText(s string) repCell { return repCell{Kind: cellText, S: s} }
func rcInt(n int64) repCell   { return repCell{Kind: cellInt, N: n} }
func rcYuan(n int64) repCell  { return repCell{Kind: cellAmount, N: n} }
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
	return repCell{Kind: cellText, S: string(s), Class: "st-" + strings.ToLower(string(s))}
}

// repSection is one table of the report.
type repSection struct {
	Key    string // CSV section name of the rows
	Sheet  string // XLSX sheet name
	Title  string // HTML heading
	Empty  string // shown in HTML when there are no rows
	Header []string
	Rows   [][]repCell
	Totals []repCell // nil: no totals row
}

func (d ReportDoc) sections() []repSection {
	r := d.Report
	summary := repSection{Key: "summary", Sheet: "Summary", Title: "Summary by kind and review status",
		Empty:  "No findings were first or last seen in this period.",
		Header: []string{"kind", "review_status", "findings", "sightings", "local_amount", "platform_amount", "at_stake"}}
	for _, s := range r.Summary {
		summary.Rows = append(summary.Rows, []repCell{rcText(string(s.Kind)), rcStatus(s.ReviewStatus), rcInt(s.Count),
			rcInt(s.SeenCount), rcYuan(s.LocalAmountMinor), rcYuan(s.PlatformAmountMinor), rcYuan(s.AtStakeMinor)})
	}
	t := r.Totals
	summary.Totals = []repCell{rcText("TOTAL"), rcText(""), rcInt(t.Count), rcInt(t.SeenCount), rcYuan(t.LocalAmountMinor),
		rcYuan(t.PlatformAmountMinor), rcYuan(t.AtStakeMinor)}

	findings := repSection{Key: "finding", Sheet: "Findings", Title: "Findings first or last seen in the period",
		Empty: "No findings.", Header: FindingCSVHeader}
	for _, f := range r.Findings {
		order := rcText("")
		if f.OrderID != nil {
			order = rcInt(*f.OrderID)
		}
		findings.Rows = append(findings.Rows, []repCell{rcInt(f.ID), rcText(string(f.Kind)), rcText(string(f.Platform)),
			rcText(f.MerchantID), rcText(f.OutTradeNo), rcText(f.PlatformTradeNo), rcYuanOpt(f.LocalAmountMinor),
			rcYuanOpt(f.PlatformAmountMinor), rcYuan(f.AtStakeMinor()), rcText(f.LocalStatus), rcText(f.PlatformStatus),
			rcInt(f.SeenCount), rcTime(f.FirstSeenAt), rcTime(f.LastSeenAt), rcStatus(f.ReviewStatus), rcText(f.Resolution),
			rcText(f.ResolvedBy), rcTimeOpt(f.ResolvedAt), rcText(f.Note), order})
	}

	runs := repSection{Key: "run", Sheet: "Runs", Title: "Reconciliation runs started in the period",
		Empty: "No runs started in this period.",
		Header: []string{"id", "mode", "status", "shard", "dry_run", "started_at", "finished_at", "window_from", "window_to",
			"scanned", "repaired", "closed", "unchanged", "still_pending", "mismatches", "claimed_elsewhere", "errors", "error"}}
	for _, run := range r.Runs {
		runs.Rows = append(runs.Rows, []repCell{rcInt(run.ID), rcText(run.Mode), rcText(run.Status), rcText(run.Shard),
			rcText(strconv.FormatBool(run.DryRun)), rcTime(run.StartedAt), rcTimeOpt(run.FinishedAt), rcTimeOpt(run.WindowFrom),
			rcTimeOpt(run.WindowTo), rcInt(run.Scanned), rcInt(run.Repaired), rcInt(run.Closed), rcInt(run.Unchanged),
			rcInt(run.StillPending), rcInt(run.Mismatches), rcInt(run.ClaimedElsewhere), rcInt(run.Errors), rcText(run.Error)})
	}
	rt := r.RunTotals
	runs.Totals = []repCell{rcText("TOTAL"), rcText(""), rcText(runStatusCounts(rt)), rcText(""), rcText(""), rcText(""), rcText(""), rcText(""),
		rcText(""), rcInt(rt.Scanned), rcInt(rt.Repaired), rcInt(rt.Closed), rcInt(rt.Unchanged), rcInt(rt.StillPending),
		rcInt(rt.Mismatches), rcInt(rt.ClaimedElsewhere), rcInt(rt.Errors), rcText("")}
	return []repSection{summary, findings, runs, d.statementSection()}
}

// statementSection is the settlement figures finance signs off, per business day and account.
// Fees and net keep their five decimals (text: no spreadsheet rounding to the fen).
func (d ReportDoc) statementSection() repSection {
	sec := repSection{Key: "statement", Sheet: "Statements", Title: "Daily statements (the platforms' trade bills)",
		Empty: "No bill was reconciled for a day in this period.",
		Header: []string{"bill_date", "platform", "merchant_id", "payments", "payments_amount", "refunds", "refunds_amount",
			"received", "fees", "net", "lines", "matched", "repaired", "found", "held", "bill_sha256", "bill_location"}}
	var tot repo.StatementDayRow
	for _, s := range d.Report.Statements {
		sec.Rows = append(sec.Rows, []repCell{rcText(s.BillDate), rcText(s.Platform), rcText(s.MerchantID), rcInt(int64(s.Payments)),
			rcYuan(s.PaymentsMinor), rcInt(int64(s.Refunds)), rcYuan(s.RefundsMinor), rcYuan(s.ReceivedMinor),
			rcText(reconcile.FormatYuanMilliFen(s.FeeMilliFen)), rcText(reconcile.FormatYuanMilliFen(s.NetMilliFen)),
			rcInt(int64(s.Lines)), rcInt(int64(s.Matched)), rcInt(int64(s.Repaired)), rcInt(int64(s.Found)), rcInt(int64(s.Held)),
			rcText(s.BillSHA256), rcText(s.BillLocation)})
		tot.Payments, tot.PaymentsMinor, tot.Refunds, tot.RefundsMinor = tot.Payments+s.Payments, tot.PaymentsMinor+s.PaymentsMinor, tot.Refunds+s.Refunds, tot.RefundsMinor+s.RefundsMinor
		tot.ReceivedMinor, tot.FeeMilliFen, tot.NetMilliFen = tot.ReceivedMinor+s.ReceivedMinor, tot.FeeMilliFen+s.FeeMilliFen, tot.NetMilliFen+s.NetMilliFen
		tot.Lines, tot.Matched, tot.Repaired, tot.Found, tot.Held = tot.Lines+s.Lines, tot.Matched+s.Matched, tot.Repaired+s.Repaired, tot.Found+s.Found, tot.Held+s.Held
	}
	if len(sec.Rows) > 0 {
		sec.Totals = []repCell{rcText("TOTAL"), rcText(""), rcText(""), rcInt(int64(tot.Payments)), rcYuan(tot.PaymentsMinor),
			rcInt(int64(tot.Refunds)), rcYuan(tot.RefundsMinor), rcYuan(tot.ReceivedMinor), rcText(reconcile.FormatYuanMilliFen(tot.FeeMilliFen)),
			rcText(reconcile.FormatYuanMilliFen(tot.NetMilliFen)), rcInt(int64(tot.Lines)), rcInt(int64(tot.Matched)),
			rcInt(int64(tot.Repaired)), rcInt(int64(tot.Found)), rcInt(int64(tot.Held)), rcText(""), rcText("")}
	}
	return sec
}

// runStatusCounts renders "2 succeeded, 1 failed" in a fixed order.
func runStatusCounts(rt repo.RunTotals) string {
	var parts []string
	for _, s := range []string{"succeeded", "failed", "interrupted", "running"} {
		if n := rt.ByStatus[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s))
		}
	}
	if len(parts) == 0 {
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
	for _, s := range d.sections() {
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
	Runs        []repo.Run      `json:"runs"`
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
		Findings: make([]FindingView, len(r.Findings)), Runs: make([]repo.Run, len(r.Runs)), RunTotals: r.RunTotals}
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

// ---- XLSX ----

// writeXLSX writes one sheet per section. Text is always a string cell (never a formula,
// whatever the platform sent); amounts are numeric cells written from their exact decimal
// text, formatted #,##0.00; times are text in the report's zone, named in the Summary sheet.
func (d ReportDoc) writeXLSX(w io.Writer) error {
	f := excelize.NewFile()
	defer f.Close()
	head, err := f.NewStyle(&excelize.Style{Font: &excelize.Font{Bold: true},
		Fill: excelize.Fill{Type: "pattern", Pattern: 1, Color: []string{"E8ECF0"}}})
	if err != nil {
		return err
	}
	money, err := f.NewStyle(&excelize.Style{NumFmt: 4}) // #,##0.00
	if err != nil {
		return err
	}
	bold, err := f.NewStyle(&excelize.Style{Font: &excelize.Font{Bold: true}})
	if err != nil {
		return err
	}
	boldMoney, err := f.NewStyle(&excelize.Style{Font: &excelize.Font{Bold: true}, NumFmt: 4})
	if err != nil {
		return err
	}
	for i, s := range d.sections() {
		if i == 0 {
			if err := f.SetSheetName("Sheet1", s.Sheet); err != nil {
				return err
			}
		} else if _, err := f.NewSheet(s.Sheet); err != nil {
			return err
		}
		sw := &xlsxSheet{f: f, sheet: s.Sheet, loc: d.Loc, money: money, widths: map[int]int{}}
		if i == 0 {
			sw.row(0, []repCell{rcText("Reconciliation report")})
			sw.row(0, []repCell{rcText("From (included)"), rcTime(d.Report.From)})
			sw.row(0, []repCell{rcText("To (excluded)"), rcTime(d.Report.To)})
			sw.row(0, []repCell{rcText("Time zone"), rcText(d.Loc.String())})
			sw.row(0, []repCell{rcText("Generated"), rcTime(d.Generated)})
			sw.next++
		}
		headerRow := sw.next + 1
		hdr := make([]repCell, len(s.Header))
		for j, h := range s.Header {
			hdr[j] = rcText(h)
		}
		sw.row(head, hdr)
		for _, r := range s.Rows {
			sw.row(0, r)
		}
		if s.Totals != nil {
			sw.money = boldMoney
			sw.row(bold, s.Totals)
		}
		if sw.err != nil {
			return sw.err
		}
		for col, width := range sw.widths {
			name, _ := excelize.ColumnNumberToName(col)
			if err := f.SetColWidth(s.Sheet, name, name, float64(min(width+2, 60))); err != nil {
				return err
			}
		}
		topLeft, _ := excelize.CoordinatesToCellName(1, headerRow+1)
		if err := f.SetPanes(s.Sheet, &excelize.Panes{Freeze: true, YSplit: headerRow, TopLeftCell: topLeft,
			ActivePane: "bottomLeft"}); err != nil {
			return err
		}
	}
	f.SetActiveSheet(0)
	_, err = f.WriteTo(w)
	return err
}

type xlsxSheet struct {
	f      *excelize.File
	sheet  string
	loc    *time.Location
	money  int
	next   int // rows written so far
	widths map[int]int
	err    error
}

// row writes one row; style, when not 0, applies to every cell of it (amounts get the money
// style in any case).
func (s *xlsxSheet) row(style int, cells []repCell) {
	if s.err != nil {
		return
	}
	s.next++
	for i, c := range cells {
		ref, err := excelize.CoordinatesToCellName(i+1, s.next)
		if err != nil {
			s.err = err
			return
		}
		var shown string
		st := style
		switch c.Kind {
		case cellInt:
			err = s.f.SetCellInt(s.sheet, ref, c.N)
			shown = strconv.FormatInt(c.N, 10)
		case cellAmount:
			// The exact decimal text becomes a numeric cell: no float in between.
			shown = reconcile.FormatYuan(c.N)
			err = s.f.SetCellDefault(s.sheet, ref, shown)
			st = s.money
		case cellTime:
			shown = c.T.In(s.loc).Format(time.DateTime)
			err = s.f.SetCellStr(s.sheet, ref, shown)
		default:
			shown = c.S
			err = s.f.SetCellStr(s.sheet, ref, shown)
		}
		if err == nil && st != 0 {
			err = s.f.SetCellStyle(s.sheet, ref, ref, st)
		}
		if err != nil {
			s.err = fmt.Errorf("sheet %s cell %s: %w", s.sheet, ref, err)
			return
		}
		if n := utf8.RuneCountInString(shown); n > s.widths[i+1] {
			s.widths[i+1] = n
		}
	}
}

// ---- HTML ----

type htmlCell struct {
	Text  string
	Class string
}

type htmlSection struct {
	Title  string
	Empty  string
	Header []string
	Rows   [][]htmlCell
	Totals []htmlCell
	Count  int
}

type htmlPage struct {
	From, To, Zone, Generated string
	Headline                  []htmlCell
	Sections                  []htmlSection
}

func (d ReportDoc) htmlCells(row []repCell) []htmlCell {
	out := make([]htmlCell, len(row))
	for i, c := range row {
		switch c.Kind {
		case cellInt:
			out[i] = htmlCell{Text: strconv.FormatInt(c.N, 10), Class: "num"}
		case cellAmount:
			out[i] = htmlCell{Text: reconcile.FormatYuan(c.N), Class: "num"}
		case cellTime:
			out[i] = htmlCell{Text: c.T.In(d.Loc).Format(time.DateTime), Class: "time"}
		default:
			out[i] = htmlCell{Text: c.S, Class: c.Class}
		}
	}
	return out
}

func (d ReportDoc) writeHTML(w io.Writer) error {
	r := d.Report
	page := htmlPage{From: r.From.In(d.Loc).Format(time.DateTime), To: r.To.In(d.Loc).Format(time.DateTime),
		Zone: d.Loc.String(), Generated: d.Generated.In(d.Loc).Format("2006-01-02 15:04:05 MST"),
		Headline: []htmlCell{
			{Text: strconv.FormatInt(r.Totals.Count, 10), Class: "findings"},
			{Text: reconcile.FormatYuan(r.Totals.AtStakeMinor), Class: "stake"},
			{Text: strconv.FormatInt(r.RunTotals.Runs, 10), Class: "runs"},
			{Text: strconv.FormatInt(r.RunTotals.Errors, 10), Class: "errors"},
		}}
	for _, s := range d.sections() {
		hs := htmlSection{Title: s.Title, Empty: s.Empty, Header: s.Header, Count: len(s.Rows)}
		for _, row := range s.Rows {
			hs.Rows = append(hs.Rows, d.htmlCells(row))
		}
		if s.Totals != nil && len(s.Rows) > 0 {
			hs.Totals = d.htmlCells(s.Totals)
		}
		page.Sections = append(page.Sections, hs)
	}
	return reportPageTemplate.Execute(w, page)
}

// reportPageTemplate is a self-contained page: inline CSS, no scripts, no external assets.
// html/template escapes every value: finding text comes from the platforms.
var reportPageTemplate = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>payrecon report {{.From}} to {{.To}}</title>
<style>
  body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "PingFang SC", "Microsoft YaHei", sans-serif;
         margin: 2rem; color: #1f2328; background: #fff; line-height: 1.4; }
  h1 { font-size: 1.5rem; margin: 0 0 .25rem; }
  h2 { font-size: 1.1rem; margin: 2rem 0 .5rem; padding-bottom: .25rem; border-bottom: 1px solid #d0d7de; }
  .muted { color: #656d76; }
  .cards { display: flex; gap: 1rem; margin: 1rem 0; flex-wrap: wrap; }
  .card { border: 1px solid #d0d7de; border-radius: 6px; padding: .6rem 1rem; min-width: 9rem; }
  .card b { display: block; font-size: 1.3rem; font-variant-numeric: tabular-nums; }
  .scroll { overflow-x: auto; }
  table { border-collapse: collapse; font-size: .82rem; }
  th, td { border: 1px solid #d0d7de; padding: .25rem .5rem; text-align: left; vertical-align: top; }
  th { background: #f6f8fa; position: sticky; top: 0; white-space: nowrap; }
  tbody tr:nth-child(even) td { background: #fafbfc; }
  td { overflow-wrap: anywhere; max-width: 28rem; }
  td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
  td.time { white-space: nowrap; }
  tfoot td { font-weight: 600; background: #f6f8fa; }
  .st-open { color: #cf222e; font-weight: 600; }
  .st-acknowledged { color: #9a6700; font-weight: 600; }
  .st-resolved { color: #1a7f37; }
</style>
</head>
<body>
<h1>Reconciliation report</h1>
<p class="muted">Period from {{.From}} (included) to {{.To}} (excluded), {{.Zone}}. Generated {{.Generated}}.
Amounts in yuan.</p>
<div class="cards">
{{- with index .Headline 0}}<div class="card">Findings<b>{{.Text}}</b></div>{{end}}
{{- with index .Headline 1}}<div class="card">At stake (yuan)<b>{{.Text}}</b></div>{{end}}
{{- with index .Headline 2}}<div class="card">Runs<b>{{.Text}}</b></div>{{end}}
{{- with index .Headline 3}}<div class="card">Run errors<b>{{.Text}}</b></div>{{end}}
</div>
{{range .Sections}}
<h2>{{.Title}} ({{.Count}})</h2>
{{if .Rows -}}
<div class="scroll"><table>
<thead><tr>{{range .Header}}<th>{{.}}</th>{{end}}</tr></thead>
<tbody>
{{range .Rows}}<tr>{{range .}}<td{{with .Class}} class="{{.}}"{{end}}>{{.Text}}</td>{{end}}</tr>
{{end}}</tbody>
{{with .Totals}}<tfoot><tr>{{range .}}<td{{with .Class}} class="{{.}}"{{end}}>{{.Text}}</td>{{end}}</tr></tfoot>{{end}}
</table></div>
{{- else -}}
<p class="muted">{{.Empty}}</p>
{{- end}}
{{end}}
</body>
</html>
`))
