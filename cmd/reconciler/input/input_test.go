package input_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/payrecon/payrecon/cmd/reconciler/input"
	"github.com/payrecon/payrecon/reconcile"
)

// TestReportPeriod: the one period rule. Dates are whole days in the zone, both included
// (--from D --to D is day D; --to 2026-11-28 runs to the start of the 29th); an RFC 3339
// --to is an exact end, excluded; a day with a daylight-saving change lasts as long as it
// does. Absent ends default as the flags' help says.
func TestReportPeriod(t *testing.T) {
	t.Parallel()
	loc, _ := time.LoadLocation("Asia/Shanghai")
	ny, _ := time.LoadLocation("America/New_York")
	now := time.Date(2026, 11, 30, 15, 4, 5, 0, loc)
	day := func(d int) time.Time { return time.Date(2026, 11, d, 0, 0, 0, 0, loc) }
	at := func(d, h int) time.Time { return time.Date(2026, 11, d, h, 0, 0, 0, loc) }
	tests := []struct {
		name, from, to string
		loc            *time.Location
		start, end     time.Time
	}{
		{"both absent: the last 24 hours", "", "", loc, now.Add(-24 * time.Hour), now},
		{"from a date to now", "2026-11-28", "", loc, day(28), now},
		{"to a date alone: that day", "", "2026-11-28", loc, day(28), day(29)},
		{"to a time alone: 24 hours before it", "", "2026-11-28T12:00:00+08:00", loc, at(27, 12), at(28, 12)},
		{"from a date after now: that day", "2026-12-05", "", loc, day(5).AddDate(0, 1, 0), day(6).AddDate(0, 1, 0)},
		{"from a time after now: 24 hours", "2026-12-05T10:00:00+08:00", "", loc, at(5, 10).AddDate(0, 1, 0), at(6, 10).AddDate(0, 1, 0)},
		{"one day", "2026-11-28", "2026-11-28", loc, day(28), day(29)},
		{"two days, both included", "2026-11-28", "2026-11-29", loc, day(28), day(30)},
		{"a month", "2026-11-01", "2026-11-30", loc, day(1), day(1).AddDate(0, 1, 0)},
		{"to an RFC 3339 time: excluded", "2026-11-28", "2026-11-29T00:00:00+08:00", loc, day(28), day(29)},
		{"both RFC 3339", "2026-11-28T10:00:00+08:00", "2026-11-28T12:00:00+08:00", loc, at(28, 10), at(28, 12)},
		{"to a date and time: exact", "2026-11-28", "2026-11-28 18:00", loc, day(28), at(28, 18)},
		{"a day of 25 hours", "2026-11-01", "2026-11-01", ny, time.Date(2026, 11, 1, 0, 0, 0, 0, ny), time.Date(2026, 11, 2, 0, 0, 0, 0, ny)},
	}
	for _, tc := range tests {
		start, end, err := input.ReportPeriod(tc.from, tc.to, now, tc.loc)
		if err != nil || !start.Equal(tc.start) || !end.Equal(tc.end) {
			t.Errorf("%s: ReportPeriod(%q, %q) = %v, %v, %v; want %v, %v", tc.name, tc.from, tc.to, start, end, err, tc.start, tc.end)
		}
	}
	if start, end, _ := input.ReportPeriod("2026-11-01", "2026-11-01", now, ny); end.Sub(start) != 25*time.Hour {
		t.Errorf("New York's 1 November 2026 lasts %v, want 25h (the clocks go back)", end.Sub(start))
	}
	for _, bad := range [][2]string{{"2026-11-29", "2026-11-28"}, {"2026-11-28T12:00:00+08:00", "2026-11-28T12:00:00+08:00"},
		{"28/11/2026", ""}, {"", "tomorrow"}} {
		_, _, err := input.ReportPeriod(bad[0], bad[1], now, loc)
		var ie *reconcile.InputError
		if !errors.As(err, &ie) {
			t.Errorf("ReportPeriod(%q, %q): %v, want an InputError", bad[0], bad[1], err)
		}
	}
}

