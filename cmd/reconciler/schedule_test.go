package main

import (
	"io"
	"testing"
	"time"
)

func TestScheduleThatDoesNotParseIsAUsageError(t *testing.T) {
	for _, spec := range []string{"TZ=UTC", "CRON_TZ=Asia/Shanghai", "nonsense", "CRON_TZ=Nowhere/Else 0 9 * * *", "61 * * * *", "", "TZ="} {
		t.Run(spec, func(t *testing.T) {
			_, err := parseSchedule(spec, time.UTC)
			if err == nil {
				t.Fatal("accepted")
			}
			if exitCode(err, io.Discard) != 2 {
				t.Fatalf("not a usage error: %v", err)
			}
		})
	}
}
