// Package relay is the fulfilment hand-off: it publishes the undispatched rows of
// fulfillment_outbox to NATS JetStream and marks a row dispatched only once JetStream has
// acknowledged it.
//
// Delivery is at least once, made effectively once at both ends: every message carries
// Nats-Msg-Id payrecon-outbox-<id>, so the stream drops a re-publish inside its duplicate
// window (a relay killed between publish and mark, an acknowledgement lost with the
// connection), and consumers deduplicate on (order_id, kind) beyond it.
package relay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/reconcile"
)

// Headers every relayed message carries besides its payload (the row's JSON).
const (
	HeaderMsgID     = jetstream.MsgIDHeader // payrecon-outbox-<id>: the stream's deduplication key
	HeaderOrderID   = "Payrecon-Order-Id"   // an order's message (order.paid, refund.*)
	HeaderFindingID = "Payrecon-Finding-Id" // a finding's message (finding.*)
	HeaderKind      = "Payrecon-Kind"
	HeaderOutboxID  = "Payrecon-Outbox-Id"
	HeaderCreatedAt = "Payrecon-Created-At" // RFC 3339, when the transition committed
)

// MsgID is the Nats-Msg-Id of outbox row id.
func MsgID(outboxID int64) string { return "payrecon-outbox-" + strconv.FormatInt(outboxID, 10) }

// Settings of a relay.
type Settings struct {
	SubjectPrefix string        // subject = SubjectPrefix + kind
	Batch         int           // rows per batch
	Workers       int           // batches in flight at once (each its own transaction); default 2
	AckTimeout    time.Duration // bound on waiting for a batch's acknowledgements
	Poll          time.Duration // Follow: look for rows this often without a wake-up
}

// Observer learns what each batch did and how far the hand-off lags. Calls come from
// several goroutines.
type Observer interface {
	Batch(BatchReport)
	// Lag is the age of the oldest undispatched row, zero when none waits.
	Lag(time.Duration)
}

// BatchReport is one batch's outcome.
type BatchReport struct {
	Taken     int
	Delivered []Delivery // acknowledged and marked dispatched
	Failed    int        // taken but not acknowledged: left undispatched for the next batch
	Took      time.Duration
	Err       error // the first publish error, if any
}

// Delivery is one acknowledged row.
type Delivery struct {
	OutboxID, OrderID int64
	Kind              string
	CreatedAt         time.Time
	AckedAt           time.Time
	// Duplicate: the stream had the message already (a re-publish after a crash).
	Duplicate bool
}

// Totals add up a pass.
type Totals struct {
	Batches, Published, Duplicates, Failed int
}

func (t *Totals) add(r BatchReport) {
	t.Batches++
	t.Published += len(r.Delivered)
	t.Failed += r.Failed
	for _, d := range r.Delivered {
		if d.Duplicate {
			t.Duplicates++
		}
	}
}

// PublishError is a batch whose publishes were not all acknowledged (NATS down, slow or
// refusing). The unacknowledged rows stay undispatched; trying again later is safe.
type PublishError struct {
	Failed int
	Err    error
}

func (e *PublishError) Error() string {
	return fmt.Sprintf("%d outbox messages not acknowledged by JetStream: %v", e.Failed, e.Err)
}

func (e *PublishError) Unwrap() error { return e.Err }

// Outbox is what the relay needs of the fulfilment outbox (repo/postgres's Store is one).
type Outbox interface {
	// TakeOutbox locks up to limit undispatched rows, at most one per order, oldest first.
	TakeOutbox(ctx context.Context, limit int) (*reconcile.OutboxBatch, error)
	// OldestUndispatched is the oldest undispatched row's time (ok false: none).
	OldestUndispatched(ctx context.Context) (time.Time, bool, error)
}

// Relay moves outbox rows to JetStream.
type Relay struct {
	store Outbox
	js    jetstream.JetStream
	set   Settings
	obs   Observer
	log   zerolog.Logger
	now   func() time.Time
}

