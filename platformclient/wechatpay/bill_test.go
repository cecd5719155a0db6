package wechatpay

import (
	"testing"
	"time"

	"github.com/payrecon/payrecon/platformclient"
)

// TestAbsence: what an answer without a bill means, decided by the clock. NO_STATEMENT_EXIST
// is "not ready" until 10:00 China time the next day and "no trades that day" from then on;
// STATEMENT_CREATING is "not ready" at any time.
func TestAbsence(t *testing.T) {
	day := time.Date(2026, 12, 1, 0, 0, 0, 0, platformclient.ChinaTime)
	next := func(h, m int) time.Time {
		return day.AddDate(0, 0, 1).Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute)
	}
	for _, c := range []struct {
		name string
		code string
		day  time.Time
		now  time.Time
		want billAbsence
	}{
		{"no statement, the day itself", codeNoStatement, day, day.Add(23 * time.Hour), absenceNotReady},
		{"no statement, 09:59 the next day", codeNoStatement, day, next(9, 59), absenceNotReady},
		{"no statement, 10:00 the next day", codeNoStatement, day, next(10, 0), absenceNoTrades},
		{"no statement, 10:01 the next day", codeNoStatement, day, next(10, 1), absenceNoTrades},
		{"no statement, two days later", codeNoStatement, day, day.AddDate(0, 0, 2).Add(8 * time.Hour), absenceNoTrades},
		{"no statement, 10:01 asked in UTC", codeNoStatement, day, next(10, 1).UTC(), absenceNoTrades},
		{"no statement, 09:59 asked in UTC", codeNoStatement, day, next(9, 59).UTC(), absenceNotReady},
		{"no statement, the day given at noon", codeNoStatement, day.Add(12 * time.Hour), next(10, 1), absenceNoTrades},
		{"no statement, the day given in UTC (its China date counts)", codeNoStatement, day.Add(time.Hour).UTC(), next(9, 59), absenceNotReady},
		{"being made, 09:59 the next day", codeCreating, day, next(9, 59), absenceNotReady},
		{"being made, 10:01 the next day", codeCreating, day, next(10, 1), absenceNotReady},
		{"being made, two days later", codeCreating, day, day.AddDate(0, 0, 2).Add(15 * time.Hour), absenceNotReady},
		{"the older code, two days later", codeBillMissing, day, day.AddDate(0, 0, 2), absenceNotReady},
		{"any other error", "PARAM_ERROR", day, next(10, 1), absenceNone},
		{"no code", "", day, next(10, 1), absenceNone},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := absence(c.code, c.day, c.now); got != c.want {
				t.Fatalf("absence(%s, %s, %s) = %d, want %d", c.code, c.day, c.now, got, c.want)
			}
		})
	}
}
