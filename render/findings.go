package render

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/payrecon/payrecon/reconcile"
)

// FindingView is a finding as JSON: the stored columns, times in the configured zone, and
// the amounts also as exact yuan strings.
type FindingView struct {
	reconcile.Finding
	LocalAmount    string `json:"local_amount"`
	PlatformAmount string `json:"platform_amount"`
	AtStakeMinor   int64  `json:"at_stake_minor"`
	AtStake        string `json:"at_stake"`
}

// NewFindingView is a finding as `mismatches list --format json` prints it: times in loc,
// amounts also in yuan.
func NewFindingView(f reconcile.Finding, loc *time.Location) FindingView {
	f.FirstSeenAt = f.FirstSeenAt.In(loc)
	f.LastSeenAt = f.LastSeenAt.In(loc)
	f.ResolvedAt = timeInLoc(f.ResolvedAt, loc)
	return FindingView{Finding: f, LocalAmount: reconcile.FormatYuanOr(f.LocalAmountMinor, ""),
		PlatformAmount: reconcile.FormatYuanOr(f.PlatformAmountMinor, ""), AtStakeMinor: f.AtStakeMinor(), AtStake: reconcile.FormatYuan(f.AtStakeMinor())}
}

func timeInLoc(t *time.Time, loc *time.Location) *time.Time {
	if t == nil {
		return nil
	}
	v := t.In(loc)
	return &v
}

// WriteJSON writes v as indented JSON, one document per call.
func WriteJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// FindingCSVHeader names the columns of FindingCSVRecord.
var FindingCSVHeader = []string{"id", "kind", "platform", "merchant_id", "out_trade_no", "platform_trade_no",
	"local_amount", "platform_amount", "at_stake", "local_status", "platform_status", "seen_count",
	"first_seen_at", "last_seen_at", "review_status", "resolution", "resolved_by", "resolved_at", "note", "order_id",
	// Last, so that the columns of files written before refunds keep their places.
	"out_refund_no",
	// Maker and checker of a money-moving resolution (resolved_by is the maker's name for
	// what was approved, kept for the files written before these columns).
	"proposed_by", "approved_by"}

// FindingCSVRecord is one finding as a CSV row, times in loc and text guarded against
// spreadsheet formulas.
func FindingCSVRecord(f reconcile.Finding, loc *time.Location) []string {
	order := ""
	if f.OrderID != nil {
		order = strconv.FormatInt(*f.OrderID, 10)
	}
	return []string{strconv.FormatInt(f.ID, 10), string(f.Kind), string(f.Platform), csvText(f.MerchantID),
		csvText(f.OutTradeNo), csvText(f.PlatformTradeNo), reconcile.FormatYuanOr(f.LocalAmountMinor, ""),
		reconcile.FormatYuanOr(f.PlatformAmountMinor, ""), reconcile.FormatYuan(f.AtStakeMinor()), csvText(f.LocalStatus),
		csvText(f.PlatformStatus), strconv.FormatInt(f.SeenCount, 10), rfc3339In(f.FirstSeenAt, loc),
		rfc3339In(f.LastSeenAt, loc), string(f.ReviewStatus), csvText(f.Resolution), csvText(f.ResolvedBy),
		rfc3339InPtr(f.ResolvedAt, loc), csvText(f.Note), order, csvText(f.OutRefundNo), csvText(f.ProposedBy), csvText(f.ApprovedBy)}
}

// csvText defuses spreadsheet formula injection: finding text comes from platforms and
// reviewers, and finance opens these files in a spreadsheet. A cell that a spreadsheet would
// read as a formula gets a leading apostrophe (the OWASP advice).
func csvText(s string) string {
	if s != "" && strings.ContainsRune("=+-@\t\r", rune(s[0])) {
		return "'" + s
	}
	return s
}

func rfc3339In(t time.Time, loc *time.Location) string { return t.In(loc).Format(time.RFC3339) }

func rfc3339InPtr(t *time.Time, loc *time.Location) string {
	if t == nil {
		return ""
	}
	return rfc3339In(*t, loc)
}

