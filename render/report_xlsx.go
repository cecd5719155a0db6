package render

import (
	"archive/zip"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/xuri/excelize/v2"

	"github.com/payrecon/payrecon/reconcile"
)

// xlsxStyles are the cell styles of the workbook.
type xlsxStyles struct {
	head, money, bold, boldMoney, title int
	fine, boldFine                      int // thousandths of a fen: fees and net to five decimals
	date                                int // a time, in the report's zone
	day                                 int // a day (a period's first and last)
}

func newXLSXStyles(f *excelize.File) (xlsxStyles, error) {
	var st xlsxStyles
	money, fine, date, day := xlsxMoneyFormat, xlsxFineMoneyFormat, xlsxDateFormat, xlsxDayFormat
	defs := []struct {
		dst *int
		s   *excelize.Style
	}{
		{&st.head, &excelize.Style{Font: &excelize.Font{Bold: true}, Alignment: &excelize.Alignment{WrapText: true, Vertical: "top"},
			Fill: excelize.Fill{Type: "pattern", Pattern: 1, Color: []string{"E8ECF0"}}}},
		{&st.money, &excelize.Style{CustomNumFmt: &money}},
		{&st.bold, &excelize.Style{Font: &excelize.Font{Bold: true}}},
		{&st.boldMoney, &excelize.Style{Font: &excelize.Font{Bold: true}, CustomNumFmt: &money}},
		{&st.title, &excelize.Style{Font: &excelize.Font{Bold: true, Size: 14}}},
		{&st.fine, &excelize.Style{CustomNumFmt: &fine}},
		{&st.boldFine, &excelize.Style{Font: &excelize.Font{Bold: true}, CustomNumFmt: &fine}},
		{&st.date, &excelize.Style{CustomNumFmt: &date}},
		{&st.day, &excelize.Style{CustomNumFmt: &day}},
	}
	for _, d := range defs {
		id, err := f.NewStyle(d.s)
		if err != nil {
			return st, err
		}
		*d.dst = id
	}
	return st, nil
}

// xlsxWidthSample is how many rows of a table set its column widths: a streamed sheet fixes
// its widths before its first row, so they follow the first rows, not all of them.
const xlsxWidthSample = 1000

// writeXLSX writes a Summary sheet (the period and the headline figures above the summary
// table), a Findings sheet, a Runs sheet and a Statements sheet. Each table's header row is
// frozen and labelled for people, the findings and runs carry an autofilter, amounts are
// numeric cells with a ¥ money format (numbers only when the number is exactly their
// decimal text), and columns are as wide as their content (of the first xlsxWidthSample
// rows). Text is always a string cell, never a formula, whatever the platform sent; times
// are date cells holding the wall clock of the report's zone, which the Summary sheet names;
// fees and net are numbers to five decimals.
//
// Every sheet goes through excelize's StreamWriter, which keeps up to 16 MiB of a sheet in
// memory and the rest in a temporary file (os.TempDir; about 1 KiB per finding); the zip is
// written straight to w.
func (d ReportDoc) writeXLSX(w io.Writer) error {
	if err := checkTempDir(); err != nil {
		return err
	}
	f := excelize.NewFile()
	defer f.Close()
	// excelize builds the whole file in a buffer before handing it over; a zip writer on w
	// instead writes it out as it is compressed.
	f.SetZipWriter(func(io.Writer) excelize.ZipWriter { return zip.NewWriter(w) })
	st, err := newXLSXStyles(f)
	if err != nil {
		return err
	}
	for i, s := range d.sections(d.lang()) {
		if err := d.xlsxSheet(f, i, s, st); err != nil {
			return fmt.Errorf("xlsx sheet %s: %w", s.Key, err)
		}
	}
	f.SetActiveSheet(0)
	buf, err := f.WriteToBuffer()
	if err == nil && buf.Len() > 0 {
		err = errors.New("xlsx: excelize wrote into its own buffer instead of the zip writer")
	}
	return err
}

// checkTempDir makes sure a sheet can spill to a temporary file: excelize keeps the whole
// sheet in memory, silently, when it cannot create one, which is what streaming must avoid.
func checkTempDir() error {
	probe, err := os.CreateTemp("", "payrecon-xlsx-")
	if err != nil {
		return fmt.Errorf("xlsx: a report spreadsheet needs a writable temporary folder (TMPDIR): %w", err)
	}
	probe.Close()
	return os.Remove(probe.Name())
}

