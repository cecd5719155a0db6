package postgres

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// quietOutbox, joined into a transition's outbox insert, tells the outbox trigger
// (migration 0014) that this transaction's writer sends its NOTIFY itself, after the commit:
// set_config runs before the insert's first row, and the trigger, AFTER INSERT, reads it
// at the statement's end. Local to the transition's own transaction.
const quietOutbox = `(SELECT set_config('payrecon.outbox_notify', 'off', true)) AS quiet`

// outboxWaker wakes the relays following the outbox (LISTEN OutboxChannel) after a
// transition that wrote an outbox row has committed, with a NOTIFY of its own outside that
// transaction.
//
// The NOTIFY used to come from the outbox trigger inside the transition's transaction (it
// still does for rows inserted any other way: migration 0014). PostgreSQL
// serialises the commits of every transaction that notified, cluster-wide, across the
// commit's WAL flush: notifying transitions could not share a flush, and the server topped
// out at one per disk flush (347 commits/s where the same inserts without it made 2,130 on
// the development machine, pgbench, 32 clients). A bare NOTIFY writes no WAL and costs a
// fraction of a millisecond. Concurrent transitions share one: a caller that finds another
// NOTIFY in flight leaves its wake-up to that caller, who sends one more before it stops.
type outboxWaker struct {
	mu    sync.Mutex // held by the caller sending NOTIFYs
	dirty atomic.Bool
}

// notifyTimeout bounds a wake-up: a relay that misses one finds the rows at its next poll.
const notifyTimeout = 2 * time.Second

// wake makes sure a NOTIFY is sent after this call began. The error of a NOTIFY is dropped:
// the transition it follows has committed, and the relays poll besides.
func (s *Store) wakeOutbox(ctx context.Context) {
	w := s.waker
	w.dirty.Store(true)
	for w.dirty.Load() {
		if !w.mu.TryLock() {
			return // the holder sends one more NOTIFY once it sees dirty
		}
		for w.dirty.Swap(false) {
			nctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), notifyTimeout)
			s.db.ExecContext(nctx, `NOTIFY `+OutboxChannel) //nolint:errcheck // see above
			cancel()
		}
		w.mu.Unlock()
		// A wake that came between the last Swap and the Unlock found the lock taken and
		// left: the loop condition catches it.
	}
}
