package main

import (
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/payrecon/payrecon/internal/faultproxy"
	"github.com/payrecon/payrecon/relay"
	"github.com/payrecon/payrecon/relay/natstest"
)

// e2eRelayEnv is an e2e world with its own JetStream stream and the relay settings for it.
type e2eRelayEnv struct {
	*e2eEnv
	stream *natstest.Stream
	env    []string
}

func newE2ERelayEnv(t *testing.T, o natstest.Options) *e2eRelayEnv {
	t.Helper()
	e := newE2EEnv(t)
	s := natstest.NewStream(t, o)
	return &e2eRelayEnv{e2eEnv: e, stream: s, env: []string{
		"RECONCILER_RELAY_URL=" + natstest.URL(),
		"RECONCILER_RELAY_SUBJECT_PREFIX=" + s.Prefix,
		"RECONCILER_RELAY_ACK_TIMEOUT=2s",
	}}
}

// seedOutbox inserts n paid orders, each with its order.paid outbox row.
func (e *e2eRelayEnv) seedOutbox(n int) {
	e.t.Helper()
	_, err := e.db.Exec(`
		WITH o AS (
			INSERT INTO payment_orders (platform, merchant_id, out_trade_no, amount_minor, status)
			SELECT 'alipay', $1, 'relay-' || g, 100 + g, 'PAID' FROM generate_series(1, $2) g
			RETURNING id, out_trade_no, amount_minor
		)
		INSERT INTO fulfillment_outbox (order_id, kind, payload)
		SELECT id, 'order.paid', jsonb_build_object('order_id', id, 'out_trade_no', out_trade_no, 'amount_minor', amount_minor)
		FROM o ORDER BY id`, e.sb.Identity().AlipayAppID, n)
	if err != nil {
		e.t.Fatalf("seed outbox: %v", err)
	}
}

func (e *e2eRelayEnv) dispatched() int {
	return e.count(`SELECT count(*) FROM fulfillment_outbox WHERE dispatched_at IS NOT NULL`)
}

// storedOnce checks that the stream holds every one of n rows exactly once.
func (e *e2eRelayEnv) storedOnce(n int) {
	e.t.Helper()
	seen := map[string]int{}
	for _, m := range e.stream.Messages(e.t) {
		seen[m.Header.Get(relay.HeaderMsgID)]++
	}
	if len(seen) != n {
		e.t.Fatalf("stream holds %d distinct outbox rows, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			e.t.Fatalf("%s stored %d times", id, c)
		}
	}
}

func TestE2ERelayExitCodes(t *testing.T) {
	t.Parallel()
	e := newE2ERelayEnv(t, natstest.Options{})
	short := natstest.NewStream(t, natstest.Options{Duplicates: time.Minute})
	e.seedOutbox(5)
	cases := []struct {
		name   string
		env    []string
		code   int
		output string
	}{
		{"no relay url", []string{"RECONCILER_RELAY_URL="}, 2, "RECONCILER_RELAY_URL"},
		{"bad relay url", []string{"RECONCILER_RELAY_URL=http://127.0.0.1:4222"}, 2, "RECONCILER_RELAY_URL"},
		{"subject prefix with a wildcard", []string{"RECONCILER_RELAY_SUBJECT_PREFIX=payrecon.*."}, 2, "RECONCILER_RELAY_SUBJECT_PREFIX"},
		{"no stream captures the subjects", []string{"RECONCILER_RELAY_SUBJECT_PREFIX=nostream" + strconv.FormatInt(time.Now().UnixNano(), 36) + "."}, 2, "nats stream add"},
		{"duplicate window shorter than the retry horizon", []string{"RECONCILER_RELAY_SUBJECT_PREFIX=" + short.Prefix}, 2, "RECONCILER_RELAY_RETRY_HORIZON"},
		{"retry horizon below the ack timeout", []string{"RECONCILER_RELAY_RETRY_HORIZON=1s"}, 2, "RECONCILER_RELAY_RETRY_HORIZON"},
		{"NATS down", []string{"RECONCILER_RELAY_URL=nats://127.0.0.1:1"}, 1, "connect to NATS"},
		{"database unreachable", []string{"RECONCILER_DATABASE_URL=postgres://postgres@127.0.0.1:1/x?sslmode=disable"}, 1, "database"},
	}
	for _, c := range cases {
		p := e.run(append(append([]string(nil), e.env...), c.env...), "relay")
		if p.exitCode() != c.code {
			t.Errorf("%s: exit %d, want %d\nstderr:\n%s", c.name, p.exitCode(), c.code, e2eTail(p.stderr.String(), 2000))
			continue
		}
		if !strings.Contains(p.stderr.String()+p.stdout.String(), c.output) {
			t.Errorf("%s: output does not name %q:\n%s", c.name, c.output, e2eTail(p.stderr.String(), 2000))
		}
	}
	if n := e.dispatched(); n != 0 {
		t.Errorf("%d rows marked dispatched by failing runs", n)
	}
	if n := e.stream.Count(t) + short.Count(t); n != 0 {
		t.Errorf("%d messages published by failing runs", n)
	}
}

