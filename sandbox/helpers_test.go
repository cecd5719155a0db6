package sandbox_test

import (
	"net/http/httptest"
	"sync"
	"testing"

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
	sb, err := sandbox.New(sandbox.Options{Keys: testKeys(t)})
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
