package render

import (
	"fmt"
	"io"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/xuri/excelize/v2"

	"github.com/payrecon/payrecon/reconcile"
)

// xlsxStyles are the cell styles of the workbook.
type xlsxStyles struct {
	head, money, bold, boldMoney, title int
}

func newXLSXStyles(f *excelize.File) (xlsxStyles, error) {
	var st xlsxStyles
	money := xlsxMoneyFormat
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

// writeXLSX writes a Summary sheet (the period and the headline figures above the summary
// table), a Findings sheet and a Runs sheet. Each table's header row is frozen and labelled
// for people, the findings and runs carry an autofilter, amounts are numeric cells with a ¥
// money format (written from their exact decimal text: no float in between), and columns
// are as wide as their content. Text is always a string cell, never a formula, whatever the
// platform sent; times are text in the report's zone, named on the Summary sheet.
func (d ReportDoc) writeXLSX(w io.Writer) error {
	f := excelize.NewFile()
	defer f.Close()
	st, err := newXLSXStyles(f)
	if err != nil {
		return err
	}
	lang := d.lang()
	for i, s := range d.sections(d.lang()) {
		name := Label(lang, s.Sheet)
		if i == 0 {
			err = f.SetSheetName("Sheet1", name)
		} else {
			_, err = f.NewSheet(name)
		}
		if err != nil {
			return err
		}
		sw := &xlsxSheet{f: f, sheet: name, loc: d.Loc, lang: lang, money: st.money, widths: map[int]int{}}
		if i == 0 {
			d.xlsxHeadline(sw, st)
		}
		if err := sw.table(s, st); err != nil {
			return err
		}
	}
	f.SetActiveSheet(0)
	_, err = f.WriteTo(w)
	return err
}

// xlsxHeadline writes the report's period and headline figures above the summary table.
func (d ReportDoc) xlsxHeadline(sw *xlsxSheet, st xlsxStyles) {
	r, lang := d.Report, sw.lang
	sw.row(st.title, []repCell{rcText(Label(lang, "report.title"))})
	sw.row(0, []repCell{rcText(Label(lang, "report.from")), rcTime(r.From)})
	sw.row(0, []repCell{rcText(Label(lang, "report.to")), rcTime(r.To)})
	sw.row(0, []repCell{rcText(Label(lang, "report.zone")), rcText(d.Loc.String())})
	sw.row(0, []repCell{rcText(Label(lang, "report.generated")), rcTime(d.Generated)})
	sw.row(0, []repCell{rcText(Label(lang, "report.card.findings")), rcInt(r.Totals.Count)})
	sw.row(0, []repCell{rcText(Label(lang, "report.card.stake")), rcYuan(r.Totals.AtStakeMinor)})
	sw.row(0, []repCell{rcText(Label(lang, "report.card.runs")), rcInt(r.RunTotals.Runs)})
	sw.next++
}

type xlsxSheet struct {
	f      *excelize.File
	sheet  string
	loc    *time.Location
	lang   Lang
	money  int
	next   int // rows written so far
	widths map[int]int
	err    error
}

// table writes one section: labelled header (frozen), rows, totals, filter and widths.
func (s *xlsxSheet) table(sec repSection, st xlsxStyles) error {
	headerRow := s.next + 1
	hdr := make([]repCell, len(sec.Header))
	for j, h := range sec.Header {
		hdr[j] = rcText(Label(s.lang, h))
	}
	s.row(st.head, hdr)
	for _, r := range sec.Rows {
		s.row(0, r)
	}
	lastRow := s.next
	if sec.Totals != nil {
		s.money = st.boldMoney
		s.row(st.bold, sec.Totals)
	}
	if s.err != nil {
		return s.err
	}
	for col, width := range s.widths {
		name, _ := excelize.ColumnNumberToName(col)
		if err := s.f.SetColWidth(s.sheet, name, name, float64(min(max(width, 6)+2, 60))); err != nil {
			return err
		}
	}
	topLeft, _ := excelize.CoordinatesToCellName(1, headerRow+1)
	if err := s.f.SetPanes(s.sheet, &excelize.Panes{Freeze: true, YSplit: headerRow, TopLeftCell: topLeft,
		ActivePane: "bottomLeft"}); err != nil {
		return err
	}
	if !sec.Filter {
		return nil
	}
	first, _ := excelize.CoordinatesToCellName(1, headerRow)
	last, _ := excelize.CoordinatesToCellName(len(sec.Header), lastRow)
	return s.f.AutoFilter(s.sheet, first+":"+last, nil)
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
			err = s.f.SetCellDefault(s.sheet, ref, reconcile.FormatYuan(c.N))
			shown = Yuan(c.N)
			st = s.money
		case cellMilliFen:
			shown = reconcile.FormatYuanMilliFen(c.N)
			err = s.f.SetCellStr(s.sheet, ref, shown)
		case cellTime:
			shown = c.T.In(s.loc).Format(time.DateTime)
			err = s.f.SetCellStr(s.sheet, ref, shown)
		default:
			shown = c.text(s.lang)
			err = s.f.SetCellStr(s.sheet, ref, shown)
		}
		if err == nil && st != 0 {
			err = s.f.SetCellStyle(s.sheet, ref, ref, st)
		}
		if err != nil {
			s.err = fmt.Errorf("sheet %s cell %s: %w", s.sheet, ref, err)
			return
		}
		if n := displayWidth(shown); n > s.widths[i+1] {
			s.widths[i+1] = n
		}
	}
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
