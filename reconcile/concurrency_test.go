package reconcile_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/redis"
)

// applyConcurrently fires n identical applies released at the same instant and tallies the
// outcomes.
func applyConcurrently(t *testing.T, a *reconcile.Applier, r func(i int) reconcile.Result, n int) map[reconcile.Outcome]int {
	t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		got   = map[reconcile.Outcome]int{}
		errs  []error
		start = make(chan struct{})
	)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			res, err := a.ApplyResult(context.Background(), r(i), reconcile.ApplyOptions{})
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			got[res.Outcome]++
		}()
	}
	close(start)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d of %d applies failed, first: %v", len(errs), n, errs[0])
	}
	return got
}

func TestConcurrentDuplicateDeliveryAppliesOnce(t *testing.T) {
	t.Parallel()
	for _, mode := range []claimMode{withRedis, dbOnly, redisDown} {
		t.Run(string(mode), func(t *testing.T) {
			t.Parallel()
			b := setup(t, mode)
			id := b.order(orderSpec{otn: "C-64", amount: 8880})
			// Callbacks and reconciler answers race on the same payment.
			got := applyConcurrently(t, b.applier, func(i int) reconcile.Result {
				src := reconcile.SourceNotify
				if i%2 == 1 {
					src = reconcile.SourceReconcile
				}
				return paid("C-64", "T-64", 8880, src)
			}, 64)

			if got[reconcile.OutcomeApplied] != 1 {
				t.Fatalf("applied %d times, want exactly 1 (outcomes %v)", got[reconcile.OutcomeApplied], got)
			}
			rest := got[reconcile.OutcomeDuplicate] + got[reconcile.OutcomeUnchanged] + got[reconcile.OutcomeClaimedElsewhere]
			if rest != 63 {
				t.Fatalf("want the other 63 to be duplicate/unchanged/claimed elsewhere, got %v", got)
			}
			assertPaidOnce(t, b, id, "T-64", 8880)
			if mode == withRedis {
				if v := b.claimValue(reconcile.Alipay, "T-64"); v != "DONE" {
					t.Fatalf("claim key = %q after commit, want DONE", v)
				}
			}
		})
	}
}