// xlsxSheet writes section s on the i-th sheet, the headline above the first one's table.
func (d ReportDoc) xlsxSheet(f *excelize.File, i int, s repSection, st xlsxStyles) error {
	lang := d.lang()
	name := Label(lang, s.Sheet)
	var err error
	if i == 0 {
		err = f.SetSheetName("Sheet1", name)
	} else {
		_, err = f.NewSheet(name)
	}
	if err != nil {
		return err
	}
	var top []xlsxRow
	if i == 0 {
		top = d.xlsxHeadline(st)
	}
	// Before the stream writer: it copies the sheet's settings when it starts.
	xs := &xlsxSheet{f: f, sheet: name, loc: d.Loc, lang: lang, widths: map[int]int{}}
	if err := xs.printSetup(len(top) + 1); err != nil {
		return err
	}
	if xs.sw, err = f.NewStreamWriter(name); err != nil {
		return err
	}
	if err := xs.table(top, s, st); err != nil {
		return err
	}
	return xs.sw.Flush()
}

// printSetup makes the sheet print as finance reads it: landscape, every column on one page's
// width (as many pages down as it takes), the table's header row on every page.
func (s *xlsxSheet) printSetup(headerRow int) error {
	landscape, wide, tall, fit := "landscape", 1, 0, true
	if err := s.f.SetSheetProps(s.sheet, &excelize.SheetPropsOptions{FitToPage: &fit}); err != nil {
		return err
	}
	if err := s.f.SetPageLayout(s.sheet, &excelize.PageLayoutOptions{Orientation: &landscape, FitToWidth: &wide, FitToHeight: &tall}); err != nil {
		return err
	}
	return s.f.SetDefinedName(&excelize.DefinedName{Name: "_xlnm.Print_Titles", Scope: s.sheet,
		RefersTo: fmt.Sprintf("'%s'!$%d:$%d", strings.ReplaceAll(s.sheet, "'", "''"), headerRow, headerRow)})
}

// xlsxHeadline is the report's period and headline figures above the summary table, and the
// empty row below them.
func (d ReportDoc) xlsxHeadline(st xlsxStyles) []xlsxRow {
	r, lang := d.Report, d.lang()
	row := func(style int, cells ...repCell) xlsxRow {
		return xlsxRow{style: style, money: st.money, fine: st.fine, date: st.date, cells: cells}
	}
	from, to := row(0, rcText(Label(lang, "report.from")), rcTime(r.From)), row(0, rcText(Label(lang, "report.to")), rcTime(r.To))
	if first, last, ok := d.wholeDays(); ok {
		// Days as people gave them: the first and the last, both included.
		from = xlsxRow{date: st.day, cells: []repCell{rcText(Label(lang, "report.from")), rcTime(first)}}
		to = xlsxRow{date: st.day, cells: []repCell{rcText(Label(lang, "report.to_day")), rcTime(last)}}
	}
	return []xlsxRow{
		row(st.title, rcText(Label(lang, "report.title"))),
		from,
		to,
		row(0, rcText(Label(lang, "report.zone")), rcText(d.Loc.String())),
		row(0, rcText(Label(lang, "report.generated")), rcTime(d.Generated)),
		row(0, rcText(Label(lang, "report.card.findings")), rcInt(r.Totals.Count)),
		row(0, rcText(Label(lang, "report.card.stake")), rcYuan(r.Totals.AtStakeMinor)),
		row(0, rcText(Label(lang, "report.card.runs")), rcInt(r.RunTotals.Runs)),
		{},
	}
}

// xlsxRow is a row to write: style, when not 0, applies to every cell of it; amounts get
// money, thousandths of a fen fine, times date.
type xlsxRow struct {
	style, money, fine, date int
	cells                    []repCell
}

// xlsxSheet is one streamed sheet: rows go out in order, and what must precede the first
// (column widths, frozen panes) is settled from the rows held back until then.
type xlsxSheet struct {
	f      *excelize.File
	sw     *excelize.StreamWriter
	sheet  string
	loc    *time.Location
	lang   Lang
	next   int         // rows written so far
	widths map[int]int // column -> widest text seen
}

// table writes the rows above the table (top), then the section: labelled header (frozen),
// rows, totals, filter. The first xlsxWidthSample rows wait until the widths are known.
func (s *xlsxSheet) table(top []xlsxRow, sec repSection, st xlsxStyles) error {
	hdr := make([]repCell, len(sec.Header))
	for j, h := range sec.Header {
		hdr[j] = rcText(Label(s.lang, h))
	}
	held := append(top, xlsxRow{style: st.head, money: st.money, cells: hdr})
	headerRow := len(held)
	totals := xlsxRow{style: st.bold, money: st.boldMoney, fine: st.boldFine, date: st.date, cells: sec.Totals}
	data := func(cells []repCell) xlsxRow {
		return xlsxRow{money: st.money, fine: st.fine, date: st.date, cells: cells}
	}
	started := false
	start := func() error {
		started = true
		return s.start(append(held, totals), headerRow, held)
	}
	err := sec.Rows(func(cells []repCell) error {
		if started {
			return s.row(data(cells))
		}
		held = append(held, data(cells))
		if len(held)-headerRow < xlsxWidthSample {
			return nil
		}
		return start()
	})
	if err == nil && !started {
		err = start()
	}
	if err != nil {
		return err
	}
	lastRow := s.next
	if sec.Totals != nil {
		if err := s.row(totals); err != nil {
			return err
		}
	}
	if !sec.Filter {
		return nil
	}
	// Before Flush: the stream writes the sheet's autoFilter element when it ends.
	first, _ := excelize.CoordinatesToCellName(1, headerRow)
	last, _ := excelize.CoordinatesToCellName(len(sec.Header), lastRow)
	return s.f.AutoFilter(s.sheet, first+":"+last, nil)
}

