package httpapi

import (
	"strconv"
	"sync/atomic"

	"golang.org/x/time/rate"
)

// maxLoggedValue bounds what a sender-chosen value may put in a log line.
const maxLoggedValue = 128

// clip makes a value the sender chose safe to log: control and non-ASCII bytes escaped (no
// forged lines, no terminal escapes) and at most maxLoggedValue bytes, marked when cut.
func clip(s string) string {
	cut := len(s) > maxLoggedValue
	if cut {
		s = s[:maxLoggedValue] // escaping only grows it: no need to quote more
	}
	q := strconv.QuoteToASCII(s)
	q = q[1 : len(q)-1]
	if cut || len(q) > maxLoggedValue {
		q = q[:min(len(q), maxLoggedValue-3)] + "..."
	}
	return q
}

// logSampler lets a burst of lines through, then about one a second; the rest are counted
// so that the next line says how many were left out.
type logSampler struct {
	limit      *rate.Limiter
	suppressed atomic.Int64
}

func newLogSampler() *logSampler {
	return &logSampler{limit: rate.NewLimiter(1, 20)}
}

func (s *logSampler) allow() bool {
	if s.limit.Allow() {
		return true
	}
	s.suppressed.Add(1)
	return false
}