// reviewTime is a time for people: in the configured zone, to the second, with its offset
// (+08:00): a zone abbreviation such as CST names three different zones.
func reviewTime(t time.Time, loc *time.Location) string {
	return t.In(loc).Format("2006-01-02 15:04:05 -07:00")
}

func reviewTimePtr(t *time.Time, loc *time.Location) string {
	if t == nil {
		return "-"
	}
	return reviewTime(*t, loc)
}

// TermCell makes text safe for a terminal table: control characters (a tab would break the
// columns, an escape sequence would drive the terminal) are shown escaped; empty is "-".
func TermCell(s string) string {
	if s == "" {
		return "-"
	}
	if strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) < 0 {
		return s
	}
	q := strconv.QuoteToGraphic(s)
	return q[1 : len(q)-1]
}

// WriteFindingTable prints findings as an aligned terminal table.
func WriteFindingTable(w io.Writer, findings []reconcile.Finding, loc *time.Location) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tKIND\tPLATFORM\tMERCHANT\tOUT_TRADE_NO\tREFUND_NO\tPLATFORM_TRADE_NO\tLOCAL_AMOUNT\tPLATFORM_AMOUNT\tLOCAL_STATUS\tPLATFORM_STATUS\tSEEN\tFIRST_SEEN\tLAST_SEEN\tREVIEW\tVERSION")
	for _, f := range findings {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%d\n", f.ID, f.Kind, f.Platform,
			TermCell(f.MerchantID), TermCell(f.OutTradeNo), TermCell(f.OutRefundNo), TermCell(f.PlatformTradeNo), reconcile.FormatYuanOr(f.LocalAmountMinor, "-"),
			reconcile.FormatYuanOr(f.PlatformAmountMinor, "-"), TermCell(f.LocalStatus), TermCell(f.PlatformStatus), f.SeenCount,
			reviewTime(f.FirstSeenAt, loc), reviewTime(f.LastSeenAt, loc), f.ReviewStatus, f.EvidenceVersion)
	}
	return tw.Flush()
}

// ---- show ----

// DetailsJSON is `mismatches show --format json`.
type DetailsJSON struct {
	Finding FindingView              `json:"finding"`
	Audit   []reconcile.AuditEntry   `json:"audit"`
	Order   *reconcile.OrderState    `json:"order"`
	Events  []reconcile.PaymentEvent `json:"events"`
	Refunds []reconcile.RefundRecord `json:"refunds"`
}

// DetailsView is d as DetailsJSON, times in loc.
func DetailsView(d reconcile.FindingDetails, loc *time.Location) DetailsJSON {
	out := DetailsJSON{Finding: NewFindingView(d.Finding, loc), Audit: d.Audit, Order: d.Order, Events: d.Events, Refunds: d.Refunds}
	for i := range out.Audit {
		out.Audit[i].CreatedAt = out.Audit[i].CreatedAt.In(loc)
	}
	for i := range out.Events {
		out.Events[i].CreatedAt = out.Events[i].CreatedAt.In(loc)
	}
	for i := range out.Refunds {
		r := &out.Refunds[i]
		r.CreatedAt, r.UpdatedAt, r.SucceededAt = r.CreatedAt.In(loc), r.UpdatedAt.In(loc), timeInLoc(r.SucceededAt, loc)
	}
	if o := out.Order; o != nil {
		o.CreatedAt, o.UpdatedAt = o.CreatedAt.In(loc), o.UpdatedAt.In(loc)
		o.PaidAt, o.ExpiresAt = timeInLoc(o.PaidAt, loc), timeInLoc(o.ExpiresAt, loc)
		o.NextCheckAt, o.LastCheckedAt = timeInLoc(o.NextCheckAt, loc), timeInLoc(o.LastCheckedAt, loc)
	}
	return out
}