// start sets the column widths from sample, freezes the rows down to headerRow and writes the
// rows held so far.
func (s *xlsxSheet) start(sample []xlsxRow, headerRow int, held []xlsxRow) error {
	for _, r := range sample {
		for i, c := range r.cells {
			s.widths[i+1] = max(s.widths[i+1], displayWidth(s.shown(c)))
		}
	}
	for _, col := range slices.Sorted(maps.Keys(s.widths)) {
		if err := s.sw.SetColWidth(col, col, float64(min(max(s.widths[col], 6)+2, 60))); err != nil {
			return err
		}
	}
	topLeft, _ := excelize.CoordinatesToCellName(1, headerRow+1)
	err := s.sw.SetPanes(&excelize.Panes{Freeze: true, YSplit: headerRow, TopLeftCell: topLeft, ActivePane: "bottomLeft"})
	if err != nil {
		return err
	}
	for _, r := range held {
		if err := s.row(r); err != nil {
			return err
		}
	}
	return nil
}

// row writes the next row (an empty one leaves the row blank).
func (s *xlsxSheet) row(r xlsxRow) error {
	s.next++
	if len(r.cells) == 0 {
		return nil
	}
	values := make([]any, len(r.cells))
	for i, c := range r.cells {
		values[i] = s.value(c, r)
	}
	ref, _ := excelize.CoordinatesToCellName(1, s.next)
	if err := s.sw.SetRow(ref, values); err != nil {
		return fmt.Errorf("row %d: %w", s.next, err)
	}
	return nil
}

// value is a cell as the stream writes it: integers, amounts (fees and net to five decimals)
// as numbers, times as dates a spreadsheet can sort and subtract, everything else as the
// text shown (a string cell: never a formula).
func (s *xlsxSheet) value(c repCell, r xlsxRow) excelize.Cell {
	switch c.Kind {
	case cellInt:
		return excelize.Cell{StyleID: r.style, Value: c.N}
	case cellAmount:
		return excelize.Cell{StyleID: r.money, Value: xlsxAmount(c.N)}
	case cellMilliFen:
		return excelize.Cell{StyleID: r.fine, Value: xlsxExact(reconcile.FormatYuanMilliFen(c.N))}
	case cellTime:
		if c.T != nil {
			// A spreadsheet time has no zone: the wall clock of the report's zone, which the
			// Summary sheet names.
			w := c.T.In(s.loc)
			return excelize.Cell{StyleID: r.date, Value: time.Date(w.Year(), w.Month(), w.Day(), w.Hour(), w.Minute(), w.Second(), 0, time.UTC)}
		}
	}
	return excelize.Cell{StyleID: r.style, Value: s.shown(c)}
}

// shown is the cell's text as a person sees it, which sets its column's width.
func (s *xlsxSheet) shown(c repCell) string {
	switch c.Kind {
	case cellInt:
		return strconv.FormatInt(c.N, 10)
	case cellAmount:
		return Yuan(c.N)
	case cellMilliFen:
		return reconcile.FormatYuanMilliFen(c.N)
	case cellTime:
		return c.T.In(s.loc).Format(time.DateTime)
	}
	return c.text(s.lang)
}

// xlsxAmount is an amount in fen as the cell's value: the number in yuan when the float64 a
// spreadsheet stores is exactly the amount's decimal text (every amount below 10^13 yuan),
// else that text, so no amount is ever rounded.
func xlsxAmount(fen int64) any { return xlsxExact(reconcile.FormatYuan(fen)) }

// xlsxExact is a decimal amount as a cell's value: the number when the float64 a
// spreadsheet stores is exactly its text, else the text.
func xlsxExact(text string) any {
	v, err := strconv.ParseFloat(text, 64)
	if err == nil && strconv.FormatFloat(v, 'f', -1, 64) == strings.TrimSuffix(strings.TrimRight(text, "0"), ".") {
		return v
	}
	return text
}

// displayWidth counts a wide (CJK) character as two columns, as spreadsheets draw them.
func displayWidth(s string) int {
	n := 0
	for _, r := range s {
		if r >= 0x1100 && utf8.RuneLen(r) >= 3 {
			n += 2
		} else {
			n++
		}
	}
	return n
}
