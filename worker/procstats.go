package worker

import (
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

// ProcessStats is what this process has used since it started, for the end-of-pass log line
// (and `make bench`, which reads it from there).
type ProcessStats struct {
	PeakRSSKiB int64
	CPU        time.Duration // user and system, every thread
	// ContextSwitches counts every time one of the process's threads left a CPU, waiting or
	// preempted. An idle process pays for each wake-up (the runtime's monitor thread alone
	// switches about once per wake-up), so a paced pass's CPU follows this count: it is the
	// steadier figure when a loaded machine makes CPU time wander.
	ContextSwitches int64
}

// ReadProcessStats reads getrusage(2) for the CPU and the context switches of every thread,
// and /proc/self/status for the peak RSS. Not ru_maxrss: Linux keeps it across execve, so a
// worker started by a larger process (a test binary, an agent) would report its parent's peak.
// Zero where a source is missing.
func ReadProcessStats() ProcessStats {
	var st ProcessStats
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
		st.CPU = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		st.ContextSwitches = ru.Nvcsw + ru.Nivcsw
	}
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if rest, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				st.PeakRSSKiB, _ = strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			}
		}
	}
	return st
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
