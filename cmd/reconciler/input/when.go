// Package input reads what people type at the command line (dates and periods, list filters,
// review moves) into the domain's values; a value that cannot be used is a
// reconcile.InputError naming the flag, which the binary maps to exit 2.
package input

import (
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
