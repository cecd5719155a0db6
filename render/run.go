package render

import (
	"fmt"
	"io"
	"sync"
	"text/tabwriter"

	"github.com/payrecon/payrecon/reconcile"
)

// RunSummary prints a run's counters as a small table.
func RunSummary(w io.Writer, run reconcile.Run) {
	c := run.Counts
	dry := ""
	if run.DryRun {
		dry = " (dry run: counts are what it would do; nothing was written)"
	}
	fmt.Fprintf(w, "run %d %s %s, shard %s%s\n", run.ID, run.Mode, run.Status, run.Shard, dry)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	for _, rc := range reconcile.RunCounters {
		fmt.Fprintf(tw, "%s\t", rc.Name)
	}
	fmt.Fprintln(tw)
	for _, rc := range reconcile.RunCounters {
		fmt.Fprintf(tw, "%d\t", rc.Value(c))
	}
	fmt.Fprintln(tw)
	tw.Flush()
}

// DryRunPrinter prints what a dry run would change, one line per order that would move or
// that has a finding.
type DryRunPrinter struct {
	mu sync.Mutex
	w  io.Writer
}

// NewDryRunPrinter prints to w; it is safe for the pass's concurrent checks.
func NewDryRunPrinter(w io.Writer) *DryRunPrinter { return &DryRunPrinter{w: w} }

// Checked prints one line for a check that would move an order or that found something.
func (d *DryRunPrinter) Checked(c reconcile.Check) {
	if c.Refund != nil {
		d.print(refundDryRunLine(c))
		return
	}
	var line string
	o := c.Order
	switch c.Tally() {
	case reconcile.TallyError:
		line = fmt.Sprintf("error     %s %s: %v", o.Platform, o.OutTradeNo, c.Err)
	case reconcile.TallyRepaired:
		line = fmt.Sprintf("would repair %s %s: PENDING -> PAID (%s, %s yuan)", o.Platform, o.OutTradeNo, c.Result.PlatformTradeNo, reconcile.FormatYuan(c.Result.AmountMinor))
	case reconcile.TallyClosed:
		how := "locally"
		if c.Result.State == reconcile.StateOpen {
			how = "at the platform, then locally"
		}
		line = fmt.Sprintf("would close %s %s: %s -> %s %s", o.Platform, o.OutTradeNo, c.Applied.From, c.Applied.To, how)
	case reconcile.TallyMismatch:
		line = fmt.Sprintf("finding   %s %s: %s (local %s %s yuan, platform %s %s yuan)", o.Platform, o.OutTradeNo, c.Applied.Mismatch,
			o.Status, reconcile.FormatYuan(o.AmountMinor), c.Result.RawState, reconcile.FormatYuan(c.Result.AmountMinor))
	default:
		return
	}
	d.print(line)
}

func (d *DryRunPrinter) print(line string) {
	if line == "" {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintln(d.w, line)
}

// refundDryRunLine is the line for a refund check that would move the refund or found
// something ("" for one that would change nothing).
func refundDryRunLine(c reconcile.Check) string {
	rf, rr := c.Refund, c.RefundResult
	switch c.Tally() {
	case reconcile.TallyError:
		return fmt.Sprintf("error     %s refund %s of %s: %v", rf.Platform, rf.OutRefundNo, rf.OutTradeNo, c.Err)
	case reconcile.TallyRefundRepaired:
		return fmt.Sprintf("would move %s refund %s of %s: %s -> %s (%s yuan)", rf.Platform, rf.OutRefundNo, rf.OutTradeNo,
			c.Applied.RefundFrom, c.Applied.RefundTo, reconcile.FormatYuan(rf.AmountMinor))
	case reconcile.TallyMismatch:
		return fmt.Sprintf("finding   %s refund %s of %s: %s (local %s %s yuan, platform %s %s yuan)", rf.Platform, rf.OutRefundNo,
			rf.OutTradeNo, c.Applied.Mismatch, rf.Status, reconcile.FormatYuan(rf.AmountMinor), rr.RawState, reconcile.FormatYuan(rr.AmountMinor))
	}
	return ""
}
