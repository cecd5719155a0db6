package render

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

// ReportFormats are the formats ReportDoc.Write knows.
var ReportFormats = []string{"csv", "json", "xlsx", "html"}

// ReportDoc is a report ready to render: the data, the zone times are shown in, when it was
// made, and the language of the labels in the formats people read (CSV, HTML, XLSX; JSON
// keeps the field names and codes: programs read it).
type ReportDoc struct {
	Report    reconcile.Report // its Findings are read once per Write, as they are written
	Loc       *time.Location
	Generated time.Time
	Lang      Lang // "" is English
}

// Write renders the report in format (one of ReportFormats; anything else is CSV). The
// findings go out as they are read, never all held: CSV, JSON and HTML write each one
// as it comes, and XLSX streams its sheets to a temporary file that becomes the zip written
// to w. An error from w stops the reading.
func (d ReportDoc) Write(w io.Writer, format string) error {
	// One buffer for the many small writes of every format (a terminal or a file pays a
	// system call for each).
	bw := bufio.NewWriterSize(w, 64<<10)
	var err error
	switch format {
	case "json":
		err = d.writeJSON(bw)
	case "xlsx":
		err = d.writeXLSX(bw)
	case "html":
		err = d.writeHTML(bw)
	default:
		err = d.writeCSV(bw)
	}
	if err != nil {
		return err
	}
	return bw.Flush()
}

// findings is the report's FindingSource; a report built without one has no findings.
func (d ReportDoc) findings() reconcile.FindingSource {
	if d.Report.Findings == nil {
		return reconcile.FindingList(nil)
	}
	return d.Report.Findings
}

// wholeDays says whether the report's period is whole days in its zone (it starts and ends
// at midnight) and which: the first and the last, both included, as people give a period
// (the one period rule), so that a page says "2026-11-28 – 2026-11-28" for the day a person
// asked for, not the instant after it.
func (d ReportDoc) wholeDays() (first, last time.Time, ok bool) {
	from, to := d.Report.From.In(d.Loc), d.Report.To.In(d.Loc)
	if !isMidnight(from) || !isMidnight(to) || !from.Before(to) {
		return first, last, false
	}
	y, m, day := to.Date()
	return from, time.Date(y, m, day-1, 0, 0, 0, 0, d.Loc), true
}

func isMidnight(t time.Time) bool {
	h, m, s := t.Clock()
	return h == 0 && m == 0 && s == 0 && t.Nanosecond() == 0
}

