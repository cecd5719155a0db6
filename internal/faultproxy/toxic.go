package faultproxy

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"
)

// Toxic is a toxiproxy proxy run in the test's own process (no toxiproxy server): the
// faults TCP itself can show, added and removed while connections are open. Toxics apply
// to the connections already open and to new ones.
//
// The faults the network tests use, by toxiproxy toxic:
//
//	latency     latency, jitter (ms) on every chunk
//	bandwidth   rate (KB/s)
//	reset_peer  the next chunk resets the connection (RST, after timeout ms)
//	limit_data  bytes, then the connection closes: a cut mid-message or mid-transaction
//	timeout     timeout 0: every byte dropped and the connection kept open (half-open);
//	            timeout N: the same, then closed after N ms
type Toxic struct {
	proxy *toxiproxy.Proxy
	mu    sync.Mutex
	n     int
}

var toxicServerOnce = sync.OnceValue(func() *toxiproxy.ApiServer {
	return toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
})

// StartToxic listens on a free loopback port and forwards to target until the test ends.
func StartToxic(t testing.TB, target string) *Toxic {
	t.Helper()
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()) + "->" + target
	p := toxiproxy.NewProxy(toxicServerOnce(), name, "127.0.0.1:0", target)
	if err := p.Start(); err != nil {
		t.Fatalf("toxiproxy %s: %v", name, err)
	}
	t.Cleanup(p.Stop)
	return &Toxic{proxy: p}
}

// Addr is the proxy's host:port.
func (x *Toxic) Addr() string { return x.proxy.Listen }

// Add adds a toxic on stream "upstream" (client to server) or "downstream" (server to
// client) and returns its name for Remove.
func (x *Toxic) Add(t testing.TB, typ, stream string, attrs map[string]int64) string {
	t.Helper()
	x.mu.Lock()
	x.n++
	name := fmt.Sprintf("%s_%s_%d", typ, stream, x.n)
	x.mu.Unlock()
	body, err := json.Marshal(map[string]any{"name": name, "type": typ, "stream": stream, "toxicity": 1.0, "attributes": attrs})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.proxy.Toxics.AddToxicJson(strings.NewReader(string(body))); err != nil {
		t.Fatalf("toxiproxy: add %s: %v", name, err)
	}
	return name
}

// Remove removes a toxic Add returned.
func (x *Toxic) Remove(t testing.TB, name string) {
	t.Helper()
	if err := x.proxy.Toxics.RemoveToxic(t.Context(), name); err != nil {
		t.Fatalf("toxiproxy: remove %s: %v", name, err)
	}
}

// Clear removes every toxic.
func (x *Toxic) Clear(t testing.TB) {
	x.proxy.Toxics.ResetToxics(t.Context())
}
