package render

import (
	"strings"

	"github.com/payrecon/payrecon/reconcile"
)

// Yuan is an amount for people: ¥1,234.56 (-¥5.00), from integer minor units with no float
// in between (reconcile.FormatYuan does the arithmetic; this only groups the digits).
func Yuan(minor int64) string { return withYuanSign(reconcile.FormatYuan(minor)) }

// YuanMilliFen is an amount in thousandths of a fen (fees, net) as people read it, to the
// five decimals finance signs off: ¥1,234.56789, -¥0.60000.
func YuanMilliFen(mf int64) string { return withYuanSign(reconcile.FormatYuanMilliFen(mf)) }

// withYuanSign puts the yuan sign and digit groups on a decimal amount ("-1234.56").
func withYuanSign(s string) string {
	sign := ""
	if rest, ok := strings.CutPrefix(s, "-"); ok {
		sign, s = "-", rest
	}
	whole, frac, _ := strings.Cut(s, ".")
	var b strings.Builder
	for i, r := range whole {
		if i > 0 && (len(whole)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	return sign + "¥" + b.String() + "." + frac
}

// xlsxMoneyFormat is the spreadsheet number format of amounts: the same look as Yuan, and
// still a number finance can sum.
const xlsxMoneyFormat = `"¥"#,##0.00;-"¥"#,##0.00`

// xlsxFineMoneyFormat is the format of fees and net: five decimals, as the bills give them.
const xlsxFineMoneyFormat = `"¥"#,##0.00000;-"¥"#,##0.00000`

// xlsxDateFormat is the format of times: the report's zone's wall clock, to the second.
const xlsxDateFormat = `yyyy-mm-dd hh:mm:ss`

// xlsxDayFormat is the format of a day (a period's first and last days).
const xlsxDayFormat = `yyyy-mm-dd`

// Figure writes one of a statement day's figures as people read it: a count as a number,
// money as Yuan (fees and net to five decimals, YuanMilliFen).
func Figure(sf reconcile.StatementFigure, f reconcile.StatementFigures) string {
	if sf.Unit == reconcile.FigureCount {
		return sf.Format(f)
	}
	return withYuanSign(sf.Format(f))
}