// audit is the report's AuditSource; a report built without one has no review moves.
func (d ReportDoc) audit() reconcile.AuditSource {
	if d.Report.Audit == nil {
		return reconcile.AuditList(nil)
	}
	return d.Report.Audit
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
// platform, a resolution, yes or no) is shown as its Label in the report's language.
type repCell struct {
	Kind  cellKind
	S     string
	N     int64
	T     *time.Time
	Class string // HTML class (review status colouring)
	Coded bool   // S is a label key
	// Prose is text people wrote (a note, an error): the one kind of cell a page may wrap,
	// at spaces and between CJK characters. Every other cell (a number, an amount, a time,
	// an identifier, a code) is one token on one line.
	Prose bool
}

func rcText(s string) repCell    { return repCell{Kind: cellText, S: s} }
func rcProse(s string) repCell   { return repCell{Kind: cellText, S: s, Prose: true} }
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

// rcBool is yes or no in the report's language (a spreadsheet's true/false means nothing
// to a reader).
func rcBool(b bool) repCell {
	if b {
		return rcCode("yes")
	}
	return rcCode("no")
}

// text is the cell's text for people: a coded value's label in lang, else the text itself.
func (c repCell) text(lang Lang) string {
	if c.Coded && c.S != "" {
		return Label(lang, c.S)
	}
	return c.S
}

// repSection is one table of the report. Header holds column keys, which Label turns into
// headings for people.
type repSection struct {
	Key      string // names the table in errors
	Sheet    string // label key of the XLSX sheet name
	Title    string // label key of the HTML heading
	Empty    string // label key of the text shown in HTML when there are no rows
	Header   []string
	Count    int64     // how many rows Rows yields, known before they are read (the HTML heading)
	Rows     rowSource // the rows in order, read as they are written
	Totals   []repCell // nil: no totals row
	HTMLCols []int     // the columns the HTML page shows, indexes into Header (the XLSX has every one)
	Filter   bool      // the XLSX sheet gets an autofilter over the table
}

// rowSource calls yield with each row of a section in order and stops at the first error,
// yield's or its own, which it returns.
type rowSource func(yield func([]repCell) error) error

// rowsOf is the rowSource of rows already in memory (the short tables).
func rowsOf(rows [][]repCell) rowSource {
	return func(yield func([]repCell) error) error {
		for _, r := range rows {
			if err := yield(r); err != nil {
				return err
			}
		}
		return nil
	}
}

// section is a table of rows already in memory.
func section(s repSection, rows [][]repCell) repSection {
	s.Count, s.Rows = int64(len(rows)), rowsOf(rows)
	return s
}

// sections are the report's tables (XLSX and HTML); lang words the few composed texts.
func (d ReportDoc) sections(lang Lang) []repSection {
	return []repSection{d.summarySection(), d.findingSection(), d.runSection(lang), d.statementSection(), d.auditSection()}
}

// summarySection is the period's findings by kind and review status, with their totals.
func (d ReportDoc) summarySection() repSection {
	r := d.Report
	summary := repSection{Key: "summary", Sheet: "report.sheet.summary", Title: "report.summary", Empty: "report.summary.empty",
		Header:   []string{"kind", "review_status", "findings", "sightings", "local_amount", "platform_amount", "at_stake"},
		HTMLCols: []int{0, 1, 2, 3, 4, 5, 6}}
	var rows [][]repCell
	for _, s := range r.Summary {
		rows = append(rows, []repCell{rcCode(string(s.Kind)), rcStatus(s.ReviewStatus), rcInt(s.Count),
			rcInt(s.SeenCount), rcYuan(s.LocalAmountMinor), rcYuan(s.PlatformAmountMinor), rcYuan(s.AtStakeMinor)})
	}
	t := r.Totals
	summary.Totals = []repCell{rcCode("TOTAL"), rcText(""), rcInt(t.Count), rcInt(t.SeenCount), rcYuan(t.LocalAmountMinor),
		rcYuan(t.PlatformAmountMinor), rcYuan(t.AtStakeMinor)}
	return section(summary, rows)
}

// findingSection streams the findings from the report's source: the one table that can be
// long. Its count is the summary's total, read in the same snapshot as the findings.
func (d ReportDoc) findingSection() repSection {
	return repSection{Key: "finding", Sheet: "report.sheet.findings", Title: "report.findings", Empty: "report.findings.empty",
		Header: FindingCSVHeader, Filter: true, Count: d.Report.Totals.Count,
		Rows: func(yield func([]repCell) error) error {
			return d.findings().Each(func(f reconcile.Finding) error { return yield(findingCells(f)) })
		},
		// id, kind, platform, merchant, our order, our refund, platform trade, ours, theirs,
		// at stake, review status, seen, first seen, resolution: what a person reads of a
		// finding on a page (the XLSX has every column).
		HTMLCols: []int{0, 1, 2, 3, 4, 20, 5, 6, 7, 8, 14, 11, 12, 15}}
}

// findingCells is one finding as a row of the report, in FindingCSVHeader's order.
func findingCells(f reconcile.Finding) []repCell {
	order := rcText("")
	if f.OrderID != nil {
		order = rcInt(*f.OrderID)
	}
	// Our status is one of our own words (an order's or a refund's status), labelled; the
	// platform's stays in the platform's own spelling (TRADE_SUCCESS, ACQ.TRADE_NOT_EXIST),
	// as its portal and bills show it, and as the console does: "SUCCESS" is a payment's
	// word at WeChat Pay and a refund's, which no one label can say.
	return []repCell{rcInt(f.ID), rcCode(string(f.Kind)), rcCode(string(f.Platform)),
		rcText(f.MerchantID), rcText(f.OutTradeNo), rcText(f.PlatformTradeNo), rcYuanOpt(f.LocalAmountMinor),
		rcYuanOpt(f.PlatformAmountMinor), rcYuan(f.AtStakeMinor()), rcCode(f.LocalStatus), rcText(f.PlatformStatus),
		rcInt(f.SeenCount), rcTime(f.FirstSeenAt), rcTime(f.LastSeenAt), rcStatus(f.ReviewStatus), rcCode(f.Resolution),
		rcText(f.ResolvedBy), rcTimeOpt(f.ResolvedAt), rcProse(f.Note), order, rcText(f.OutRefundNo), rcText(f.ProposedBy),
		rcText(f.ApprovedBy)}
}

// runSection is the runs that started in the period, with their counters added up. The
// counter columns are reconcile.RunCounters, in their order.
func (d ReportDoc) runSection(lang Lang) repSection {
	r := d.Report
	runs := repSection{Key: "run", Sheet: "report.sheet.runs", Title: "report.runs", Empty: "report.runs.empty", Filter: true,
		// The page leaves out dry run, the finish time and the window (the XLSX has them).
		HTMLCols: []int{0, 1, 2, 3, 5, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18},
		Header:   []string{"id", "mode", "status", "shard", "dry_run", "started_at", "finished_at", "window_from", "window_to"}}
	for _, rc := range reconcile.RunCounters {
		runs.Header = append(runs.Header, rc.Name)
	}
	runs.Header = append(runs.Header, "error")
	counters := func(v reconcile.CounterValues) []repCell {
		cells := make([]repCell, len(reconcile.RunCounters))
		for i, rc := range reconcile.RunCounters {
			cells[i] = rcInt(rc.Value(v))
		}
		return cells
	}
	var rows [][]repCell
	for _, run := range r.Runs {
		row := []repCell{rcInt(run.ID), rcCode(run.Mode), rcCode(run.Status), rcText(run.Shard),
			rcBool(run.DryRun), rcTime(run.StartedAt), rcTimeOpt(run.FinishedAt), rcTimeOpt(run.WindowFrom),
			rcTimeOpt(run.WindowTo)}
		rows = append(rows, append(append(row, counters(run.CounterValues)...), rcProse(run.Error)))
	}
	rt := r.RunTotals
	runs.Totals = append(append([]repCell{rcCode("TOTAL"), rcText(""), rcProse(runStatusCounts(rt, lang)), rcText(""), rcText(""),
		rcText(""), rcText(""), rcText(""), rcText("")}, counters(rt.CounterValues)...), rcText(""))
	return section(runs, rows)
}

// statementSection is the settlement figures finance signs off, per business day and account.
// Fees and net keep their five decimals (text: no spreadsheet rounding to the fen).
func (d ReportDoc) statementSection() repSection {
	header := []string{"bill_date", "platform", "merchant_id"}
	for _, sf := range reconcile.StatementFigureTable {
		header = append(header, sf.Key)
	}
	sec := repSection{Key: "statement", Sheet: "report.sheet.statements", Title: "report.statements", Empty: "report.statements.empty",
		Header: append(header, "bill_sha256", "bill_location"),
		// Day, account and the figures finance signs off; the digest and location stay in
		// the XLSX, and so do received, bill lines, held and the refund lines' split
		// (refunds repaired, refunds we do not have: both already counted in repaired and
		// found).
		HTMLCols: []int{0, 1, 2, 3, 4, 5, 6, 8, 9, 11, 12, 13}}
	var tot reconcile.StatementFigures
	var rows [][]repCell
	for _, s := range d.Report.Statements {
		row := append([]repCell{rcText(s.BillDate), rcCode(s.Platform), rcText(s.MerchantID)}, figureCells(s.StatementFigures)...)
		rows = append(rows, append(row, rcText(s.BillSHA256), rcText(s.BillLocation)))
		tot.Add(s.StatementFigures)
	}
	if len(rows) > 0 {
		sec.Totals = append(append([]repCell{rcCode("TOTAL"), rcText(""), rcText("")}, figureCells(tot)...), rcText(""), rcText(""))
	}
	return section(sec, rows)
}

// figureCells are a day's figures as cells, in reconcile.StatementFigureTable's order.
func figureCells(f reconcile.StatementFigures) []repCell {
	cells := make([]repCell, len(reconcile.StatementFigureTable))
	for i, sf := range reconcile.StatementFigureTable {
		v := sf.Value(f)
		switch sf.Unit {
		case reconcile.FigureFen:
			cells[i] = rcYuan(v)
		case reconcile.FigureMilliFen:
			cells[i] = rcMilliFen(v)
		default:
			cells[i] = rcInt(v)
		}
	}
	return cells
}

// auditSection is the review moves recorded in the period, streamed from the report's
// source: who moved which finding (and order) from what to what, and why.
func (d ReportDoc) auditSection() repSection {
	return repSection{Key: "audit", Sheet: "report.sheet.audit", Title: "report.audit", Empty: "report.audit.empty",
		Header: []string{"audit_at", "finding_id", "out_trade_no", "action", "actor", "os_user", "db_user", "from_status",
			"to_status", "resolution", "evidence_version", "note"},
		Filter: true, Count: d.Report.AuditCount,
		Rows: func(yield func([]repCell) error) error {
			return d.audit().Each(func(a reconcile.ReportAuditEntry) error { return yield(auditCells(a)) })
		},
		// The page leaves out the OS and database users (the XLSX has them).
		HTMLCols: []int{0, 1, 2, 3, 4, 7, 8, 9, 10, 11}}
}

// auditCells is one review move as a row of the report, in auditSection's column order.
func auditCells(a reconcile.ReportAuditEntry) []repCell {
	version := rcText("")
	if a.EvidenceVersion != nil {
		version = rcInt(*a.EvidenceVersion)
	}
	action := rcText(a.Action) // an action the table has no word for shows as itself
	if HasLabel("audit." + a.Action) {
		action = rcCode("audit." + a.Action)
	}
	return []repCell{rcTime(a.CreatedAt), rcInt(a.MismatchID), rcText(a.OutTradeNo), action, rcText(a.Actor),
		rcText(a.OSUser), rcText(a.DBUser), rcCode(a.FromStatus), rcCode(a.ToStatus), rcCode(a.Resolution), version,
		rcProse(a.Note)}
}

// runStatusCounts renders "2 succeeded, 1 failed" in a fixed order, in lang.
func runStatusCounts(rt reconcile.RunTotals, lang Lang) string {
	var parts []string
	for _, s := range []string{"succeeded", "failed", "interrupted", "running"} {
		if n := rt.ByStatus[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, Label(lang, s)))
		}
	}
	if len(parts) == 0 {
		return Label(lang, "report.no_runs")
	}
	return strings.Join(parts, ", ")
}

