package worker

import (
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

// ProcessStats reads this process's peak resident set size and CPU time from /proc, for the
// end-of-pass log line (and `make bench`, which reads it from there). Zero where /proc is
// missing.
func ProcessStats() (peakRSSKiB int64, cpu time.Duration) {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				peakRSSKiB, _ = strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			}
		}
	}
	if b, err := os.ReadFile("/proc/self/stat"); err == nil {
		// Fields after the command name (which may hold spaces) start at ") ".
		if i := strings.LastIndexByte(string(b), ')'); i > 0 {
			f := strings.Fields(string(b)[i+2:])
			if len(f) > 12 {
				utime, _ := strconv.ParseInt(f[11], 10, 64)
				stime, _ := strconv.ParseInt(f[12], 10, 64)
				const clockTicks = 100 // USER_HZ on Linux
				cpu = time.Duration(utime+stime) * time.Second / clockTicks
			}
		}
	}
	return peakRSSKiB, cpu
}

// overheadHistogram records each check's own overhead (time outside the platform call) in
// log-spaced buckets: constant memory whatever the number of orders.
type overheadHistogram struct {
	mu      sync.Mutex
	buckets [256]int64
	n       int64
}

const histBase = 1.08 // ~8% resolution from 1µs

func (h *overheadHistogram) Checked(c reconcile.Check) {
	d := c.Took - c.PlatformTime
	if d < time.Microsecond {
		d = time.Microsecond
	}
	i := int(math.Log(float64(d/time.Microsecond)) / math.Log(histBase))
	if i >= len(h.buckets) {
		i = len(h.buckets) - 1
	}
	h.mu.Lock()
	h.buckets[i]++
	h.n++
	h.mu.Unlock()
}

// quantile returns the upper bound of the bucket holding quantile q.
func (h *overheadHistogram) quantile(q float64) time.Duration {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.n == 0 {
		return 0
	}
	target := int64(math.Ceil(q * float64(h.n)))
	var seen int64
	for i, c := range h.buckets {
		seen += c
		if seen >= target {
			return time.Duration(math.Pow(histBase, float64(i+1))) * time.Microsecond
		}
	}
	return 0
}
