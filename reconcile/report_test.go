package reconcile_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

// TestCheckReportPeriod: up to MaxReportPeriodDays calendar days in from's zone, a daylight-
// saving year included; anything longer, empty or reversed is an InputError naming why.
func TestCheckReportPeriod(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	day := func(y int, m time.Month, d int, loc *time.Location) time.Time {
		return time.Date(y, m, d, 0, 0, 0, 0, loc)
	}
	for _, c := range []struct {
		from, to time.Time
		want     string // "" accepted
	}{
		{day(2024, 1, 1, time.UTC), day(2025, 1, 1, time.UTC), ""},         // a leap year: 366 days
		{day(2025, 1, 1, time.UTC), day(2026, 1, 2, time.UTC), ""},         // 366 days
		{day(2025, 3, 1, berlin), day(2026, 3, 2, berlin), ""},             // 366 days across both clock changes
		{day(2025, 1, 1, time.UTC), day(2026, 1, 3, time.UTC), "366 days"}, // 367
		{day(2025, 1, 1, time.UTC), day(2026, 1, 2, time.UTC).Add(time.Second), "366 days"},
		{day(1, 1, 1, time.UTC), day(9999, 12, 31, time.UTC), "366 days"},
		{day(2025, 1, 1, time.UTC), day(2025, 1, 1, time.UTC), "not before"},
		{day(2025, 1, 2, time.UTC), day(2025, 1, 1, time.UTC), "not before"},
	} {
		err := reconcile.CheckReportPeriod(c.from, c.to)
		var input *reconcile.InputError
		switch {
		case c.want == "" && err != nil:
			t.Errorf("[%v, %v): %v, want accepted", c.from, c.to, err)
		case c.want != "" && (!errors.As(err, &input) || !strings.Contains(err.Error(), c.want)):
			t.Errorf("[%v, %v): %v, want an input error saying %q", c.from, c.to, err, c.want)
		}
	}
}
