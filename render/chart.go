package render

import (
	"fmt"
	"html"
	"html/template"
	"slices"
	"strings"
	"time"

	"github.com/payrecon/payrecon/reconcile"
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
	reconcile.MismatchUnknownRefund:        "#ff9da7",
	reconcile.MismatchRefundAmount:         "#bab0ac",
	reconcile.MismatchOverRefunded:         "#d37295",
	reconcile.MismatchRefundAbnormal:       "#8cd17d",
	reconcile.MismatchRefundNotAtPlatform:  "#499894",
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

// countByDay counts the findings first seen on each day of the period (those first seen
// before the period start, on its first day, do not count): the days are computed here, in
// the report's zone, and the counting is the source's (an SQL aggregate for a report read
// from the database), so no finding is read for the chart.
func countByDay(src reconcile.FindingSource, from, to time.Time, loc *time.Location) (dayCounts, error) {
	var dc dayCounts
	start := from.In(loc)
	day := time.Date(start.Year(), start.Month(), start.Day(), 0, 0, 0, 0, loc)
	for ; day.Before(to); day = day.AddDate(0, 0, 1) {
		dc.days = append(dc.days, day)
	}
	if len(dc.days) > maxChartDays {
		dc.days = dc.days[len(dc.days)-maxChartDays:]
	}
	if len(dc.days) == 0 {
		return dc, nil
	}
	// Each bar counts from its midnight (the period start on the first day) to the next
	// midnight (the period end on the last).
	bounds := append(slices.Clone(dc.days), to)
	if bounds[0].Before(from) {
		bounds[0] = from
	}
	counts, err := src.CountFirstSeen(bounds)
	if err != nil {
		return dayCounts{}, err
	}
	dc.counts = counts
	present := map[reconcile.MismatchKind]bool{}
	for _, c := range counts {
		for k, n := range c {
			present[k] = present[k] || n > 0
		}
	}
	for _, k := range reconcile.MismatchKinds {
		if present[k] {
			dc.kinds = append(dc.kinds, k)
		}
	}
	return dc, nil
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
