package reconcile

import (
	"fmt"
	"strings"
	"time"
)

// The one period rule for people: a period given as dates is whole days in the configured
// zone, the first and the last both included. The console's forms and the command line's
// --to/--until read dates through these functions, so the same dates give the same period
// wherever they are typed (a one-day report is --from D --to D). An exact time (RFC 3339)
// stays an instant: it is a program's way of naming the end, and it is excluded.

// ParseDay reads a date as people type it, 2026-11-28, as the first instant of that day in
// loc; ok is false when s is not a plain date.
func ParseDay(s string, loc *time.Location) (day time.Time, ok bool) {
	d, err := time.ParseInLocation(time.DateOnly, strings.TrimSpace(s), loc)
	return d, err == nil
}

// EndOfDay is where a period whose last day, included, is day's ends: the first instant of
// the next day in loc (not day + 24h: a day with a daylight-saving change lasts 23 or 25
// hours).
func EndOfDay(day time.Time, loc *time.Location) time.Time {
	y, m, d := day.In(loc).Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, loc)
}

// DayPeriod reads a period given as its first and last days, both included, into the
// half-open [start, end) the stores take. An empty first or last leaves that end open (the
// zero time). A date that does not read, or a last day before the first, is a *DateError.
func DayPeriod(first, last string, loc *time.Location) (start, end time.Time, err error) {
	if first != "" {
		d, ok := ParseDay(first, loc)
		if !ok {
			return start, end, &DateError{Field: "from", Value: first}
		}
		start = d
	}
	if last != "" {
		d, ok := ParseDay(last, loc)
		if !ok {
			return start, end, &DateError{Field: "to", Value: last}
		}
		end = EndOfDay(d, loc)
	}
	if !start.IsZero() && !end.IsZero() && !start.Before(end) {
		return start, end, &DateError{Field: "to", Backwards: true}
	}
	return start, end, nil
}

// DateError is a period's date that does not read as one (Value is what was given), or a
// period whose last day comes before its first (Backwards). Field is "from" or "to". It is
// typed so that a page can say it in its reader's language.
type DateError struct {
	Field     string
	Value     string
	Backwards bool
}

func (e *DateError) Error() string {
	if e.Backwards {
		return fmt.Sprintf("%s: the period ends before it starts", e.Field)
	}
	return fmt.Sprintf("%s: want a date such as 2026-11-28, got %q", e.Field, e.Value)
}