// TestReportPeriodIsTheDomainsDayPeriod: for dates, the command line's period is
// reconcile.DayPeriod's, the rule the console reads its forms with, so one pair of dates is
// one period wherever it is typed (cmd/reconciler's TestReportPeriodMatchesTheConsole
// asks the console itself).
func TestReportPeriodIsTheDomainsDayPeriod(t *testing.T) {
	t.Parallel()
	for _, zone := range []string{"Asia/Shanghai", "UTC", "America/New_York", "Europe/Berlin"} {
		loc, err := time.LoadLocation(zone)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range [][2]string{{"2026-11-28", "2026-11-28"}, {"2026-11-01", "2026-11-30"}, {"2026-03-29", "2026-03-29"},
			{"2026-10-25", "2026-11-02"}, {"2028-02-28", "2028-03-01"}} {
			cliStart, cliEnd, err := input.ReportPeriod(p[0], p[1], time.Now(), loc)
			start, end, derr := reconcile.DayPeriod(p[0], p[1], loc)
			if err != nil || derr != nil || !cliStart.Equal(start) || !cliEnd.Equal(end) {
				t.Errorf("%s %v: command line [%v, %v) (%v), domain [%v, %v) (%v)", zone, p, cliStart, cliEnd, err, start, end, derr)
			}
		}
	}
}

func TestListQueryFilter(t *testing.T) {
	t.Parallel()
	loc, _ := time.LoadLocation("Asia/Shanghai")
	ok := input.ListQuery{Limit: 50}
	tests := []struct {
		name    string
		q       input.ListQuery
		wantErr string // empty: the query reads
		check   func(reconcile.FindingFilter) bool
	}{
		{"no status: all but resolved", ok, "", func(f reconcile.FindingFilter) bool {
			return len(f.Statuses) == 3 && !slices.Contains(f.Statuses, reconcile.ReviewResolved)
		}},
		{"all: no status filter", with(ok, func(q *input.ListQuery) { q.Status = "ALL" }), "", func(f reconcile.FindingFilter) bool { return f.Statuses == nil }},
		{"two statuses", with(ok, func(q *input.ListQuery) { q.Status = "OPEN,RESOLVED" }), "", func(f reconcile.FindingFilter) bool {
			return slices.Equal(f.Statuses, []reconcile.ReviewStatus{reconcile.ReviewOpen, reconcile.ReviewResolved})
		}},
		{"platform any case", with(ok, func(q *input.ListQuery) { q.Platform = " WeChatPay " }), "", func(f reconcile.FindingFilter) bool { return f.Platform == reconcile.WechatPay }},
		{"date in loc", with(ok, func(q *input.ListQuery) { q.Since = "2026-11-28" }), "", func(f reconcile.FindingFilter) bool {
			return f.Since.Equal(time.Date(2026, 11, 28, 0, 0, 0, 0, loc))
		}},
		{"bad status", with(ok, func(q *input.ListQuery) { q.Status = "OPEN,DONE" }), "--status", nil},
		{"bad kind", with(ok, func(q *input.ListQuery) { q.Kind = "NOPE" }), "--kind", nil},
		{"bad platform", with(ok, func(q *input.ListQuery) { q.Platform = "paypal" }), "--platform", nil},
		{"bad date", with(ok, func(q *input.ListQuery) { q.Until = "28/11/2026" }), "--until", nil},
		{"until a date: its day included", with(ok, func(q *input.ListQuery) { q.Since, q.Until = "2026-11-28", "2026-11-28" }), "", func(f reconcile.FindingFilter) bool {
			return f.Since.Equal(time.Date(2026, 11, 28, 0, 0, 0, 0, loc)) && f.Until.Equal(time.Date(2026, 11, 29, 0, 0, 0, 0, loc))
		}},
		{"until an RFC 3339 time: exact", with(ok, func(q *input.ListQuery) { q.Until = "2026-11-28T12:00:00+08:00" }), "", func(f reconcile.FindingFilter) bool {
			return f.Until.Equal(time.Date(2026, 11, 28, 12, 0, 0, 0, loc))
		}},
		{"since not before until", with(ok, func(q *input.ListQuery) { q.Since, q.Until = "2026-11-29", "2026-11-28" }), "before --until", nil},
		{"limit zero", input.ListQuery{}, "--limit", nil},
		{"limit too big", input.ListQuery{Limit: 10001}, "--limit", nil},
		{"negative after-id", input.ListQuery{Limit: 1, AfterID: -1}, "--after-id", nil},
	}
	for _, tc := range tests {
		f, err := tc.q.Filter(loc)
		var ie *reconcile.InputError
		switch {
		case tc.wantErr != "" && (!errors.As(err, &ie) || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: error %v, want an InputError naming %s", tc.name, err, tc.wantErr)
		case tc.wantErr == "" && (err != nil || !tc.check(f)):
			t.Errorf("%s: filter %+v, error %v", tc.name, f, err)
		}
	}
}

func with(q input.ListQuery, edit func(*input.ListQuery)) input.ListQuery {
	edit(&q)
	return q
}
