package relay_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/internal/faultproxy"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/relay"
	"github.com/payrecon/payrecon/relay/natstest"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/repotest"
)

// bundle is what a relay test needs: its own database and its own stream.
type bundle struct {
	db     *repotest.DB
	store  *postgres.Store
	stream *natstest.Stream
}

func setup(t *testing.T) bundle {
	t.Helper()
	db := repotest.NewDB(t)
	return bundle{db: db, store: postgres.NewStore(db.DB), stream: natstest.NewStream(t, natstest.Options{})}
}

func testLogger(t *testing.T) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel)
}

// connect opens a relay connection to url (the test server unless a proxy is given).
func connect(t *testing.T, url string, ackTimeout time.Duration) *relay.Conn {
	t.Helper()
	c, err := relay.Connect(url, relay.ConnectOptions{Window: 256, AckTimeout: ackTimeout, Log: zerolog.Nop()})
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func (b bundle) relay(t *testing.T, c *relay.Conn, batch int, obs relay.Observer) *relay.Relay {
	return relay.New(b.store, c.JetStream(), relay.Settings{SubjectPrefix: b.stream.Prefix, Batch: batch,
		AckTimeout: 2 * time.Second, Poll: time.Hour}, obs, testLogger(t))
}

// seed inserts orders PAID orders and, for each, one outbox row per kind (in kinds order,
// all of an order's rows after the previous order's). It returns the outbox ids in order.
func seed(t *testing.T, db *sqlx.DB, orders int, kinds ...string) []int64 {
	t.Helper()
	if len(kinds) == 0 {
		kinds = []string{reconcile.OutboxKindPaid}
	}
	tag := strconv.FormatInt(time.Now().UnixNano(), 36)
	var ids []int64
	err := db.Select(&ids, `
		WITH o AS (
			INSERT INTO payment_orders (platform, merchant_id, out_trade_no, amount_minor, status)
			SELECT 'alipay', '2021000000000001', $1 || '-' || g, 100 + g, 'PAID' FROM generate_series(1, $2) g
			RETURNING id, out_trade_no, amount_minor
		)
		INSERT INTO fulfillment_outbox (order_id, kind, payload)
		SELECT o.id, k.kind, jsonb_build_object('order_id', o.id, 'out_trade_no', o.out_trade_no, 'amount_minor', o.amount_minor, 'kind', k.kind)
		FROM o CROSS JOIN unnest($3::text[]) WITH ORDINALITY AS k(kind, n)
		ORDER BY o.id, k.n
		RETURNING id`, tag, orders, "{"+joinQuoted(kinds)+"}")
	if err != nil {
		t.Fatalf("seed outbox: %v", err)
	}
	return ids
}

func joinQuoted(ss []string) string {
	out := ""
	for i, s := range ss {
		if i > 0 {
			out += ","
		}
		out += strconv.Quote(s)
	}
	return out
}

func undispatched(t *testing.T, db *sqlx.DB) int {
	t.Helper()
	var n int
	if err := db.Get(&n, `SELECT count(*) FROM fulfillment_outbox WHERE dispatched_at IS NULL`); err != nil {
		t.Fatal(err)
	}
	return n
}

func dispatchedIDs(t *testing.T, db *sqlx.DB) map[int64]bool {
	t.Helper()
	var ids []int64
	if err := db.Select(&ids, `SELECT id FROM fulfillment_outbox WHERE dispatched_at IS NOT NULL`); err != nil {
		t.Fatal(err)
	}
	out := make(map[int64]bool, len(ids))
	for _, id := range ids {
		out[id] = true
	}
	return out
}

// streamIDs maps each stored message's outbox id to how often the stream holds it.
func streamIDs(t *testing.T, s *natstest.Stream) map[int64]int {
	t.Helper()
	out := map[int64]int{}
	for _, m := range s.Messages(t) {
		id, err := strconv.ParseInt(m.Header.Get(relay.HeaderOutboxID), 10, 64)
		if err != nil {
			t.Fatalf("message %d without %s: %v", m.Sequence, relay.HeaderOutboxID, err)
		}
		out[id]++
	}
	return out
}

func TestPassPublishesEveryRowInOrderThenMarksIt(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := seed(t, b.db.DB, 25)
	r := b.relay(t, connect(t, natstest.URL(), 5*time.Second), 10, nil)

	totals, err := r.Pass(context.Background())
	if err != nil {
		t.Fatalf("pass: %v", err)
	}
	if totals.Published != 25 || totals.Duplicates != 0 || totals.Failed != 0 {
		t.Fatalf("totals = %+v, want 25 published", totals)
	}
	if n := undispatched(t, b.db.DB); n != 0 {
		t.Fatalf("%d rows left undispatched", n)
	}
	msgs := b.stream.Messages(t)
	if len(msgs) != len(ids) {
		t.Fatalf("stream holds %d messages, want %d", len(msgs), len(ids))
	}
	var payloads []json.RawMessage
	if err := b.db.Select(&payloads, `SELECT payload FROM fulfillment_outbox ORDER BY id`); err != nil {
		t.Fatal(err)
	}
	// Two workers publish disjoint batches at once: the stream order is the id order
	// within each batch, which is what per-order ordering needs (see the next test).
	got := map[int64]*jetstream.RawStreamMsg{}
	for _, m := range msgs {
		id, _ := strconv.ParseInt(m.Header.Get(relay.HeaderOutboxID), 10, 64)
		got[id] = m
	}
	for i, id := range ids {
		m := got[id]
		if m == nil {
			t.Fatalf("outbox row %d not in the stream", id)
		}
		if want := b.stream.Prefix + "order.paid"; m.Subject != want {
			t.Errorf("row %d: subject %q, want %q", id, m.Subject, want)
		}
		if h := m.Header.Get("Nats-Msg-Id"); h != fmt.Sprintf("payrecon-outbox-%d", id) {
			t.Errorf("row %d: Nats-Msg-Id %q", id, h)
		}
		if m.Header.Get(relay.HeaderKind) != "order.paid" || m.Header.Get(relay.HeaderOrderID) == "" || m.Header.Get(relay.HeaderCreatedAt) == "" {
			t.Errorf("row %d: headers %v", id, m.Header)
		}
		var gotJSON, wantJSON map[string]any
		if err := json.Unmarshal(m.Data, &gotJSON); err != nil {
			t.Fatalf("row %d payload: %v", id, err)
		}
		json.Unmarshal(payloads[i], &wantJSON) //nolint:errcheck // from jsonb
		if fmt.Sprint(gotJSON) != fmt.Sprint(wantJSON) || m.Header.Get(relay.HeaderOrderID) != fmt.Sprint(wantJSON["order_id"]) {
			t.Errorf("row %d: payload %s, want %s", id, m.Data, payloads[i])
		}
	}

	again, err := r.Pass(context.Background())
	if err != nil || again.Published != 0 {
		t.Fatalf("second pass = %+v, %v; want nothing published", again, err)
	}
	if n := b.stream.Count(t); n != 25 {
		t.Fatalf("stream holds %d messages after a second pass, want 25", n)
	}
}

// An order's second row becomes takeable once its first is dispatched: one pass still
// relays both, in order.
func TestOnePassRelaysEveryRowOfAnOrderInOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seed(t, b.db.DB, 5, "order.paid", "order.refunded")
	totals, err := b.relay(t, connect(t, natstest.URL(), 5*time.Second), 100, nil).Pass(context.Background())
	if err != nil || totals.Published != 10 {
		t.Fatalf("pass = %+v, %v; want 10 published", totals, err)
	}
	paidSeq := map[string]uint64{}
	for _, m := range b.stream.Messages(t) {
		order := m.Header.Get(relay.HeaderOrderID)
		switch m.Header.Get(relay.HeaderKind) {
		case "order.paid":
			paidSeq[order] = m.Sequence
		case "order.refunded":
			if seq, ok := paidSeq[order]; !ok || seq > m.Sequence {
				t.Fatalf("order %s: refunded (seq %d) before paid", order, m.Sequence)
			}
		}
	}
}

