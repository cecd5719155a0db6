package statementrun

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/payrecon/payrecon/reconcile"
)

// WriteSummary prints each account's day as finance reads it: the settlement figures, then
// what became of the lines (reconcile.StatementFigureTable: repaired and found count refund
// lines too; refunds repaired and refunds unknown say how many of them were refunds repaired,
// and refunds whose number we do not have), then how many held orders it reported.
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
		cols := []string{"day", "account"}
		for _, sf := range reconcile.StatementFigureTable {
			cols = append(cols, strings.ReplaceAll(sf.Key, "_", " "))
		}
		fmt.Fprintln(tw, strings.Join(append(cols, "reported"), "\t")+"\t")
	}
	for _, d := range res.Days {
		if d.Err != nil && d.Figures.Lines == 0 {
			continue
		}
		cells := []string{d.Day.Date, d.Account.String()}
		for _, sf := range reconcile.StatementFigureTable {
			cells = append(cells, sf.Format(d.Figures))
		}
		fmt.Fprintln(tw, strings.Join(append(cells, strconv.Itoa(d.Tally.Reported)), "\t")+"\t")
	}
	tw.Flush() //nolint:errcheck // a summary on stdout
	for _, d := range res.Days {
		if d.Err != nil {
			fmt.Fprintf(w, "%s %s: %v\n", d.Day.Date, d.Account, d.Err)
		}
	}
}