// ---- CSV ----

// writeCSV writes the findings as one table, the one a spreadsheet or a script opens
// without help: one header row, then a row per finding; the summary, runs, statement days
// and review moves are the XLSX's (and the JSON's and HTML's). Headings and coded values
// (kind, platform, our status, review status, resolution) are in the report's language;
// amounts stay plain yuan ("1234.50") and times RFC 3339 with their offset, so the file
// still reads as data.
func (d ReportDoc) writeCSV(w io.Writer) error {
	// UTF-8 with a byte order mark: without it Excel reads the file as the system's code
	// page and Chinese text turns to mojibake.
	if _, err := io.WriteString(w, utf8BOM); err != nil {
		return err
	}
	lang := d.lang()
	cw := csv.NewWriter(w)
	header := make([]string, len(FindingCSVHeader))
	for i, key := range FindingCSVHeader {
		header[i] = Label(lang, key)
	}
	cw.Write(header) //nolint:errcheck // Flush reports it
	// A row's error is the writer's, once its buffer fills: it stops the reading.
	err := d.findings().Each(func(f reconcile.Finding) error { return cw.Write(d.csvRecord(findingCells(f))) })
	if err != nil {
		return err
	}
	cw.Flush()
	return cw.Error()
}

// csvRecord is a row of cells as CSV fields: numbers and amounts as plain decimals, times
// RFC 3339 in the report's zone, text as shown to people, kept as text by a spreadsheet.
func (d ReportDoc) csvRecord(row []repCell) []string {
	rec := make([]string, 0, len(row))
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
			rec = append(rec, spreadsheetText(csvText(c.text(d.lang()))))
		}
	}
	return rec
}

