package reconcile_test

import (
	"errors"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

// TestDayPeriod: dates are whole days in the zone, both included; a day with a clock change
// lasts as long as it does; an empty end stays open; a date that does not read or a period
// that ends before it starts is a DateError naming the field.
func TestDayPeriod(t *testing.T) {
	t.Parallel()
	sh, _ := time.LoadLocation("Asia/Shanghai")
	berlin, _ := time.LoadLocation("Europe/Berlin")
	midnight := func(y int, m time.Month, d int, loc *time.Location) time.Time {
		return time.Date(y, m, d, 0, 0, 0, 0, loc)
	}
	for _, c := range []struct {
		first, last string
		loc         *time.Location
		start, end  time.Time
		hours       float64 // 0: not checked
	}{
		{"2026-11-28", "2026-11-28", sh, midnight(2026, 11, 28, sh), midnight(2026, 11, 29, sh), 24},
		{"2026-11-01", "2026-11-30", sh, midnight(2026, 11, 1, sh), midnight(2026, 12, 1, sh), 0},
		{"2026-12-31", "2026-12-31", sh, midnight(2026, 12, 31, sh), midnight(2027, 1, 1, sh), 24},
		{"2026-03-29", "2026-03-29", berlin, midnight(2026, 3, 29, berlin), midnight(2026, 3, 30, berlin), 23},   // clocks go forward
		{"2026-10-25", "2026-10-25", berlin, midnight(2026, 10, 25, berlin), midnight(2026, 10, 26, berlin), 25}, // and back
		{"", "2026-11-28", sh, time.Time{}, midnight(2026, 11, 29, sh), 0},
		{"2026-11-28", "", sh, midnight(2026, 11, 28, sh), time.Time{}, 0},
		{" 2026-11-28 ", "2026-11-28", sh, midnight(2026, 11, 28, sh), midnight(2026, 11, 29, sh), 0},
	} {
		start, end, err := reconcile.DayPeriod(c.first, c.last, c.loc)
		if err != nil || !start.Equal(c.start) || !end.Equal(c.end) {
			t.Errorf("DayPeriod(%q, %q, %s) = [%v, %v) %v; want [%v, %v)", c.first, c.last, c.loc, start, end, err, c.start, c.end)
		}
		if c.hours != 0 && end.Sub(start).Hours() != c.hours {
			t.Errorf("DayPeriod(%q, %q, %s) lasts %v, want %vh", c.first, c.last, c.loc, end.Sub(start), c.hours)
		}
	}
	for _, c := range []struct {
		first, last string
		want        reconcile.DateError
	}{
		{"28/11/2026", "", reconcile.DateError{Field: "from", Value: "28/11/2026"}},
		{"", "2026-11-28T10:00:00+08:00", reconcile.DateError{Field: "to", Value: "2026-11-28T10:00:00+08:00"}},
		{"2026-11-29", "2026-11-28", reconcile.DateError{Field: "to", Backwards: true}},
	} {
		_, _, err := reconcile.DayPeriod(c.first, c.last, sh)
		var de *reconcile.DateError
		if !errors.As(err, &de) || *de != c.want {
			t.Errorf("DayPeriod(%q, %q): %v, want %+v", c.first, c.last, err, c.want)
		}
	}
}

// TestCheckReportPeriodSaysWhy: the refusals are input errors (exit 2 at the command line)
// that also say which mistake they are, for a page that words them itself.
func TestCheckReportPeriodSaysWhy(t *testing.T) {
	t.Parallel()
	day := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		to   time.Time
		want error
	}{{day, reconcile.ErrReportPeriodEmpty}, {day.AddDate(0, 0, 367), reconcile.ErrReportPeriodTooLong}} {
		err := reconcile.CheckReportPeriod(day, c.to)
		var input *reconcile.InputError
		if !errors.As(err, &input) || !errors.Is(err, c.want) {
			t.Errorf("[%v, %v): %v, want an input error that is %v", day, c.to, err, c.want)
		}
	}
}