// assertPaidOnce checks the exactly-once invariants for one paid order.
func assertPaidOnce(t *testing.T, b *bundle, id int64, tradeNo string, amount int64) {
	t.Helper()
	var row struct {
		Status  string `db:"status"`
		TradeNo string `db:"platform_trade_no"`
		Paid    int64  `db:"paid_amount_minor"`
		Version int64  `db:"version"`
	}
	if err := b.db.Get(&row, `SELECT status, platform_trade_no, paid_amount_minor, version FROM payment_orders WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if row.Status != "PAID" || row.TradeNo != tradeNo || row.Paid != amount || row.Version != 1 {
		t.Fatalf("order = %+v, want PAID %s %d at version 1", row, tradeNo, amount)
	}
	if n := b.count(`SELECT count(*) FROM payment_events WHERE order_id = $1 AND event_type = 'PAID'`, id); n != 1 {
		t.Fatalf("%d PAID events, want 1", n)
	}
	if n := b.events(id); n != 1 {
		t.Fatalf("%d events in all, want 1", n)
	}
	if n := b.count(`SELECT count(*) FROM fulfillment_outbox WHERE order_id = $1 AND kind = 'order.paid'`, id); n != 1 {
		t.Fatalf("%d outbox rows, want 1", n)
	}
	var payload struct {
		OutTradeNo string `json:"out_trade_no"`
		Amount     int64  `json:"amount_minor"`
	}
	var raw []byte
	if err := b.db.Get(&raw, `SELECT payload FROM fulfillment_outbox WHERE order_id = $1`, id); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &payload); err != nil || payload.Amount != amount {
		t.Fatalf("outbox payload %s: %v", raw, err)
	}
}

// --- child processes -------------------------------------------------------------------

const childEnv = "PAYRECON_APPLY_CHILD"

// runChild is the body of a re-executed test binary: "apply" (or "apply-refund") races
// applies against its siblings and prints the tally; "hang" claims and then blocks forever, to be SIGKILLed.
func runChild() int {
	ctx := context.Background()
	db, err := postgres.Open(ctx, os.Getenv("CHILD_DB"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	rc, err := redis.NewClient(os.Getenv("CHILD_REDIS"), 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	lease, _ := time.ParseDuration(os.Getenv("CHILD_LEASE"))
	settings := reconcile.ApplierSettings{ClaimPrefix: os.Getenv("CHILD_PREFIX"), ClaimLease: lease}
	var store reconcile.Store = postgres.NewStore(db)
	if os.Getenv(childEnv) == "hang" {
		store = hangingStore{Store: store}
	}
	a := reconcile.NewApplier(store, redis.NewClaimer(rc, redis.ClaimerOptions{}, zerolog.Nop()), settings, zerolog.Nop())
	r := paid(os.Getenv("CHILD_OTN"), os.Getenv("CHILD_TRADE_NO"), 8880, reconcile.SourceNotify)
	apply := func() (reconcile.Applied, error) { return a.ApplyResult(ctx, r, reconcile.ApplyOptions{}) }
	if os.Getenv(childEnv) == "apply-refund" {
		// The refund of the whole order: its number is the order's with "-1".
		rr := refundResult(r.OutTradeNo, r.PlatformTradeNo, r.OutTradeNo+"-1", 8880, reconcile.RefundStateSuccess, reconcile.SourceNotify)
		apply = func() (reconcile.Applied, error) { return a.ApplyRefundResult(ctx, rr, reconcile.ApplyOptions{}) }
	}

	if os.Getenv(childEnv) == "hang" {
		a.ApplyResult(ctx, r, reconcile.ApplyOptions{}) //nolint:errcheck // never returns
		return 1
	}
	startNs, _ := strconv.ParseInt(os.Getenv("CHILD_START"), 10, 64)
	time.Sleep(time.Until(time.Unix(0, startNs)))
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		out = map[string]int{}
	)
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := apply()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				out["error"]++
				return
			}
			out[string(res.Outcome)]++
		}()
	}
	wg.Wait()
	json.NewEncoder(os.Stdout).Encode(out) //nolint:errcheck
	return 0
}

// hangingStore announces on stdout that the claim is taken, then blocks the transaction
// forever: the process holds a PROCESSING claim when it is killed.
type hangingStore struct{ reconcile.Store }

func (hangingStore) ApplyTransition(context.Context, reconcile.Transition) (bool, error) {
	fmt.Println("claimed")
	select {}
}

func childCmd(t *testing.T, b *bundle, mode string, otn, tradeNo string, lease time.Duration, extra ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+mode, "CHILD_DB="+b.db.URL, "CHILD_REDIS="+b.redis.URL,
		"CHILD_PREFIX="+b.settings.ClaimPrefix, "CHILD_OTN="+otn, "CHILD_TRADE_NO="+tradeNo, "CHILD_LEASE="+lease.String())
	cmd.Env = append(cmd.Env, extra...)
	cmd.Stderr = os.Stderr
	return cmd
}

func TestDuplicateDeliveryAcrossProcessesAppliesOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, withRedis)
	id := b.order(orderSpec{otn: "P-4", amount: 8880})
	start := time.Now().Add(1500 * time.Millisecond).UnixNano()
	total := map[string]int{}
	var cmds []*exec.Cmd
	outs := make([]*bufio.Reader, 4)
	for i := range 4 {
		cmd := childCmd(t, b, "apply", "P-4", "T-P4", time.Minute, fmt.Sprintf("CHILD_START=%d", start))
		pipe, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		outs[i] = bufio.NewReader(pipe)
		cmds = append(cmds, cmd)
	}
	for i, cmd := range cmds {
		var tally map[string]int
		if err := json.NewDecoder(outs[i]).Decode(&tally); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("child %d: %v", i, err)
		}
		for k, v := range tally {
			total[k] += v
		}
	}
	if total["applied"] != 1 || total["error"] != 0 || total["duplicate"]+total["claimed_elsewhere"]+total["unchanged"] != 63 {
		t.Fatalf("4 processes x 16 applies: %v, want exactly one applied and 63 duplicates or held claims", total)
	}
	assertPaidOnce(t, b, id, "T-P4", 8880)
}

func TestKilledHolderBlocksOnlyForTheLease(t *testing.T) {
	t.Parallel()
	b := setup(t, withRedis)
	id := b.order(orderSpec{otn: "K-1", amount: 8880})
	const lease = 1500 * time.Millisecond
	cmd := childCmd(t, b, "hang", "K-1", "T-K1", lease)
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(pipe).ReadString('\n')
	if err != nil || line != "claimed\n" {
		t.Fatalf("child did not claim: %q %v", line, err)
	}
	claimedAt := time.Now()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait() //nolint:errcheck // killed on purpose

	r := paid("K-1", "T-K1", 8880, reconcile.SourceReconcile)
	res, err := b.applier.ApplyResult(context.Background(), r, reconcile.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(claimedAt) < lease && res.Outcome != reconcile.OutcomeClaimedElsewhere {
		t.Fatalf("inside the dead holder's lease: outcome %s, want claimed_elsewhere", res.Outcome)
	}
	// Once the lease (not the 25h DONE window) has run out, the order is repairable.
	deadline := time.Now().Add(10 * time.Second)
	for res.Outcome == reconcile.OutcomeClaimedElsewhere && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		if res, err = b.applier.ApplyResult(context.Background(), r, reconcile.ApplyOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if res.Outcome != reconcile.OutcomeApplied {
		t.Fatalf("after the lease: outcome %s, want applied", res.Outcome)
	}
	if waited := time.Since(claimedAt); waited > lease+5*time.Second {
		t.Fatalf("repair took %s; the lease is %s", waited, lease)
	}
	assertPaidOnce(t, b, id, "T-K1", 8880)
}

// slowStore holds the first transition until told to go: a holder whose lease runs out
// while it is still working.
type slowStore struct {
	reconcile.Store
	once    sync.Once
	entered chan struct{}
	proceed chan struct{}
}

func (s *slowStore) ApplyTransition(ctx context.Context, t reconcile.Transition) (bool, error) {
	first := false
	s.once.Do(func() { first = true })
	if first {
		close(s.entered)
		<-s.proceed
	}
	return s.Store.ApplyTransition(ctx, t)
}

func TestLeaseExpiryWhileHolderWorksStillAppliesOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, withRedis, func(s *reconcile.ApplierSettings) { s.ClaimLease = 300 * time.Millisecond })
	id := b.order(orderSpec{otn: "L-1", amount: 8880})
	slow := &slowStore{Store: b.store, entered: make(chan struct{}), proceed: make(chan struct{})}
	late := b.withStore(slow)
	r := paid("L-1", "T-L1", 8880, reconcile.SourceReconcile)

	type ret struct {
		res reconcile.Applied
		err error
	}
	lateDone := make(chan ret, 1)
	go func() {
		res, err := late.ApplyResult(context.Background(), r, reconcile.ApplyOptions{})
		lateDone <- ret{res, err}
	}()
	<-slow.entered
	// Wait (by polling Redis, not by guessing) until the late holder's lease is gone.
	deadline := time.Now().Add(10 * time.Second)
	for b.claimValue(reconcile.Alipay, "T-L1") != "" {
		if time.Now().After(deadline) {
			t.Fatal("lease never expired")
		}
		time.Sleep(20 * time.Millisecond)
	}
	res, err := b.applier.ApplyResult(context.Background(), r, reconcile.ApplyOptions{})
	if err != nil || res.Outcome != reconcile.OutcomeApplied {
		t.Fatalf("second holder: %v %v, want applied", res.Outcome, err)
	}
	close(slow.proceed)
	got := <-lateDone
	if got.err != nil {
		t.Fatalf("late holder: %v", got.err)
	}
	if got.res.Outcome == reconcile.OutcomeApplied {
		t.Fatal("late holder applied a second time")
	}
	if got.res.Outcome != reconcile.OutcomeUnchanged {
		t.Fatalf("late holder outcome %s, want unchanged (classified as already paid)", got.res.Outcome)
	}
	assertPaidOnce(t, b, id, "T-L1", 8880)
	if v := b.claimValue(reconcile.Alipay, "T-L1"); v != "DONE" {
		t.Fatalf("claim = %q: the late holder's release must not remove DONE", v)
	}
}

func TestDoneMarkWithPendingOrder(t *testing.T) {
	t.Parallel()
	b := setup(t, withRedis)
	id := b.order(orderSpec{otn: "D-1", amount: 8880})
	key := b.applier.ClaimKey(reconcile.Alipay, "T-D1")
	if err := b.redis.Client.Set(context.Background(), key, "DONE", time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	// A callback trusts DONE: answered as a duplicate without touching the order.
	res, err := b.applier.ApplyResult(context.Background(), paid("D-1", "T-D1", 8880, reconcile.SourceNotify), reconcile.ApplyOptions{})
	if err != nil || res.Outcome != reconcile.OutcomeDuplicate {
		t.Fatalf("callback: %v %v, want duplicate", res.Outcome, err)
	}
	if s := b.status(id); s != reconcile.StatusPending {
		t.Fatalf("callback changed the order to %s", s)
	}
	// The reconciler just read PENDING and does not trust DONE: it repairs.
	res, err = b.applier.ApplyResult(context.Background(), paid("D-1", "T-D1", 8880, reconcile.SourceReconcile), reconcile.ApplyOptions{})
	if err != nil || res.Outcome != reconcile.OutcomeApplied {
		t.Fatalf("reconciler: %v %v, want applied", res.Outcome, err)
	}
	assertPaidOnce(t, b, id, "T-D1", 8880)
}

func TestDatabaseFailureMidTransactionLeavesNothingHalfApplied(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		break_ func(t *testing.T, b *bundle) (mend func())
	}{
		{"trigger raises on the outbox insert", func(t *testing.T, b *bundle) func() {
			b.db.MustExec(`CREATE FUNCTION fail_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN RAISE EXCEPTION 'outbox is broken'; END $$`)
			b.db.MustExec(`CREATE TRIGGER fail_outbox BEFORE INSERT ON fulfillment_outbox FOR EACH ROW EXECUTE FUNCTION fail_outbox()`)
			return func() { b.db.MustExec(`DROP TRIGGER fail_outbox ON fulfillment_outbox`) }
		}},
		{"session terminated mid-statement", func(t *testing.T, b *bundle) func() {
			// The outbox insert stalls; meanwhile the test kills every backend running it.
			// database/sql re-sends a statement whose session died of a FATAL error (lib/pq
			// reports it as ErrBadConn), which is safe here because the transition is
			// conditional; so the killer keeps killing until every attempt has failed.
			b.db.MustExec(`CREATE FUNCTION slow_outbox() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN PERFORM pg_sleep(30); RETURN NEW; END $$`)
			b.db.MustExec(`CREATE TRIGGER slow_outbox BEFORE INSERT ON fulfillment_outbox FOR EACH ROW EXECUTE FUNCTION slow_outbox()`)
			stop, stopped := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(stopped)
				for {
					select {
					case <-stop:
						return
					case <-time.After(20 * time.Millisecond):
					}
					b.db.Exec(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity
						WHERE datname = current_database() AND pid <> pg_backend_pid()
						AND query LIKE '%INSERT INTO fulfillment_outbox%' AND state = 'active'`) //nolint:errcheck // best effort, the assertions below judge
				}
			}()
			return func() {
				close(stop)
				<-stopped
				b.db.MustExec(`DROP TRIGGER slow_outbox ON fulfillment_outbox`)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, withRedis)
			id := b.order(orderSpec{otn: "F-1", amount: 8880})
			mend := tc.break_(t, b)
			r := paid("F-1", "T-F1", 8880, reconcile.SourceNotify)
			_, err := b.applier.ApplyResult(context.Background(), r, reconcile.ApplyOptions{})
			if !errors.Is(err, reconcile.ErrRetryable) {
				t.Fatalf("err = %v, want a retryable error", err)
			}
			if s, ev, ob := b.status(id), b.events(id), b.outbox(id); s != reconcile.StatusPending || ev != 0 || ob != 0 {
				t.Fatalf("half-applied: status %s, %d events, %d outbox rows", s, ev, ob)
			}
			if v := b.claimValue(reconcile.Alipay, "T-F1"); v != "" {
				t.Fatalf("claim left behind after the failure: %q", v)
			}
			mend()
			res, err := b.applier.ApplyResult(context.Background(), r, reconcile.ApplyOptions{})
			if err != nil || res.Outcome != reconcile.OutcomeApplied {
				t.Fatalf("retry: %v %v, want applied", res.Outcome, err)
			}
			assertPaidOnce(t, b, id, "T-F1", 8880)
		})
	}
}

