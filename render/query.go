package render

import (
	"encoding/csv"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

// ParseWhen reads a --since/--until/--from/--to value: a date (midnight in loc) or an
// RFC 3339 time; a date and time without an offset is read in loc too.
func ParseWhen(flagName, v string, loc *time.Location) (time.Time, error) {
	v = strings.TrimSpace(v)
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	for _, layout := range []string{time.DateOnly, "2006-01-02T15:04:05", time.DateTime, "2006-01-02 15:04"} {
		if t, err := time.ParseInLocation(layout, v, loc); err == nil {
			return t, nil
		}
	}
	return time.Time{}, reconcile.Inputf("--%s: want a date such as 2026-11-28 (midnight in %s) or an RFC 3339 time such as 2026-11-28T10:00:00+08:00, got %q",
		flagName, loc, v)
}

// ListQuery is `mismatches list`'s filter as typed: the flags' text before it is read.
type ListQuery struct {
	Status, Kind, Platform, Since, Until string
	Limit                                int
	AfterID                              int64
}

// Filter reads the query into a reconcile.FindingFilter, dates in loc. No status lists what still
// needs a person (all but RESOLVED); a value that does not read is a reconcile.InputError.
func (q ListQuery) Filter(loc *time.Location) (reconcile.FindingFilter, error) {
	f := reconcile.FindingFilter{Limit: q.Limit, AfterID: q.AfterID}
	var err error
	if f.Statuses, err = q.statuses(); err != nil {
		return f, err
	}
	if q.Kind != "" {
		if f.Kind, err = reconcile.ParseMismatchKind(q.Kind); err != nil {
			return f, reconcile.Inputf("mismatches list: --kind: %v", err)
		}
	}
	if q.Platform != "" {
		if f.Platform, err = reconcile.ParsePlatform(strings.ToLower(strings.TrimSpace(q.Platform))); err != nil {
			return f, reconcile.Inputf("mismatches list: --platform: %v", err)
		}
	}
	if q.Since != "" {
		if f.Since, err = ParseWhen("since", q.Since, loc); err != nil {
			return f, err
		}
	}
	if q.Until != "" {
		if f.Until, err = ParseWhen("until", q.Until, loc); err != nil {
			return f, err
		}
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return f, reconcile.Inputf("mismatches list: --since (%s) must be before --until (%s)", q.Since, q.Until)
	}
	if q.Limit < 1 || q.Limit > 10000 {
		return f, reconcile.Inputf("mismatches list: --limit must be from 1 to 10000, got %d", q.Limit)
	}
	if q.AfterID < 0 {
		return f, reconcile.Inputf("mismatches list: --after-id must not be negative, got %d", q.AfterID)
	}
	return f, nil
}

func (q ListQuery) statuses() ([]reconcile.ReviewStatus, error) {
	switch st := strings.TrimSpace(q.Status); {
	case st == "":
		return []reconcile.ReviewStatus{reconcile.ReviewOpen, reconcile.ReviewAcknowledged, reconcile.ReviewPendingApproval}, nil
	case strings.EqualFold(st, "all"):
		return nil, nil
	default:
		var out []reconcile.ReviewStatus
		for _, s := range strings.Split(st, ",") {
			rs, err := reconcile.ParseReviewStatus(s)
			if err != nil {
				return nil, reconcile.Inputf("mismatches list: --status must be OPEN, ACKNOWLEDGED, PENDING_APPROVAL, RESOLVED (comma-separated) or all, got %q", q.Status)
			}
			out = append(out, rs)
		}
		return out, nil
	}
}

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

// ReportPeriod reads report --from/--to: both default to the 24 hours before now; one
// given, the other is 24h away from it (--from alone runs to now when now is later).
func ReportPeriod(from, to string, now time.Time, loc *time.Location) (time.Time, time.Time, error) {
	var start, end time.Time
	var err error
	if to != "" {
		if end, err = ParseWhen("to", to, loc); err != nil {
			return start, end, err
		}
	}
	if from != "" {
		if start, err = ParseWhen("from", from, loc); err != nil {
			return start, end, err
		}
	}
	switch {
	case from == "" && to == "":
		end = now
		start = now.Add(-24 * time.Hour)
	case from == "":
		start = end.Add(-24 * time.Hour)
	case to == "":
		end = now
		if !start.Before(end) {
			end = start.Add(24 * time.Hour)
		}
	}
	if !start.Before(end) {
		return start, end, reconcile.Inputf("report: --from (%s) must be before --to (%s)", start.Format(time.RFC3339), end.Format(time.RFC3339))
	}
	return start, end, nil
}

// ReportFormatFromExt is the report format a file name asks for: csv unless its extension
// names another of ReportFormats.
func ReportFormatFromExt(path string) string {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		return "json"
	case ".xlsx":
		return "xlsx"
	case ".html", ".htm":
		return "html"
	}
	return "csv"
}
