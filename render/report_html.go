package render

import (
	"html/template"
	"io"
	"strconv"
	"strings"
	"time"
)

// lang is the language labels are written in: English unless set.
func (d ReportDoc) lang() Lang {
	if d.Lang == "" {
		return LangEN
	}
	return d.Lang
}

type htmlCell struct {
	Text  string
	Class string
}

type htmlColumn struct {
	Label string
	Class string
}

type htmlSection struct {
	Title   string
	Empty   string
	Columns []htmlColumn
	Totals  []htmlCell
	Count   int64
}

type htmlPage struct {
	Lang                      string
	T                         func(key string) string
	From, To, Zone, Generated string
	Findings, Stake, Runs     string
	Errors                    string
	Chart                     template.HTML
}

// htmlTime is a time for people on the page: to the minute, in the report's zone.
const htmlTime = "2006-01-02 15:04"

// htmlCells are the page's cells of row. Numbers align right; an identifier, an amount or a
// time stays on one line (the style sheet's td rule): one broken across lines is misread.
// A coded value's label is words: it wraps at spaces, never inside a word (keep-all: nor
// inside a Chinese one). Prose (a note, an error) wraps at spaces and between CJK
// characters.
func (d ReportDoc) htmlCells(row []repCell, cols []int) []htmlCell {
	out := make([]htmlCell, len(cols))
	for j, i := range cols {
		c := row[i]
		switch c.Kind {
		case cellInt:
			out[j] = htmlCell{Text: strconv.FormatInt(c.N, 10), Class: "num"}
		case cellAmount:
			out[j] = htmlCell{Text: Yuan(c.N), Class: "num"}
		case cellMilliFen:
			out[j] = htmlCell{Text: YuanMilliFen(c.N), Class: "num"}
		case cellTime:
			out[j] = htmlCell{Text: c.T.In(d.Loc).Format(htmlTime), Class: "time"}
		default:
			class := c.Class
			switch {
			case c.Prose:
				class = "prose"
			case c.Coded:
				class = strings.TrimSpace("label " + c.Class)
			}
			out[j] = htmlCell{Text: c.text(d.lang()), Class: class}
		}
	}
	return out
}

// htmlColumns are the section's columns on the page, labelled for people; numbers (and
// amounts) align right, as the first row's cells say.
func (d ReportDoc) htmlColumns(s repSection, first []repCell) []htmlColumn {
	out := make([]htmlColumn, len(s.HTMLCols))
	for j, i := range s.HTMLCols {
		class := ""
		if k := first[i].Kind; k == cellInt || k == cellAmount || k == cellMilliFen {
			class = "num"
		}
		out[j] = htmlColumn{Label: Label(d.lang(), s.Header[i]), Class: class}
	}
	return out
}

// writeHTML writes the page a piece at a time: the head with the headline figures and the
// chart (its bars are counted by the finding source, not from the findings), then each
// table as its rows come.
func (d ReportDoc) writeHTML(w io.Writer) error {
	r, lang := d.Report, d.lang()
	dc, err := countByDay(d.findings(), r.From, r.To, d.Loc)
	if err != nil {
		return err
	}
	from, to := r.From.In(d.Loc).Format(htmlTime), r.To.In(d.Loc).Format(htmlTime)
	if first, last, ok := d.wholeDays(); ok {
		from, to = first.Format(time.DateOnly), last.Format(time.DateOnly)
	}
	page := htmlPage{Lang: lang.HTMLTag(), T: func(key string) string { return Label(lang, key) },
		From: from, To: to,
		Zone: d.Loc.String(), Generated: d.Generated.In(d.Loc).Format("2006-01-02 15:04:05 -07:00"),
		Findings: strconv.FormatInt(r.Totals.Count, 10), Stake: Yuan(r.Totals.AtStakeMinor),
		Runs: strconv.FormatInt(r.RunTotals.Runs, 10), Errors: strconv.FormatInt(r.RunTotals.Errors, 10),
		Chart: chartSVG(dc, lang)}
	if err := reportPageTemplate.ExecuteTemplate(w, "head", page); err != nil {
		return err
	}
	for _, s := range d.sections(lang) {
		if err := d.htmlSection(w, s); err != nil {
			return err
		}
	}
	return reportPageTemplate.ExecuteTemplate(w, "foot", page)
}

// htmlSection writes one table: its heading, then the table, opened at the first row (whose
// cells set the columns' alignment) and written a row at a time, or the text saying it has
// no rows.
func (d ReportDoc) htmlSection(w io.Writer, s repSection) error {
	lang := d.lang()
	hs := htmlSection{Title: Label(lang, s.Title), Empty: Label(lang, s.Empty), Count: s.Count}
	if err := reportPageTemplate.ExecuteTemplate(w, "section", hs); err != nil {
		return err
	}
	rows := 0
	err := s.Rows(func(row []repCell) error {
		if rows == 0 {
			hs.Columns = d.htmlColumns(s, row)
			if err := reportPageTemplate.ExecuteTemplate(w, "table", hs); err != nil {
				return err
			}
		}
		rows++
		return reportPageTemplate.ExecuteTemplate(w, "row", d.htmlCells(row, s.HTMLCols))
	})
	if err != nil {
		return err
	}
	if rows == 0 {
		return reportPageTemplate.ExecuteTemplate(w, "empty", hs)
	}
	if s.Totals != nil {
		hs.Totals = d.htmlCells(s.Totals, s.HTMLCols)
	}
	return reportPageTemplate.ExecuteTemplate(w, "end", hs)
}

