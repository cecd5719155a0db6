package reconcile

import "sync/atomic"

// RunCounter is one of the reconcile_runs counters: its name (the column, the log field and
// the metric label), the tally that adds to it (none for Scanned, which every check adds to
// when it starts) and where it sits in Counters and CounterValues.
type RunCounter struct {
	Name  string
	Tally Tally
	live  func(*Counters) *atomic.Int64
	value func(*CounterValues) *int64
}

// Value reads the counter from v.
func (rc RunCounter) Value(v CounterValues) int64 { return *rc.value(&v) }

// RunCounters are the counters in reconcile_runs column order: the one table the pass's
// tally, its log line, the metrics, the run row and the summaries name them from, so a
// counter added here reaches all of them.
var RunCounters = []RunCounter{
	{"scanned", "", func(c *Counters) *atomic.Int64 { return &c.Scanned }, func(v *CounterValues) *int64 { return &v.Scanned }},
	{"repaired", TallyRepaired, func(c *Counters) *atomic.Int64 { return &c.Repaired }, func(v *CounterValues) *int64 { return &v.Repaired }},
	{"closed", TallyClosed, func(c *Counters) *atomic.Int64 { return &c.Closed }, func(v *CounterValues) *int64 { return &v.Closed }},
	{"unchanged", TallyUnchanged, func(c *Counters) *atomic.Int64 { return &c.Unchanged }, func(v *CounterValues) *int64 { return &v.Unchanged }},
	{"still_pending", TallyStillPending, func(c *Counters) *atomic.Int64 { return &c.StillPending }, func(v *CounterValues) *int64 { return &v.StillPending }},
	{"mismatches", TallyMismatch, func(c *Counters) *atomic.Int64 { return &c.Mismatches }, func(v *CounterValues) *int64 { return &v.Mismatches }},
	{"claimed_elsewhere", TallyClaimedElsewhere, func(c *Counters) *atomic.Int64 { return &c.ClaimedElsewhere }, func(v *CounterValues) *int64 { return &v.ClaimedElsewhere }},
	{"errors", TallyError, func(c *Counters) *atomic.Int64 { return &c.Errors }, func(v *CounterValues) *int64 { return &v.Errors }},
	{"refunds_repaired", TallyRefundRepaired, func(c *Counters) *atomic.Int64 { return &c.RefundsRepaired }, func(v *CounterValues) *int64 { return &v.RefundsRepaired }},
}

// Snapshot copies the counters.
func (c *Counters) Snapshot() CounterValues {
	var out CounterValues
	for _, rc := range RunCounters {
		*rc.value(&out) = rc.live(c).Load()
	}
	return out
}

// Load sets every counter to v's value: a resumed backfill keeps counting from its row.
func (c *Counters) Load(v CounterValues) {
	for _, rc := range RunCounters {
		rc.live(c).Store(*rc.value(&v))
	}
}

// Add counts one check of the given tally (Scanned is counted apart, when the check starts);
// a tally of no counter counts as unchanged.
func (c *Counters) Add(t Tally) {
	for _, rc := range RunCounters {
		if rc.Tally == t && t != "" {
			rc.live(c).Add(1)
			return
		}
	}
	c.Unchanged.Add(1)
}

// Add adds w's counters to v's: the totals of several runs.
func (v *CounterValues) Add(w CounterValues) {
	for _, rc := range RunCounters {
		*rc.value(v) += rc.Value(w)
	}
}
