package worker

import (
	"testing"
	"time"
)

// TestScheduleZones: with a controlled clock, a spec fires at the wall-clock times of
// TIMEZONE, or of its own CRON_TZ= prefix, whatever the process's local zone is.
func TestScheduleZones(t *testing.T) {
	shanghai, _ := time.LoadLocation("Asia/Shanghai")
	paris, _ := time.LoadLocation("Europe/Paris")
	now := time.Date(2026, 12, 1, 0, 30, 0, 0, time.UTC) // 08:30 in Shanghai, 01:30 in Paris
	cases := []struct {
		name string
		spec string
		zone *time.Location // TIMEZONE
		want time.Time
	}{
		{"CRON_TZ prefix wins over TIMEZONE", "CRON_TZ=Asia/Shanghai 0 9 * * *", paris, time.Date(2026, 12, 1, 9, 0, 0, 0, shanghai)},
		{"TZ prefix", "TZ=Asia/Shanghai 0 9 * * *", time.UTC, time.Date(2026, 12, 1, 9, 0, 0, 0, shanghai)},
		{"no prefix: TIMEZONE", "0 9 * * *", shanghai, time.Date(2026, 12, 1, 9, 0, 0, 0, shanghai)},
		{"no prefix, another TIMEZONE", "0 9 * * *", paris, time.Date(2026, 12, 1, 9, 0, 0, 0, paris)},
		{"descriptor", "@daily", shanghai, time.Date(2026, 12, 2, 0, 0, 0, 0, shanghai)},
		{"interval", "@every 5m", shanghai, now.Add(5 * time.Minute)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, err := ParseSchedule(tc.spec, tc.zone)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.Next(now); !got.Equal(tc.want) {
				t.Fatalf("next after %s: %s, want %s", now, got, tc.want.UTC())
			}
		})
	}
}
