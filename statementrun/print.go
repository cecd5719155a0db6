package statementrun

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/payrecon/payrecon/reconcile"
)

// WriteSummary prints each account's day as finance reads it: the settlement figures, then
// what became of the lines (repaired and found count refund lines too; the last two columns
// say how many of them were refunds repaired, and refunds whose number we do not have).
func WriteSummary(w io.Writer, res Result) {
	mode := ""
	if res.Run.DryRun {
		mode = " (dry run: nothing written)"
	}
	fmt.Fprintf(w, "statement run %d%s\n", res.Run.ID, mode)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := false
	for _, d := range res.Days {
		header = header || d.Err == nil || d.Figures.Lines > 0
	}
	if header {
		fmt.Fprintln(tw, "day\taccount\tpayments\tamount\trefunds\tamount\tfees\tnet\tlines\tmatched\trepaired\tfound\theld\treported\trefunds repaired\trefunds unknown\t")
	}
	for _, d := range res.Days {
		if d.Err != nil && d.Figures.Lines == 0 {
			continue
		}
		f := d.Figures
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", d.Day.Date, d.Account, f.Payments,
			reconcile.FormatYuan(f.PaymentsMinor), f.Refunds, reconcile.FormatYuan(f.RefundsMinor), reconcile.FormatYuanMilliFen(f.FeeMilliFen),
			reconcile.FormatYuanMilliFen(f.NetMilliFen), f.Lines, f.Matched, f.Repaired, f.Found, f.Held, d.Tally.Reported,
			f.RefundsRepaired, f.RefundsUnknown)
	}
	tw.Flush() //nolint:errcheck // a summary on stdout
	for _, d := range res.Days {
		if d.Err != nil {
			fmt.Fprintf(w, "%s %s: %v\n", d.Day.Date, d.Account, d.Err)
		}
	}
}
