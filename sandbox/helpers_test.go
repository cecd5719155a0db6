package sandbox_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/payrecon/payrecon/platformclient/alipay"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/sandbox"
)

var (
	keysOnce sync.Once
	keys     *sandbox.Keys
	keysErr  error
)

// testKeys generates one key set per test binary: RSA key generation is the slow part.
func testKeys(t testing.TB) *sandbox.Keys {
	t.Helper()
	keysOnce.Do(func() { keys, keysErr = sandbox.GenerateKeys(2048) })
	if keysErr != nil {
		t.Fatal(keysErr)
	}
	return keys
}

// newSandbox starts a sandbox on a loopback httptest server; both stop with the test.
func newSandbox(t testing.TB) (*sandbox.Sandbox, string) {
	t.Helper()
	return serveSandbox(t, sandbox.Options{})
}

// serveSandbox is newSandbox with options; the test keys are filled in.
func serveSandbox(t testing.TB, opts sandbox.Options) (*sandbox.Sandbox, string) {
	t.Helper()
	opts.Keys = testKeys(t)
	sb, err := sandbox.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(sb)
	t.Cleanup(func() {
		sb.Close() // releases hanging handlers first, so srv.Close does not wait for them
		srv.Close()
	})
	return sb, srv.URL
}

// deliverOne delivers cb once to an endpoint that keeps it and acknowledges it as its
// platform wants, and returns the callback's headers and body as they arrived.
func deliverOne(t *testing.T, sb *sandbox.Sandbox, cb sandbox.Callback) (http.Header, []byte) {
	t.Helper()
	var mu sync.Mutex
	var headers []http.Header
	var bodies [][]byte
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		headers, bodies = append(headers, r.Header), append(bodies, b)
		mu.Unlock()
		if cb.Platform == reconcile.Alipay {
			_, _ = io.WriteString(w, alipay.NotifySuccess)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer hook.Close()
	ctx := context.Background()
	d, err := sb.Deliver(ctx, sandbox.DeliveryOptions{URL: hook.URL}, cb)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 1 {
		t.Fatalf("%d deliveries of %s %s, want 1", len(bodies), cb.Platform, cb.OutTradeNo)
	}
	return headers[0], bodies[0]
}