// New builds a relay. obs may be nil.
func New(store Outbox, js jetstream.JetStream, set Settings, obs Observer, log zerolog.Logger) *Relay {
	if set.Workers < 1 {
		set.Workers = 2
	}
	if set.Batch < 1 {
		set.Batch = 1000
	}
	if set.AckTimeout <= 0 {
		set.AckTimeout = 10 * time.Second
	}
	if set.Poll <= 0 {
		set.Poll = 5 * time.Second
	}
	if obs == nil {
		obs = nopObserver{}
	}
	return &Relay{store: store, js: js, set: set, obs: obs, log: log, now: time.Now}
}

type nopObserver struct{}

func (nopObserver) Batch(BatchReport) {}
func (nopObserver) Lag(time.Duration) {}

// Pass relays every undispatched row and returns when a batch comes back empty. A publish
// error or a database error stops taking new batches; batches in flight still finish
// (their acknowledged rows are marked). Cancelling ctx stops taking too: the result is
// then ctx's error, and nothing half-done is left behind.
func (r *Relay) Pass(ctx context.Context) (Totals, error) {
	takeCtx, stopTaking := context.WithCancel(ctx)
	defer stopTaking()
	var (
		mu       sync.Mutex
		totals   Totals
		firstErr error
		wg       sync.WaitGroup
	)
	for w := 0; w < r.set.Workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for takeCtx.Err() == nil {
				rep, err := r.batch(takeCtx)
				mu.Lock()
				if rep.Taken > 0 {
					totals.add(rep)
				}
				if err != nil && firstErr == nil && !errors.Is(err, context.Canceled) {
					firstErr = err
				}
				mu.Unlock()
				if err != nil {
					stopTaking()
					return
				}
				// Not "a short batch": a batch holds one row per order, so an order's next
				// row becomes takeable only after this batch; stop when nothing is left.
				if rep.Taken == 0 {
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return totals, firstErr
	}
	return totals, ctx.Err()
}

// Follow relays until ctx is cancelled: a pass, then a wait for wake (the outbox NOTIFY),
// the poll interval or, after a publish error, a backoff. A database error ends it: the
// caller decides whether the process exits. Cancelling ctx returns nil once batches in
// flight have finished.
func (r *Relay) Follow(ctx context.Context, wake <-chan struct{}) error {
	backoff := time.Duration(0)
	for {
		totals, err := r.Pass(ctx)
		r.ObserveLag(ctx)
		if ctx.Err() != nil {
			return nil
		}
		var pe *PublishError
		switch {
		case err == nil:
			backoff = 0
			if totals.Published > 0 {
				r.log.Debug().Int("published", totals.Published).Int("duplicates", totals.Duplicates).Msg("relay: pass")
			}
		case errors.As(err, &pe):
			backoff = nextBackoff(backoff, r.set.Poll)
			r.log.Warn().Err(err).Dur("retry_in", backoff).Msg("relay: publishing failed; the rows stay undispatched")
			if reconcile.Sleep(ctx, backoff) != nil {
				return nil
			}
			continue
		default:
			return err
		}
		timer := time.NewTimer(r.set.Poll)
		select {
		case <-ctx.Done():
			timer.Stop()
			return nil
		case <-wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// nextBackoff doubles from 100ms up to limit.
func nextBackoff(prev, limit time.Duration) time.Duration {
	next := 2 * prev
	if next < 100*time.Millisecond {
		next = 100 * time.Millisecond
	}
	if next > limit {
		next = limit
	}
	return next
}

// ObserveLag reports the age of the oldest undispatched row to the observer. A failed
// query is logged only: the next batch reports the database error that matters.
func (r *Relay) ObserveLag(ctx context.Context) {
	if ctx.Err() != nil {
		ctx = context.WithoutCancel(ctx)
	}
	qctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	oldest, ok, err := r.store.OldestUndispatched(qctx)
	switch {
	case err != nil:
		r.log.Warn().Err(err).Msg("relay: cannot measure the outbox lag")
	case !ok:
		r.obs.Lag(0)
	default:
		r.obs.Lag(max(r.now().Sub(oldest), 0))
	}
}

// batch takes, publishes and marks one batch. The take runs on ctx; once rows are locked
// the batch finishes on its own deadline even if ctx is cancelled, so that what JetStream
// acknowledged is marked rather than published again.
func (r *Relay) batch(ctx context.Context) (BatchReport, error) {
	start := r.now()
	b, err := r.store.TakeOutbox(ctx, r.set.Batch)
	if err != nil {
		return BatchReport{}, err
	}
	defer b.Release()
	rep := BatchReport{Taken: len(b.Rows)}
	if rep.Taken == 0 {
		return rep, nil
	}
	finish, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.set.AckTimeout+30*time.Second)
	defer cancel()

	futures := make([]jetstream.PubAckFuture, 0, len(b.Rows))
	var pubErr error
	for _, row := range b.Rows {
		// Stall as long as an acknowledgement may take: a full window waits, it does not fail.
		f, err := r.js.PublishMsgAsync(r.message(row), jetstream.WithStallWait(r.set.AckTimeout))
		if err != nil {
			pubErr = fmt.Errorf("publish outbox row %d: %w", row.ID, err)
			break
		}
		futures = append(futures, f)
	}
	acked, ackErr := r.awaitAcks(finish, b.Rows[:len(futures)], futures, &rep)
	if pubErr == nil {
		pubErr = ackErr
	}
	rep.Failed = rep.Taken - len(rep.Delivered)
	rep.Err = pubErr
	if len(acked) > 0 {
		if err := b.Dispatched(finish, acked, r.now()); err != nil {
			// Published but not marked: the next take publishes them again and the stream's
			// duplicate window drops the copies.
			rep.Failed, rep.Delivered = rep.Taken, nil
			rep.Took = r.now().Sub(start)
			r.obs.Batch(rep)
			return rep, err
		}
	}
	rep.Took = r.now().Sub(start)
	r.obs.Batch(rep)
	if rep.Failed > 0 {
		if pubErr == nil {
			pubErr = errors.New("no acknowledgement")
		}
		return rep, &PublishError{Failed: rep.Failed, Err: pubErr}
	}
	return rep, nil
}

// awaitAcks collects the acknowledgements of a batch's publishes in order and returns the
// ids of the acknowledged rows and the first publish error.
func (r *Relay) awaitAcks(ctx context.Context, rows []reconcile.OutboxRow, futures []jetstream.PubAckFuture, rep *BatchReport) ([]int64, error) {
	acked := make([]int64, 0, len(futures))
	rep.Delivered = make([]Delivery, 0, len(futures))
	var firstErr error
	for i, f := range futures {
		select {
		case ack := <-f.Ok():
			row := rows[i]
			acked = append(acked, row.ID)
			rep.Delivered = append(rep.Delivered, Delivery{OutboxID: row.ID, OrderID: row.OrderID, Kind: row.Kind,
				CreatedAt: row.CreatedAt, AckedAt: r.now(), Duplicate: ack.Duplicate})
		case err := <-f.Err():
			if firstErr == nil {
				firstErr = fmt.Errorf("publish outbox row %d to %s: %w", rows[i].ID, r.set.SubjectPrefix+rows[i].Kind, err)
			}
		case <-ctx.Done():
			if firstErr == nil {
				firstErr = fmt.Errorf("waiting for acknowledgements: %w", ctx.Err())
			}
			return acked, firstErr
		}
	}
	return acked, firstErr
}

// message is the NATS message of an outbox row: its payload as stored, its subject from
// the kind, and headers a consumer can route and deduplicate on without parsing the body.
func (r *Relay) message(row reconcile.OutboxRow) *nats.Msg {
	m := nats.NewMsg(r.set.SubjectPrefix + row.Kind)
	m.Data = row.Payload
	m.Header.Set(HeaderMsgID, MsgID(row.ID))
	if row.OrderID != 0 {
		m.Header.Set(HeaderOrderID, strconv.FormatInt(row.OrderID, 10))
	}
	if row.FindingID != 0 {
		m.Header.Set(HeaderFindingID, strconv.FormatInt(row.FindingID, 10))
	}
	m.Header.Set(HeaderKind, row.Kind)
	m.Header.Set(HeaderOutboxID, strconv.FormatInt(row.ID, 10))
	m.Header.Set(HeaderCreatedAt, row.CreatedAt.UTC().Format(time.RFC3339Nano))
	return m
}
