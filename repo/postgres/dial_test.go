package postgres_test

import (
	"context"
	"net/url"
	"testing"
	"time"

	"github.com/payrecon/payrecon/internal/faultproxy"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/repotest"
)

// A PostgreSQL that stops answering without closing the connection (toxiproxy's timeout
// toxic: bytes dropped, connection kept) must cost a statement its deadline, not the
// worker its life: the statement fails, and once the path heals the pool answers again on
// a fresh connection. Without the deadline the read blocks forever (a cancelled context
// sends its cancel request down the same dead path).
func TestOpenWithTimeoutSurvivesHalfOpen(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	px := faultproxy.StartToxic(t, u.Host)
	u.Host = px.Addr()
	pool, err := postgres.OpenWithTimeout(t.Context(), u.String(), 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	answers := func(what string) {
		t.Helper()
		// Every read has 300 ms: a fresh session through the proxy on a machine busy with the
		// rest of the suite can take longer to start. What must hold is that the pool
		// answers again, not that its first try beats the deadline.
		var err error
		for try := 1; try <= 20; try++ {
			var one int
			if err = pool.GetContext(t.Context(), &one, `SELECT 1`); err == nil && one == 1 {
				return
			}
			t.Logf("%s, try %d: %v", what, try, err)
			time.Sleep(250 * time.Millisecond)
		}
		t.Fatalf("%s: no answer in 20 tries: %v", what, err)
	}
	answers("through a healthy proxy")

	for _, stream := range []string{"downstream", "upstream"} {
		half := px.Add(t, "timeout", stream, map[string]int64{"timeout": 0})
		done := make(chan error, 1)
		go func() {
			var n int
			// The guard is the test's, far above the deadline: only a hang reaches it.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			done <- pool.GetContext(ctx, &n, `SELECT 2`)
		}()
		select {
		case err := <-done:
			if err == nil {
				t.Fatalf("%s half-open: the statement succeeded through a path that drops every byte", stream)
			}
			t.Logf("%s half-open: %v", stream, err)
		case <-time.After(30 * time.Second):
			t.Fatalf("%s half-open: the statement still waits after 30 s with a 300 ms deadline", stream)
		}
		px.Remove(t, half)
		answers("after the " + stream + " path healed")
	}
}
