package render

import (
	"fmt"
	"html"
	"html/template"
	"strings"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo"
)

// kindColours colour the chart's kinds (a palette readable by the colour-blind, Tableau 10).
var kindColours = map[reconcile.MismatchKind]string{
	reconcile.MismatchAmount:               "#4e79a7",
	reconcile.MismatchCurrency:             "#f28e2b",
	reconcile.MismatchMerchant:             "#e15759",
	reconcile.MismatchUnknownOrder:         "#76b7b2",
	reconcile.MismatchPaidAfterClose:       "#59a14f",
	reconcile.MismatchDuplicatePayment:     "#edc948",
	reconcile.MismatchLocalPaidPlatformNot: "#b07aa1",
	reconcile.MismatchRefundedAtPlatform:   "#9c755f",
}

// maxChartDays bounds the bars: a longer period shows its last maxChartDays days.
const maxChartDays = 92

// dayCounts is the chart's data: per day of the period (in loc), findings first seen that day
// by kind.
type dayCounts struct {
	days   []time.Time
	counts []map[reconcile.MismatchKind]int
	kinds  []reconcile.MismatchKind // kinds present, in domain order
}

func countByDay(findings []repo.Finding, from, to time.Time, loc *time.Location) dayCounts {
	var dc dayCounts
	start := from.In(loc)
	day := time.Date(start.Year(), start.Month(), start.Day(), 0, 0, 0, 0, loc)
	for ; day.Before(to); day = day.AddDate(0, 0, 1) {
		dc.days = append(dc.days, day)
	}
	if len(dc.days) > maxChartDays {
		dc.days = dc.days[len(dc.days)-maxChartDays:]
	}
	dc.counts = make([]map[reconcile.MismatchKind]int, len(dc.days))
	index := make(map[int64]int, len(dc.days)) // a day's midnight (Unix seconds) -> its bar
	for i, day := range dc.days {
		index[day.Unix()] = i
	}
	present := map[reconcile.MismatchKind]bool{}
	for _, f := range findings {
		if f.FirstSeenAt.Before(from) || !f.FirstSeenAt.Before(to) {
			continue
		}
		t := f.FirstSeenAt.In(loc)
		i, ok := index[time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc).Unix()]
		if !ok {
			continue // before the last maxChartDays days
		}
		if dc.counts[i] == nil {
			dc.counts[i] = map[reconcile.MismatchKind]int{}
		}
		dc.counts[i][f.Kind]++
		present[f.Kind] = true
	}
	for _, k := range reconcile.MismatchKinds {
		if present[k] {
			dc.kinds = append(dc.kinds, k)
		}
	}
	return dc
}

// chartSVG draws findings first seen per day as stacked bars by kind, with a tooltip per bar
// segment and a legend: inline SVG, no script, drawn on the server. Every text is
// escaped. Empty when no finding was first seen in the period.
func chartSVG(dc dayCounts, lang Lang) template.HTML {
	if len(dc.kinds) == 0 {
		return ""
	}
	const w, h, left, right, top, bottom = 960.0, 250.0, 44.0, 12.0, 12.0, 34.0
	plotW, plotH := w-left-right, h-top-bottom
	peak := 1
	for _, c := range dc.counts {
		n := 0
		for _, v := range c {
			n += v
		}
		peak = max(peak, n)
	}
	step := niceStep(peak)
	yMax := ((peak + step - 1) / step) * step
	var b strings.Builder
	fmt.Fprintf(&b, `<svg class="chart" role="img" viewBox="0 0 %.0f %.0f" aria-label="%s">`,
		w, h, html.EscapeString(Label(lang, "report.chart")))
	for v := 0; v <= yMax; v += step { // grid and y axis
		y := top + plotH - plotH*float64(v)/float64(yMax)
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#d0d7de" stroke-width="1"/>`, left, w-right, y, y)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" font-size="11" fill="#656d76">%d</text>`, left-6, y+4, v)
	}
	slot := plotW / float64(len(dc.days))
	labelEvery := max(1, (len(dc.days)+13)/14)
	for i, day := range dc.days {
		x := left + slot*float64(i) + slot*0.15
		y := top + plotH
		for _, k := range dc.kinds {
			n := dc.counts[i][k]
			if n == 0 {
				continue
			}
			bh := plotH * float64(n) / float64(yMax)
			y -= bh
			fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s %s: %d</title></rect>`,
				x, y, slot*0.7, bh, kindColours[k], day.Format("2006-01-02"), html.EscapeString(Label(lang, string(k))), n)
		}
		if i%labelEvery == 0 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="11" fill="#656d76">%s</text>`,
				left+slot*float64(i)+slot/2, h-bottom+16, day.Format("01-02"))
		}
	}
	b.WriteString(`</svg>`)
	// The legend is HTML below the chart, so it wraps on a narrow page instead of running
	// off the drawing.
	b.WriteString(`<ul class="legend">`)
	for _, k := range dc.kinds {
		fmt.Fprintf(&b, `<li><span class="swatch" style="background:%s"></span>%s</li>`, kindColours[k], html.EscapeString(Label(lang, string(k))))
	}
	b.WriteString(`</ul>`)
	return template.HTML(b.String()) //nolint:gosec // built above from numbers, fixed colours and escaped labels
}

// niceStep is a grid step giving about four lines: 1, 2, 5, 10, 20, 50...
func niceStep(peak int) int {
	step := 1
	for {
		for _, m := range []int{1, 2, 5} {
			if peak <= step*m*4 {
				return step * m
			}
		}
		step *= 10
	}
}