// utf8BOM opens a CSV people open in a spreadsheet.
const utf8BOM = "\ufeff"

// spreadsheetText keeps a number that is an identifier (a trade number, a merchant account,
// an order number) as text in a spreadsheet: Excel reads twelve digits or more as a number
// and shows 4.2E+21, losing the last digits, and drops an order number's leading zeros. A
// trailing tab, which the platforms' own bills use for the same reason, makes it text; a CSV
// reader gets the identifier back by trimming space.
func spreadsheetText(s string) string {
	if len(s) < 12 && (len(s) < 2 || s[0] != '0') {
		return s
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return s
		}
	}
	return s + "\t"
}

// ---- JSON ----

type summaryView struct {
	reconcile.SummaryRow
	LocalAmount    string `json:"local_amount"`
	PlatformAmount string `json:"platform_amount"`
	AtStake        string `json:"at_stake"`
}

func newSummaryView(s reconcile.SummaryRow) summaryView {
	return summaryView{SummaryRow: s, LocalAmount: reconcile.FormatYuan(s.LocalAmountMinor),
		PlatformAmount: reconcile.FormatYuan(s.PlatformAmountMinor), AtStake: reconcile.FormatYuan(s.AtStakeMinor)}
}

// statementView is a day's figures with its amounts also written as yuan (fees and net to
// five decimals).
type statementView struct {
	reconcile.StatementDayRow
	PaymentsAmount string `json:"payments_amount"`
	RefundsAmount  string `json:"refunds_amount"`
	Received       string `json:"received"`
	Fees           string `json:"fees"`
	Net            string `json:"net"`
}