func TestE2ERelayOnceDispatchesEverythingOnce(t *testing.T) {
	t.Parallel()
	e := newE2ERelayEnv(t, natstest.Options{})
	e.seedOutbox(1500)
	p := e.run(append(e.env, "RECONCILER_RELAY_BATCH=200"), "relay")
	p.expect(t, exitOK)
	if !strings.Contains(p.stdout.String(), "relayed 1500 outbox messages") {
		t.Errorf("stdout: %s", p.stdout.String())
	}
	if n := e.dispatched(); n != 1500 {
		t.Fatalf("%d rows dispatched, want 1500", n)
	}
	e.storedOnce(1500)
	again := e.run(e.env, "relay")
	again.expect(t, exitOK)
	if !strings.Contains(again.stdout.String(), "relayed 0 outbox messages") {
		t.Errorf("second run stdout: %s", again.stdout.String())
	}
}

// The relay is SIGKILLed after JetStream stored its messages but before it heard the
// acknowledgements (a proxy holds NATS's answers), so nothing is marked. The next run
// publishes the same rows again; the stream keeps each once.
func TestE2ERelayKilledBetweenPublishAndMark(t *testing.T) {
	t.Parallel()
	e := newE2ERelayEnv(t, natstest.Options{})
	const rows = 3000
	e.seedOutbox(rows)
	u, err := url.Parse(natstest.URL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := faultproxy.Start(t, u.Host)
	viaProxy := *u
	viaProxy.Host = proxy.Addr()

	p := e.start(append(e.env, "RECONCILER_RELAY_URL="+viaProxy.String(), "RECONCILER_RELAY_BATCH=500",
		"RECONCILER_RELAY_ACK_TIMEOUT=60s", "RECONCILER_RELAY_RETRY_HORIZON=2m"), "relay", "--follow")
	// Hold NATS's answers as soon as the first message is stored: from then on publishes
	// reach the stream but their acknowledgements never reach the relay.
	e2eEventually(t, 30*time.Second, "the first message in the stream", func() bool { return e.stream.Count(t) > 0 })
	proxy.Hold()
	// What the relay marks from now on is only what NATS acknowledged before the hold (a
	// whole first batch, on a busy machine). Kill it once its marking has stopped for a
	// second with more stored than marked: messages whose acknowledgements it never hears.
	marked, since := -1, time.Now()
	e2eEventually(t, 30*time.Second, "a batch stored but not acknowledged", func() bool {
		if n := e.dispatched(); n != marked {
			marked, since = n, time.Now()
			return false
		}
		return time.Since(since) >= time.Second && e.stream.Count(t) > uint64(marked)
	})
	p.kill()
	stored, marked := e.stream.Count(t), e.dispatched()
	if stored <= uint64(marked) {
		t.Fatalf("after SIGKILL: %d stored, %d marked; want some stored but unmarked", stored, marked)
	}
	proxy.Restore()

	again := e.run(e.env, "relay")
	again.expect(t, exitOK)
	if n := e.dispatched(); n != rows {
		t.Fatalf("%d rows dispatched after the second run, want %d", n, rows)
	}
	e.storedOnce(rows)
	if !strings.Contains(again.stdout.String(), "already in the stream") || strings.Contains(again.stdout.String(), "(0 already in the stream)") {
		t.Errorf("second run found no duplicates: %s", again.stdout.String())
	}
}

// relay --follow: a row inserted later is relayed at once (NOTIFY), SIGTERM exits 0, and a
// lost database ends it with exit 1.
func TestE2ERelayFollow(t *testing.T) {
	t.Parallel()
	e := newE2ERelayEnv(t, natstest.Options{})
	u, err := url.Parse(e.db.URL)
	if err != nil {
		t.Fatal(err)
	}
	pgProxy := faultproxy.Start(t, u.Host)
	viaProxy := *u
	viaProxy.Host = pgProxy.Addr()
	env := append(e.env, "RECONCILER_RELAY_POLL=1h") // only the NOTIFY can wake it in time

	p := e.start(env, "relay", "--follow")
	e2eEventually(t, 30*time.Second, "the relay to follow", func() bool {
		return strings.Contains(p.stdout.String(), "following the outbox")
	})
	e.seedOutbox(3)
	e2eEventually(t, 10*time.Second, "3 messages relayed", func() bool { return e.dispatched() == 3 })
	p.signal(t, syscall.SIGTERM)
	p.wait(t, 30*time.Second)
	p.expect(t, exitOK)
	e.storedOnce(3)

	lost := e.start(append(env, "RECONCILER_DATABASE_URL="+viaProxy.String(), "RECONCILER_RELAY_POLL=100ms"), "relay", "--follow")
	e2eEventually(t, 30*time.Second, "the relay to follow", func() bool {
		return strings.Contains(lost.stdout.String(), "following the outbox")
	})
	pgProxy.Cut()
	lost.wait(t, 60*time.Second)
	lost.expect(t, exitFailed)
}

// serve --relay relays rows as they are inserted (NOTIFY, no poll) and stops cleanly on SIGTERM.
func TestE2EServeRelay(t *testing.T) {
	t.Parallel()
	e := newE2ERelayEnv(t, natstest.Options{})
	p, _ := e.startServe(append(e.env, "RECONCILER_RELAY=true", "RECONCILER_RELAY_POLL=1h")...)
	e.seedOutbox(2)
	e2eEventually(t, 10*time.Second, "2 messages relayed by serve", func() bool { return e.dispatched() == 2 })
	e.storedOnce(2)
	p.signal(t, syscall.SIGTERM)
	p.wait(t, 30*time.Second)
	p.expect(t, exitOK)
}