// recorder keeps every batch report.
type recorder struct {
	mu      sync.Mutex
	batches []relay.BatchReport
	lag     []time.Duration
}

func (r *recorder) Batch(b relay.BatchReport) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.batches = append(r.batches, b)
}

func (r *recorder) Lag(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lag = append(r.lag, d)
}

func TestRepublishAfterCrashIsStoredOnce(t *testing.T) {
	t.Parallel()
	b := setup(t)
	ids := seed(t, b.db.DB, 10)
	// A relay that died between publish and mark: the messages are in the stream, the rows
	// are still undispatched.
	for _, id := range ids {
		m := nats.NewMsg(b.stream.Prefix + "order.paid")
		m.Header.Set("Nats-Msg-Id", relay.MsgID(id))
		m.Header.Set(relay.HeaderOutboxID, strconv.FormatInt(id, 10))
		m.Data = []byte(`{}`)
		if _, err := b.stream.JS.PublishMsg(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	rec := &recorder{}
	totals, err := b.relay(t, connect(t, natstest.URL(), 5*time.Second), 4, rec).Pass(context.Background())
	if err != nil {
		t.Fatalf("pass: %v", err)
	}
	if totals.Published != 10 || totals.Duplicates != 10 {
		t.Fatalf("totals = %+v, want 10 published, all acknowledged as duplicates", totals)
	}
	if n := b.stream.Count(t); n != 10 {
		t.Fatalf("stream holds %d messages, want each once (10)", n)
	}
	if n := undispatched(t, b.db.DB); n != 0 {
		t.Fatalf("%d rows left undispatched", n)
	}
}

// Several relays at once: every row reaches the stream exactly once, no row is ever sent
// twice (no acknowledgement says duplicate), and each order's messages keep their order.
func TestConcurrentRelaysTakeDisjointBatchesAndKeepOrderPerOrder(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const orders = 1200
	seed(t, b.db.DB, orders, "order.paid", "order.refunded")
	rec := &recorder{}
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for i := 0; i < 3; i++ {
		r := b.relay(t, connect(t, natstest.URL(), 5*time.Second), 50, rec)
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A relay's pass ends on a short batch, which a busy peer can cause: go on
			// until nothing is left, as --follow would.
			for undispatched(t, b.db.DB) > 0 {
				if _, err := r.Pass(context.Background()); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("pass: %v", err)
	}
	var published, dups int
	for _, rep := range rec.batches {
		for _, d := range rep.Delivered {
			published++
			if d.Duplicate {
				dups++
			}
		}
	}
	if published != 2*orders || dups != 0 {
		t.Fatalf("relays published %d (%d duplicates), want %d sent once each", published, dups, 2*orders)
	}
	seqOf := map[string]uint64{}
	for _, m := range b.stream.Messages(t) {
		key := m.Header.Get(relay.HeaderOrderID) + "/" + m.Header.Get(relay.HeaderKind)
		if _, twice := seqOf[key]; twice {
			t.Fatalf("%s stored twice", key)
		}
		seqOf[key] = m.Sequence
	}
	if len(seqOf) != 2*orders {
		t.Fatalf("stream holds %d distinct messages, want %d", len(seqOf), 2*orders)
	}
	for key, seq := range seqOf {
		orderID, kind, _ := strings.Cut(key, "/")
		if kind != "order.refunded" {
			continue
		}
		if paid, ok := seqOf[orderID+"/order.paid"]; !ok || paid > seq {
			t.Fatalf("order %s: refunded at seq %d, paid at seq %d", orderID, seq, paid)
		}
	}
}

func TestStreamMustExistAndCoverTheRetryHorizon(t *testing.T) {
	t.Parallel()
	c := connect(t, natstest.URL(), 5*time.Second)
	short := natstest.NewStream(t, natstest.Options{Duplicates: time.Minute})
	exact := natstest.NewStream(t, natstest.Options{Duplicates: 2 * time.Minute})
	cases := []struct {
		name, prefix string
		horizon      time.Duration
		setting      string // the *config.Error's setting, "" for success
	}{
		{"no stream captures the prefix", "nostream" + strconv.FormatInt(time.Now().UnixNano(), 36) + ".", time.Minute, "RECONCILER_RELAY_SUBJECT_PREFIX"},
		{"duplicate window shorter than the horizon", short.Prefix, 2 * time.Minute, "RECONCILER_RELAY_RETRY_HORIZON"},
		{"duplicate window equal to the horizon", exact.Prefix, 2 * time.Minute, ""},
		{"duplicate window longer than the horizon", short.Prefix, 30 * time.Second, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			info, err := c.CheckStream(context.Background(), tc.prefix, reconcile.OutboxKinds, tc.horizon)
			var ce *config.Error
			switch {
			case tc.setting == "" && err != nil:
				t.Fatalf("CheckStream: %v", err)
			case tc.setting == "" && info.Config.Name == "":
				t.Fatal("CheckStream returned no stream")
			case tc.setting != "" && (!errors.As(err, &ce) || ce.Setting != tc.setting):
				t.Fatalf("CheckStream = %v, want a configuration error naming %s", err, tc.setting)
			}
		})
	}
}

// NATS goes away mid-pass: the pass fails, every row marked dispatched is in the stream,
// the others stay undispatched, and the next pass completes the hand-off with every
// message stored once.
func TestNATSLostMidBatchLeavesUnacknowledgedRowsForTheNextPass(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const rows = 4000
	seed(t, b.db.DB, rows)
	u, err := url.Parse(natstest.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := faultproxy.Start(t, u.Host)
	viaProxy := *u
	viaProxy.Host = proxy.Addr()
	r := b.relay(t, connect(t, viaProxy.String(), time.Second), 200, nil)

	done := make(chan error, 1)
	go func() {
		_, err := r.Pass(context.Background())
		done <- err
	}()
	deadline := time.Now().Add(30 * time.Second)
	for b.stream.Count(t) < 300 && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	proxy.Cut()
	err = <-done
	var pe *relay.PublishError
	if !errors.As(err, &pe) {
		t.Fatalf("pass after losing NATS = %v, want a *relay.PublishError", err)
	}
	marked := dispatchedIDs(t, b.db.DB)
	stored := streamIDs(t, b.stream)
	if len(marked) == rows {
		t.Fatal("every row was dispatched before the cut: the test did not cut mid-pass")
	}
	for id := range marked {
		if stored[id] != 1 {
			t.Fatalf("row %d marked dispatched but stored %d times", id, stored[id])
		}
	}

	if _, err := b.relay(t, connect(t, natstest.URL(), 5*time.Second), 200, nil).Pass(context.Background()); err != nil {
		t.Fatalf("next pass: %v", err)
	}
	if n := undispatched(t, b.db.DB); n != 0 {
		t.Fatalf("%d rows still undispatched", n)
	}
	stored = streamIDs(t, b.stream)
	if len(stored) != rows {
		t.Fatalf("stream holds %d distinct rows, want %d", len(stored), rows)
	}
	for id, n := range stored {
		if n != 1 {
			t.Fatalf("row %d stored %d times", id, n)
		}
	}
}

// A relay told to stop (SIGTERM) while its batch waits for acknowledgements still marks
// what JetStream acknowledged, instead of leaving it to be published again.
func TestCancelledPassMarksWhatWasAcknowledged(t *testing.T) {
	t.Parallel()
	b := setup(t)
	seed(t, b.db.DB, 50)
	u, err := url.Parse(natstest.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := faultproxy.Start(t, u.Host)
	viaProxy := *u
	viaProxy.Host = proxy.Addr()
	r := b.relay(t, connect(t, viaProxy.String(), 10*time.Second), 100, nil)
	proxy.Hold() // the acknowledgements wait in the proxy
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := r.Pass(ctx)
		done <- err
	}()
	deadline := time.Now().Add(10 * time.Second)
	for b.stream.Count(t) < 50 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	time.Sleep(50 * time.Millisecond)
	if n := undispatched(t, b.db.DB); n != 50 {
		t.Fatalf("%d rows undispatched before the acknowledgements arrived, want 50", n)
	}
	proxy.Restore()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled pass = %v, want context.Canceled", err)
	}
	if n := undispatched(t, b.db.DB); n != 0 {
		t.Fatalf("%d acknowledged rows left unmarked after the cancelled pass", n)
	}
}

func TestFollowIsWokenByTheTransitionsNotify(t *testing.T) {
	t.Parallel()
	b := setup(t)
	l, err := postgres.ListenOutbox(b.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rec := &recorder{}
	// Poll is an hour: only the NOTIFY can wake the relay in time.
	r := b.relay(t, connect(t, natstest.URL(), 5*time.Second), 100, rec)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Follow(ctx, l.Wake()) }()

	orderID := repotest.InsertOrder(t, b.db, repotest.Order{Platform: "wechatpay", MerchantID: "1900000001", OutTradeNo: "follow-1",
		AmountMinor: 500, Status: "PENDING"})
	moved, err := b.store.ApplyTransition(context.Background(), reconcile.Transition{OrderID: orderID,
		From: reconcile.StatusPending, To: reconcile.StatusPaid, Platform: reconcile.WechatPay, PlatformTradeNo: "4200000001",
		AmountMinor: 500, PaidAt: time.Now(), Source: reconcile.SourceReconcile,
		Outbox: &reconcile.OutboxMessage{Kind: reconcile.OutboxKindPaid, Payload: map[string]any{"order_id": orderID}}})
	if err != nil || !moved {
		t.Fatalf("transition = %v, %v", moved, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for b.stream.Count(t) < 1 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := b.stream.Count(t); n != 1 {
		t.Fatalf("stream holds %d messages after the transition, want 1", n)
	}
	// The stream has the message as soon as JetStream acknowledged it; the relay marks the
	// row and measures the lag after that. Stopping it before it did would leave nothing to
	// check (a loaded machine made that race visible), so wait for the mark and the
	// measurement first.
	lastLag := func() (time.Duration, bool) {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		if len(rec.lag) == 0 {
			return 0, false
		}
		return rec.lag[len(rec.lag)-1], true
	}
	for time.Now().Before(deadline) {
		if lag, ok := lastLag(); ok && lag == 0 && undispatched(t, b.db.DB) == 0 {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Follow after cancel = %v, want nil", err)
	}
	if n := undispatched(t, b.db.DB); n != 0 {
		t.Fatalf("%d rows left undispatched", n)
	}
	if lag, ok := lastLag(); !ok || lag != 0 {
		rec.mu.Lock()
		defer rec.mu.Unlock()
		t.Fatalf("lag observations %v, want the last one zero (nothing waiting)", rec.lag)
	}
}

func TestFollowEndsWhenTheDatabaseIsLost(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := faultproxy.Start(t, u.Host)
	viaProxy := *u
	viaProxy.Host = proxy.Addr()
	pdb, err := postgres.Open(context.Background(), viaProxy.String())
	if err != nil {
		t.Fatal(err)
	}
	defer pdb.Close()
	stream := natstest.NewStream(t, natstest.Options{})
	c := connect(t, natstest.URL(), 5*time.Second)
	r := relay.New(postgres.NewStore(pdb), c.JetStream(), relay.Settings{SubjectPrefix: stream.Prefix, Batch: 10,
		AckTimeout: time.Second, Poll: 20 * time.Millisecond}, nil, testLogger(t))
	done := make(chan error, 1)
	go func() { done <- r.Follow(context.Background(), nil) }()
	time.Sleep(100 * time.Millisecond)
	proxy.Cut()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Follow returned nil after losing the database")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Follow still running 30s after the database was lost")
	}
}

// TestFindingEventsArePublishedInOrderPerFinding: a finding's rows (migration 0018) leave
// under payrecon.finding.*, name the finding in a header and no order, and each finding's
// messages reach the stream in the order they were written.
func TestFindingEventsArePublishedInOrderPerFinding(t *testing.T) {
	t.Parallel()
	b := setup(t)
	const findings = 6
	for i := range findings {
		var id int64
		err := b.db.Get(&id, `INSERT INTO reconcile_mismatches (platform, merchant_id, out_trade_no, platform_trade_no, kind,
			platform_amount_minor, platform_status) VALUES ('wechatpay', '1900000001', $1, $2, 'UNKNOWN_ORDER', 500, 'SUCCESS')
			RETURNING id`, fmt.Sprintf("GHOST-%d", i), fmt.Sprintf("42000%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.db.Exec(`SELECT payrecon_review_acknowledge($1, 'ann@example.com', '', 0, '')`, id); err != nil {
			t.Fatal(err)
		}
	}
	totals, err := b.relay(t, connect(t, natstest.URL(), 5*time.Second), 4, nil).Pass(context.Background())
	if err != nil || totals.Published != 2*findings {
		t.Fatalf("pass = %+v, %v; want %d published", totals, err, 2*findings)
	}
	opened := map[string]uint64{}
	for _, m := range b.stream.Messages(t) {
		finding := m.Header.Get(relay.HeaderFindingID)
		if finding == "" || m.Header.Get(relay.HeaderOrderID) != "" {
			t.Fatalf("message %s: headers %v, want the finding named and no order", m.Subject, m.Header)
		}
		switch m.Subject {
		case b.stream.Prefix + "finding.opened":
			opened[finding] = m.Sequence
		case b.stream.Prefix + "finding.acknowledged":
			if seq, ok := opened[finding]; !ok || seq > m.Sequence {
				t.Fatalf("finding %s: acknowledged (seq %d) before opened", finding, m.Sequence)
			}
		default:
			t.Fatalf("unexpected subject %s", m.Subject)
		}
	}
	if len(opened) != findings {
		t.Fatalf("%d findings opened in the stream, want %d", len(opened), findings)
	}
}
