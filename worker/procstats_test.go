package worker

import (
	"runtime"
	"testing"
	"time"
)

// The bench reads these figures from the run's log line to compare paced and unthrottled
// passes; each must move with what the process does, not just be non-zero once.
func TestReadProcessStatsFollowsTheProcess(t *testing.T) {
	before := ReadProcessStats()
	if before.PeakRSSKiB < 1024 {
		t.Fatalf("peak RSS %d KiB: a Go test binary holds more than a MiB", before.PeakRSSKiB)
	}

	// Spin until 20 ms of CPU show (a loaded machine may take longer, never forever), then
	// give the CPU up ten times.
	for deadline := time.Now().Add(10 * time.Second); ReadProcessStats().CPU-before.CPU < 20*time.Millisecond; {
		if time.Now().After(deadline) {
			t.Fatalf("CPU still %v after 10 s of spinning", ReadProcessStats().CPU-before.CPU)
		}
	}
	for range 10 {
		time.Sleep(time.Millisecond)
	}

	after := ReadProcessStats()
	if got := after.ContextSwitches - before.ContextSwitches; got < 10 {
		t.Errorf("context switches grew by %d over ten sleeps", got)
	}
	if after.PeakRSSKiB < before.PeakRSSKiB {
		t.Errorf("peak RSS fell from %d to %d KiB", before.PeakRSSKiB, after.PeakRSSKiB)
	}
}

// The peak is this process's own, not one carried over from whoever started it: `go test`
// (the parent here) or a larger test binary running the worker (the benchmarks) would
// otherwise hide the worker's figure under theirs. Touching 64 MiB must show.
func TestReadProcessStatsPeakIsThisProcesss(t *testing.T) {
	before := ReadProcessStats().PeakRSSKiB
	buf := make([]byte, 64<<20)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1
	}
	after := ReadProcessStats().PeakRSSKiB
	runtime.KeepAlive(buf)
	if grew := after - before; grew < 48<<10 {
		t.Errorf("peak RSS grew by %d KiB after touching 64 MiB (from %d KiB)", grew, before)
	}
}
