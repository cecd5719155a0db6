package reconcile

import (
	"testing"
	"time"
)

// Quick checks keep the short batch wait (a latency-bound pass loses no throughput); long
// ones, as under a call budget, wait a sixteenth of a check for a fuller batch, never more
// than maxBatchWait.
func TestBatchWindow(t *testing.T) {
	for _, tc := range []struct {
		check, want time.Duration
	}{
		{0, batchWait},
		{20 * time.Millisecond, batchWait},
		{160 * time.Millisecond, batchWait},
		{640 * time.Millisecond, 40 * time.Millisecond},
		{2 * time.Second, maxBatchWait},
	} {
		if got := batchWindow(tc.check); got != tc.want {
			t.Errorf("batchWindow(%s) = %s, want %s", tc.check, got, tc.want)
		}
	}
}

func TestCheckClockAverages(t *testing.T) {
	var c checkClock
	if c.get() != 0 {
		t.Fatalf("empty clock reads %s", c.get())
	}
	c.observe(800 * time.Millisecond)
	if c.get() != 800*time.Millisecond {
		t.Fatalf("first observation: %s, want 800ms", c.get())
	}
	for range 100 {
		c.observe(100 * time.Millisecond)
	}
	if got := c.get(); got < 100*time.Millisecond || got > 101*time.Millisecond {
		t.Fatalf("after 100 checks of 100ms the average is %s", got)
	}
}
