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

// ParseWhen reads a --since/--from value: a date (its first instant, midnight in loc) or an
// RFC 3339 time; a date and time without an offset is read in loc too.
func ParseWhen(flagName, v string, loc *time.Location) (time.Time, error) {
	v = strings.TrimSpace(v)
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	if day, ok := reconcile.ParseDay(v, loc); ok {
		return day, nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05", time.DateTime, "2006-01-02 15:04"} {
		if t, err := time.ParseInLocation(layout, v, loc); err == nil {
			return t, nil
		}
	}
	return time.Time{}, reconcile.Inputf("--%s: want a date such as 2026-11-28 (midnight in %s) or an RFC 3339 time such as 2026-11-28T10:00:00+08:00, got %q",
		flagName, loc, v)
}

// ParseUntil reads the end of a period people give (report --to, mismatches list --until)
// by the one period rule: a date is the last day, included, so the period ends where the
// next day starts in loc (reconcile.EndOfDay, as the console reads its "to" date); a time
// (RFC 3339, or a date and time) is the exact end, excluded.
func ParseUntil(flagName, v string, loc *time.Location) (time.Time, error) {
	if day, ok := reconcile.ParseDay(v, loc); ok {
		return reconcile.EndOfDay(day, loc), nil
	}
	t, err := ParseWhen(flagName, v, loc)
	if err != nil {
		return t, reconcile.Inputf("--%s: want a date such as 2026-11-28 (the whole day in %s, included) or an RFC 3339 time such as 2026-11-29T00:00:00+08:00 (excluded), got %q",
			flagName, loc, strings.TrimSpace(v))
	}
	return t, nil
}

// ReportPeriod reads report --from/--to into the half-open [start, end) by the one period
// rule: dates are whole days in loc, both included (--from 2026-11-28 --to 2026-11-28 is
// that day); an RFC 3339 --to is an exact end, excluded. Both absent: the 24 hours before
// now. One given: a date --to alone is that day; a time --to alone ends 24 hours after it
// starts; --from alone runs to now, or, when now is not later, for one day (a date) or 24
// hours (a time).
func ReportPeriod(from, to string, now time.Time, loc *time.Location) (time.Time, time.Time, error) {
	var start, end time.Time
	var err error
	if to != "" {
		if end, err = ParseUntil("to", to, loc); err != nil {
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
		start, end = now.Add(-24*time.Hour), now
	case from == "":
		start = end.Add(-24 * time.Hour)
		if day, ok := reconcile.ParseDay(to, loc); ok {
			start = day
		}
	case to == "":
		end = now
		if !start.Before(end) {
			end = periodAfter(from, start, loc)
		}
	}
	if !start.Before(end) {
		return start, end, reconcile.Inputf("report: --from (%s) must be before --to (the period ends at %s)", start.Format(time.RFC3339), end.Format(time.RFC3339))
	}
	return start, end, nil
}

// periodAfter is the end of a one-day period from start: the day's end for a date from,
// 24 hours on for a time.
func periodAfter(from string, start time.Time, loc *time.Location) time.Time {
	if _, ok := reconcile.ParseDay(from, loc); ok {
		return reconcile.EndOfDay(start, loc)
	}
	return start.Add(24 * time.Hour)
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