func TestCallbackWaitsForAHeldClaim(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		holder  func(b *bundle, key string) // what the other handler does meanwhile
		wantAck bool
		want    reconcile.Outcome
	}{
		{"holder finishes", func(b *bundle, key string) {
			// The other handler commits its transition, then marks DONE.
			o, _ := b.store.FindOrder(context.Background(), reconcile.Alipay, testMerchant, "W-1")
			b.store.ApplyTransition(context.Background(), reconcile.Transition{OrderID: o.ID, From: reconcile.StatusPending, //nolint:errcheck
				To: reconcile.StatusPaid, Platform: reconcile.Alipay, PlatformTradeNo: "T-W1", AmountMinor: 8880,
				Source: reconcile.SourceNotify, Outbox: &reconcile.OutboxMessage{Kind: "order.paid", Payload: map[string]any{"amount_minor": 8880}}})
			b.redis.Client.Set(context.Background(), key, "DONE", time.Hour)
		}, true, reconcile.OutcomeDuplicate},
		{"holder dies, key vanishes", func(b *bundle, key string) { b.redis.Client.Del(context.Background(), key) }, true, reconcile.OutcomeApplied},
		{"holder stays", func(*bundle, string) {}, false, reconcile.OutcomeClaimedElsewhere},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, withRedis)
			id := b.order(orderSpec{otn: "W-1", amount: 8880})
			key := b.applier.ClaimKey(reconcile.Alipay, "T-W1")
			b.redis.Client.Set(context.Background(), key, "PROCESSING", time.Minute)
			go func() {
				time.Sleep(100 * time.Millisecond)
				tc.holder(b, key)
			}()
			res, ack, err := b.applier.ApplyCallback(context.Background(), paid("W-1", "T-W1", 8880, reconcile.SourceNotify), time.Second)
			if err != nil || ack != tc.wantAck || res.Outcome != tc.want {
				t.Fatalf("ack %v outcome %s err %v, want ack %v outcome %s", ack, res.Outcome, err, tc.wantAck, tc.want)
			}
			if tc.wantAck {
				assertPaidOnce(t, b, id, "T-W1", 8880)
			} else if b.status(id) != reconcile.StatusPending {
				t.Fatal("refused callback changed the order")
			}
		})
	}
}