// WriteDetails prints everything known about one finding for a terminal: its fields, the
// platform detail, the audit trail, and the order with its payment events and refunds.
func WriteDetails(w io.Writer, d reconcile.FindingDetails, loc *time.Location) error {
	if err := writeFindingFields(w, d.Finding, loc); err != nil {
		return err
	}
	if err := writeDetailAndAudit(w, d, loc); err != nil {
		return err
	}
	if d.Order == nil {
		fmt.Fprintln(w, "\nOrder: none (the finding names no local order)")
		return nil
	}
	if err := writeOrderState(w, d.Order, loc); err != nil {
		return err
	}
	if err := writeEvents(w, d.Events, loc); err != nil {
		return err
	}
	return writeRefunds(w, d.Refunds, loc)
}

func writeFindingFields(w io.Writer, f reconcile.Finding, loc *time.Location) error {
	fmt.Fprintf(w, "Finding %d: %s, %s\n\n", f.ID, f.Kind, f.ReviewStatus)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	order := "-"
	if f.OrderID != nil {
		order = strconv.FormatInt(*f.OrderID, 10)
	}
	for _, kv := range [][2]string{
		{"platform", string(f.Platform)},
		{"merchant", TermCell(f.MerchantID)},
		{"out_trade_no", TermCell(f.OutTradeNo)},
		{"refund no", TermCell(f.OutRefundNo)},
		{"platform trade no", TermCell(f.PlatformTradeNo)},
		{"order", order},
		{"local amount", reconcile.FormatYuanOr(f.LocalAmountMinor, "-")},
		{"platform amount", reconcile.FormatYuanOr(f.PlatformAmountMinor, "-")},
		{"at stake", reconcile.FormatYuan(f.AtStakeMinor())},
		{"local status", TermCell(f.LocalStatus)},
		{"platform status", TermCell(f.PlatformStatus)},
		{"seen", fmt.Sprintf("%d time(s)", f.SeenCount)},
		{"first seen", reviewTime(f.FirstSeenAt, loc)},
		{"last seen", reviewTime(f.LastSeenAt, loc)},
		{"review status", string(f.ReviewStatus)},
		{"resolution", TermCell(f.Resolution)},
		{"note", TermCell(f.Note)},
		{"resolved by", TermCell(f.ResolvedBy)},
		{"resolved at", reviewTimePtr(f.ResolvedAt, loc)},
		{"proposed by", TermCell(f.ProposedBy)},
		{"approved by", TermCell(f.ApprovedBy)},
		{"evidence version", strconv.FormatInt(f.EvidenceVersion, 10)},
	} {
		fmt.Fprintf(tw, "  %s\t%s\n", kv[0], kv[1])
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return nil
}

func writeDetailAndAudit(w io.Writer, d reconcile.FindingDetails, loc *time.Location) error {
	f := d.Finding
	fmt.Fprintln(w, "\nDetail:")
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, f.Detail, "  ", "  "); err != nil || len(f.Detail) == 0 {
		pretty.Reset()
		pretty.WriteString(TermCell(string(f.Detail)))
	}
	fmt.Fprintf(w, "  %s\n", pretty.String())

	fmt.Fprintln(w, "\nAudit trail:")
	if len(d.Audit) == 0 {
		fmt.Fprintln(w, "  (no review actions yet)")
	} else {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "  WHEN\tACTION\tACTOR\tFROM\tTO\tNOTE\tRESOLUTION\tVERSION\tOS_USER\tDB_USER")
		for _, a := range d.Audit {
			version := "-"
			if a.EvidenceVersion != nil {
				version = strconv.FormatInt(*a.EvidenceVersion, 10)
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", reviewTime(a.CreatedAt, loc), TermCell(a.Action), TermCell(a.Actor),
				TermCell(a.FromStatus), TermCell(a.ToStatus), TermCell(a.Note), TermCell(a.Resolution), version, TermCell(a.OSUser), TermCell(a.DBUser))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	return nil
}

func writeOrderState(w io.Writer, o *reconcile.OrderState, loc *time.Location) error {
	fmt.Fprintf(w, "\nOrder %d (current state):\n", o.ID)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	checks := fmt.Sprintf("%d consecutive, last %s, next %s", o.CheckCount, reviewTimePtr(o.LastCheckedAt, loc), reviewTimePtr(o.NextCheckAt, loc))
	for _, kv := range [][2]string{
		{"status", o.Status},
		{"platform", o.Platform},
		{"merchant", TermCell(o.MerchantID)},
		{"out_trade_no", TermCell(o.OutTradeNo)},
		{"amount", reconcile.FormatYuan(o.AmountMinor) + " " + o.Currency},
		{"platform trade no", TermCell(o.PlatformTradeNo)},
		{"paid amount", reconcile.FormatYuanOr(o.PaidAmountMinor, "-")},
		{"refunded", reconcile.FormatYuan(o.RefundedMinor)},
		{"paid at", reviewTimePtr(o.PaidAt, loc)},
		{"expires at", reviewTimePtr(o.ExpiresAt, loc)},
		{"created at", reviewTime(o.CreatedAt, loc)},
		{"updated at", reviewTime(o.UpdatedAt, loc)},
		{"version", strconv.FormatInt(o.Version, 10)},
		{"checks", checks},
	} {
		fmt.Fprintf(tw, "  %s\t%s\n", kv[0], kv[1])
	}
	return tw.Flush()
}

// writeEvents prints the order's payment events; a refund's event names its refund.
func writeEvents(w io.Writer, events []reconcile.PaymentEvent, loc *time.Location) error {
	fmt.Fprintln(w, "\nPayment events:")
	if len(events) == 0 {
		fmt.Fprintln(w, "  (none)")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	// The refund column comes last: scripts that cut the first columns keep working.
	fmt.Fprintln(tw, "  WHEN\tEVENT\tSOURCE\tPLATFORM_TRADE_NO\tAMOUNT\tRAW_DIGEST\tREFUND_NO")
	for _, e := range events {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\n", reviewTime(e.CreatedAt, loc), e.EventType, e.Source,
			TermCell(e.PlatformTradeNo), reconcile.FormatYuanOr(e.AmountMinor, "-"), TermCell(e.RawDigest), TermCell(e.OutRefundNo))
	}
	return tw.Flush()
}

// writeRefunds prints the order's refunds, oldest first.
func writeRefunds(w io.Writer, refunds []reconcile.RefundRecord, loc *time.Location) error {
	fmt.Fprintln(w, "\nRefunds:")
	if len(refunds) == 0 {
		fmt.Fprintln(w, "  (none)")
		return nil
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  REFUND_NO\tPLATFORM_REFUND_NO\tAMOUNT\tSTATUS\tSUCCEEDED\tCREATED")
	for _, r := range refunds {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", TermCell(r.OutRefundNo), TermCell(r.PlatformRefundNo),
			reconcile.FormatYuan(r.AmountMinor)+" "+r.Currency, r.Status, reviewTimePtr(r.SucceededAt, loc), reviewTime(r.CreatedAt, loc))
	}
	return tw.Flush()
}

// ---- ack and resolve ----

// FindingFormats are the formats WriteFindings writes.
var FindingFormats = []string{"table", "json", "csv"}

// WriteFindings writes findings as `mismatches list` prints them: a terminal table, JSON
// views or CSV rows, times in loc.
func WriteFindings(w io.Writer, format string, findings []reconcile.Finding, loc *time.Location) error {
	switch format {
	case "json":
		views := make([]FindingView, len(findings))
		for i, f := range findings {
			views[i] = NewFindingView(f, loc)
		}
		return WriteJSON(w, views)
	case "csv":
		cw := csv.NewWriter(w)
		cw.Write(FindingCSVHeader) //nolint:errcheck // the writer keeps its first error for Flush
		for _, f := range findings {
			cw.Write(FindingCSVRecord(f, loc)) //nolint:errcheck
		}
		cw.Flush()
		return cw.Error()
	case "table":
		return WriteFindingTable(w, findings, loc)
	}
	return fmt.Errorf("findings: unknown format %q", format)
}
