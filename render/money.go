package render

import (
	"strings"

	"github.com/payrecon/payrecon/reconcile"
)

// Yuan is an amount for people: ¥1,234.56 (-¥5.00), from integer minor units with no float
// in between (reconcile.FormatYuan does the arithmetic; this only groups the digits).
func Yuan(minor int64) string {
	s := reconcile.FormatYuan(minor)
	sign := ""
	if strings.HasPrefix(s, "-") {
		sign, s = "-", s[1:]
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