// writeJSON writes the report as one indented JSON object (from, to, timezone, generated_at,
// summary, totals, findings, runs, run_totals, statements, audit), the findings and the
// review moves one at a time.
func (d ReportDoc) writeJSON(w io.Writer) error {
	r, loc := d.Report, d.Loc
	o := &jsonObject{w: w}
	o.field("from", r.From.In(loc))
	o.field("to", r.To.In(loc))
	o.field("timezone", loc.String())
	o.field("generated_at", d.Generated.In(loc))
	summary := make([]summaryView, len(r.Summary))
	for i, s := range r.Summary {
		summary[i] = newSummaryView(s)
	}
	o.field("summary", summary)
	o.field("totals", newSummaryView(r.Totals))
	o.array("findings", func(item func(any) error) error {
		return d.findings().Each(func(f reconcile.Finding) error { return item(NewFindingView(f, loc)) })
	})
	runs := make([]reconcile.RunRow, len(r.Runs))
	for i, run := range r.Runs {
		run.StartedAt = run.StartedAt.In(loc)
		run.FinishedAt, run.WindowFrom, run.WindowTo = timeInLoc(run.FinishedAt, loc), timeInLoc(run.WindowFrom, loc), timeInLoc(run.WindowTo, loc)
		runs[i] = run
	}
	o.field("runs", runs)
	o.field("run_totals", r.RunTotals)
	statements := make([]statementView, len(r.Statements))
	for i, s := range r.Statements {
		s.ReconciledAt = s.ReconciledAt.In(loc)
		statements[i] = statementView{StatementDayRow: s, PaymentsAmount: reconcile.FormatYuan(s.PaymentsMinor),
			RefundsAmount: reconcile.FormatYuan(s.RefundsMinor), Received: reconcile.FormatYuan(s.ReceivedMinor),
			Fees: reconcile.FormatYuanMilliFen(s.FeeMilliFen), Net: reconcile.FormatYuanMilliFen(s.NetMilliFen)}
	}
	o.field("statements", statements)
	o.array("audit", func(item func(any) error) error {
		return d.audit().Each(func(a reconcile.ReportAuditEntry) error {
			a.CreatedAt = a.CreatedAt.In(loc)
			return item(a)
		})
	})
	return o.close()
}

// jsonObject writes one JSON object a field at a time, laid out exactly as WriteJSON lays
// out a whole value (two-space indent, a newline at the end), so that a long array can be
// written an element at a time. The first error sticks and ends the writing.
type jsonObject struct {
	w      io.Writer
	fields int
	err    error
}

func (o *jsonObject) write(parts ...[]byte) {
	for _, p := range parts {
		if o.err == nil {
			_, o.err = o.w.Write(p)
		}
	}
}

// key opens the next field.
func (o *jsonObject) key(name string) {
	sep := []byte(",\n  ")
	if o.fields == 0 {
		sep = []byte("{\n  ")
	}
	o.fields++
	k, _ := json.Marshal(name) // a string always marshals
	o.write(sep, k, []byte(": "))
}

func (o *jsonObject) field(name string, v any) {
	o.key(name)
	if o.err != nil {
		return
	}
	b, err := json.MarshalIndent(v, "  ", "  ")
	if err != nil {
		o.err = fmt.Errorf("json %s: %w", name, err)
		return
	}
	o.write(b)
}

// array writes the field name as an array of what each hands to item, in order.
func (o *jsonObject) array(name string, each func(item func(any) error) error) {
	o.key(name)
	if o.err != nil {
		return
	}
	n := 0
	err := each(func(v any) error {
		b, err := json.MarshalIndent(v, "    ", "  ")
		if err != nil {
			return fmt.Errorf("json %s[%d]: %w", name, n, err)
		}
		sep := []byte(",\n    ")
		if n == 0 {
			sep = []byte("[\n    ")
		}
		n++
		o.write(sep, b)
		return o.err
	})
	switch {
	case err != nil:
		o.err = err
	case n == 0:
		o.write([]byte("[]"))
	default:
		o.write([]byte("\n  ]"))
	}
}

func (o *jsonObject) close() error {
	if o.fields == 0 {
		o.write([]byte("{"))
	}
	o.write([]byte("\n}\n"))
	return o.err
}
