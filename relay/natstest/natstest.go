// Package natstest gives each test its own JetStream stream on a real NATS server, with its
// own name and subject prefix, so tests run in parallel and twice in a row. A missing
// server fails the test with the fix to apply: integration tests never skip.
package natstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// DefaultURL is used when RECONCILER_TEST_NATS_URL is unset.
const DefaultURL = "nats://127.0.0.1:4222"

// URL is the NATS server (with JetStream) tests use.
func URL() string {
	if u := os.Getenv("RECONCILER_TEST_NATS_URL"); u != "" {
		return u
	}
	return DefaultURL
}

const howToFix = "run the tests with `make test` (scripts/with-services.sh starts a private nats-server -js when none answers), " +
	"or point RECONCILER_TEST_NATS_URL at a NATS server with JetStream enabled"

// Stream is one test's stream.
type Stream struct {
	JS     jetstream.JetStream
	Stream jetstream.Stream
	Name   string
	// Prefix is unique to the test, ends with a dot and is captured by the stream: use it
	// as the relay's subject prefix.
	Prefix string
}

// Options shape the stream.
type Options struct {
	Duplicates time.Duration // the duplicate window; default 2m
	File       bool          // file storage instead of memory
}

// Connect connects to the test server and closes the connection when the test ends.
func Connect(t testing.TB) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(URL(), nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("NATS not reachable at %s: %v\n%s", URL(), err, howToFix)
	}
	t.Cleanup(nc.Close)
	return nc
}

// NewStream creates a stream capturing "<unique prefix>>" and deletes it when the test ends.
func NewStream(t testing.TB, o Options) *Stream {
	t.Helper()
	nc := Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("JetStream: %v", err)
	}
	id := randomHex(6)
	s := &Stream{JS: js, Name: "PAYRECON_TEST_" + strings.ToUpper(id), Prefix: "test" + id + ".payrecon."}
	cfg := jetstream.StreamConfig{Name: s.Name, Subjects: []string{s.Prefix + ">"}, Storage: jetstream.MemoryStorage, Duplicates: o.Duplicates}
	if o.File {
		cfg.Storage = jetstream.FileStorage
	}
	if cfg.Duplicates == 0 {
		cfg.Duplicates = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s.Stream, err = js.CreateStream(ctx, cfg)
	if err != nil {
		t.Fatalf("create stream %s at %s: %v\n%s", s.Name, URL(), err, howToFix)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, s.Name); err != nil {
			t.Logf("delete stream %s: %v", s.Name, err)
		}
	})
	return s
}

// Count is the number of messages the stream holds.
func (s *Stream) Count(t testing.TB) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := s.Stream.Info(ctx)
	if err != nil {
		t.Fatalf("stream %s info: %v", s.Name, err)
	}
	return info.State.Msgs
}

// Messages returns every message the stream holds, in stream order.
func (s *Stream) Messages(t testing.TB) []*jetstream.RawStreamMsg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	info, err := s.Stream.Info(ctx)
	if err != nil {
		t.Fatalf("stream %s info: %v", s.Name, err)
	}
	out := make([]*jetstream.RawStreamMsg, 0, info.State.Msgs)
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := s.Stream.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("stream %s message %d: %v", s.Name, seq, err)
		}
		out = append(out, m)
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
