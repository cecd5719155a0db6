package reconcile

import (
	"time"
)

// MaxReportPeriodDays bounds the period of one report: a year, leap day included. A report
// of a longer period (a typo such as 0001-01-01 to 9999-12-31) would read every finding
// there is in one request; finance asks for several reports instead.
const MaxReportPeriodDays = 366

// CheckReportPeriod accepts the report period [from, to) when from is before to and to is
// at most MaxReportPeriodDays calendar days after from (in from's zone, so a daylight-saving
// change never makes a year an hour too long). Anything else is an InputError.
func CheckReportPeriod(from, to time.Time) error {
	if !from.Before(to) {
		return Inputf("report: the period start %s is not before its end %s",
			from.Format(time.RFC3339), to.Format(time.RFC3339))
	}
	if to.After(from.AddDate(0, 0, MaxReportPeriodDays)) {
		return Inputf("report: the period %s to %s is longer than %d days, the most one report covers: ask for several shorter ones",
			from.Format(time.RFC3339), to.Format(time.RFC3339), MaxReportPeriodDays)
	}
	return nil
}