// reportPageTemplate is one self-contained page: inline CSS, inline SVG, no script, no
// font, image or style sheet from anywhere else (finance opens it from a mail or a share,
// offline). No token ever breaks: a cell holding an identifier, an amount or a time is one
// line; labels and headings wrap at spaces only (keep-all: never inside a Chinese word);
// prose wraps at spaces or between CJK characters; a table wider than the page scrolls
// sideways in its own box instead of squeezing a column (printed, it shrinks its type).
// html/template
// escapes every value:
// finding text comes from the platforms. The page is written in pieces (head, then per
// table: section, table, a row at a time, end or empty; then foot) so that a table's rows
// need not all be held; each piece starts and ends between elements.
var reportPageTemplate = template.Must(template.New("report").Parse(`{{define "head"}}<!DOCTYPE html>
<html lang="{{.Lang}}">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{call .T "report.title"}} {{.From}} – {{.To}}</title>
<style>
  *, *::before, *::after { box-sizing: border-box; }
  body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "PingFang SC", "Microsoft YaHei", "Noto Sans CJK SC", sans-serif;
         margin: 0 auto; padding: 1.5rem 2rem; max-width: 1400px; color: #1f2328; background: #fff; line-height: 1.4; }
  h1 { font-size: 1.5rem; margin: 0 0 .25rem; }
  h2 { font-size: 1.1rem; margin: 2rem 0 .5rem; padding-bottom: .25rem; border-bottom: 1px solid #d0d7de; }
  .muted { color: #656d76; }
  .cards { display: flex; gap: 1rem; margin: 1rem 0; flex-wrap: wrap; }
  .card { border: 1px solid #d0d7de; border-radius: 6px; padding: .6rem 1rem; min-width: 9rem; }
  .card b { display: block; font-size: 1.3rem; font-variant-numeric: tabular-nums; }
  svg.chart { width: 100%; height: auto; display: block; }
  ul.legend { list-style: none; display: flex; flex-wrap: wrap; gap: .3rem 1.2rem; padding: 0; margin: .5rem 0 0; font-size: .85rem; }
  ul.legend .swatch { display: inline-block; width: .8rem; height: .8rem; margin-right: .35rem; vertical-align: -.1rem; border-radius: 2px; }
  .wide { overflow-x: auto; }
  table { width: 100%; table-layout: auto; border-collapse: collapse; font-size: .8rem; }
  th, td { border: 1px solid #d0d7de; padding: .25rem .35rem; text-align: left; vertical-align: top; }
  td { white-space: nowrap; }
  th { background: #f6f8fa; font-weight: 600; word-break: keep-all; }
  td.label { white-space: normal; word-break: keep-all; }
  td.prose { white-space: normal; min-width: 14rem; }
  th.num, td.num { text-align: right; font-variant-numeric: tabular-nums; }
  tbody tr:nth-child(even) td { background: #fafbfc; }
  tfoot td { font-weight: 600; background: #f6f8fa; }
  .st-open { color: #cf222e; font-weight: 600; }
  .st-acknowledged { color: #9a6700; font-weight: 600; }
  .st-pending_approval { color: #8250df; font-weight: 600; }
  .st-resolved { color: #1a7f37; }
  @media print { body { padding: 0; max-width: none; } h2 { break-after: avoid; } tr { break-inside: avoid; }
                 .wide { overflow: visible; } table { font-size: .6rem; } }
</style>
</head>
<body>
<h1>{{call .T "report.title"}}</h1>
<p class="muted">{{call .T "report.period"}}: {{.From}} – {{.To}} ({{.Zone}}). {{call .T "report.generated"}} {{.Generated}}.
{{call .T "report.amounts"}}</p>
<div class="cards">
<div class="card">{{call .T "report.card.findings"}}<b>{{.Findings}}</b></div>
<div class="card">{{call .T "report.card.stake"}}<b>{{.Stake}}</b></div>
<div class="card">{{call .T "report.card.runs"}}<b>{{.Runs}}</b></div>
<div class="card">{{call .T "report.card.errors"}}<b>{{.Errors}}</b></div>
</div>
<h2>{{call .T "report.chart"}}</h2>
{{if .Chart}}{{.Chart}}{{else}}<p class="muted">{{call .T "report.chart.empty"}}</p>{{end}}
{{end}}

{{- define "section"}}
<h2>{{.Title}} ({{.Count}})</h2>
{{end}}

{{- define "table"}}<div class="wide"><table>
<thead><tr>{{range .Columns}}<th{{with .Class}} class="{{.}}"{{end}}>{{.Label}}</th>{{end}}</tr></thead>
<tbody>
{{end}}

{{- define "row"}}<tr>{{range .}}<td{{with .Class}} class="{{.}}"{{end}}>{{.Text}}</td>{{end}}</tr>
{{end}}

{{- define "end"}}</tbody>
{{with .Totals}}<tfoot><tr>{{range .}}<td{{with .Class}} class="{{.}}"{{end}}>{{.Text}}</td>{{end}}</tr></tfoot>{{end}}
</table></div>
{{end}}

{{- define "empty"}}<p class="muted">{{.Empty}}</p>
{{end}}

{{- define "foot"}}
</body>
</html>
{{end}}`))
