package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/httpapi"
	"github.com/payrecon/payrecon/platformclient/alipay"
	"github.com/payrecon/payrecon/platformclient/wechatpay"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/redis"
	"github.com/payrecon/payrecon/repo/repotest"
	"github.com/payrecon/payrecon/sandbox"
)

// Callbacks through the real mux and the real apply path over a real database and Redis:
// the sandbox signs (and for WeChat Pay encrypts) every body as the platforms do.

var (
	keysOnce sync.Once
	keys     *sandbox.Keys
	keysErr  error
)

func sandboxKeys(t *testing.T) *sandbox.Keys {
	t.Helper()
	keysOnce.Do(func() { keys, keysErr = sandbox.GenerateKeys(2048) })
	if keysErr != nil {
		t.Fatal(keysErr)
	}
	return keys
}

// bench is one test's callback port, database, claims and sandbox.
type bench struct {
	t       *testing.T
	db      *repotest.DB
	store   *postgres.Store
	redis   *repotest.Redis
	applier *reconcile.Applier
	sb      *sandbox.Sandbox
	url     string
	mu      sync.Mutex
	counted map[string]int // "platform result"
}

func newBench(t *testing.T, notifyWait time.Duration) *bench {
	t.Helper()
	b := &bench{t: t, db: repotest.NewDB(t), redis: repotest.NewRedis(t), counted: map[string]int{}}
	b.store = postgres.NewStore(b.db.DB)
	rc, err := redis.NewClient(b.redis.URL, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rc.Close() })
	b.applier = reconcile.NewApplier(b.store, redis.NewClaimer(rc, redis.ClaimerOptions{}, zerolog.Nop()),
		reconcile.ApplierSettings{ClaimPrefix: b.redis.Prefix}, zerolog.Nop())
	if b.sb, err = sandbox.New(sandbox.Options{Keys: sandboxKeys(t)}); err != nil {
		t.Fatal(err)
	}
	k, id := b.sb.Keys(), b.sb.Identity()
	nv, err := wechatpay.NewNotifyVerifier(&k.WechatPlatformKey.PublicKey, k.WechatPublicKeyID, k.WechatAPIv3Key, nil)
	if err != nil {
		t.Fatal(err)
	}
	mux := httpapi.NewCallbackMux(httpapi.Callbacks{
		Settler:    b.applier,
		NotifyWait: notifyWait,
		Alipay: map[string]httpapi.AlipayNotifyReader{id.AlipayAppID: func(body []byte) (reconcile.Notification, error) {
			return alipay.ParseNotify(body, &k.AlipayPlatformKey.PublicKey)
		}},
		Wechat: []httpapi.WechatNotifyReader{httpapi.NewWechatVerifier(id.WechatMchID, k.WechatPublicKeyID, nv)},
		Count: func(p reconcile.Platform, result string) {
			b.mu.Lock()
			b.counted[string(p)+" "+result]++
			b.mu.Unlock()
		},
		Log: zerolog.Nop(),
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		b.sb.Close()
		srv.Close()
	})
	b.url = srv.URL
	return b
}

func (b *bench) merchant(p reconcile.Platform) string {
	if p == reconcile.Alipay {
		return b.sb.Identity().AlipayAppID
	}
	return b.sb.Identity().WechatMchID
}

// paidOrder makes the trade paid at the platform and PAID in our books.
func (b *bench) paidOrder(p reconcile.Platform, otn string, amount int64) int64 {
	b.t.Helper()
	b.sb.SetScenario(p, otn, sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: amount})
	sc := b.sb.Scenario(p, otn)
	return repotest.InsertOrder(b.t, b.db, repotest.Order{Platform: string(p), MerchantID: b.merchant(p), OutTradeNo: otn, AmountMinor: amount,
		Status: "PAID", PlatformTradeNo: sc.TradeNo, PaidAmountMinor: amount, PaidAt: sc.PaidAt, CreatedAgo: time.Hour})
}

// refund records the merchant's PROCESSING refund and makes the platform refund it.
func (b *bench) refund(p reconcile.Platform, orderID int64, otn, rno string, amount int64) int64 {
	b.t.Helper()
	id, err := b.store.InsertRefund(context.Background(), postgres.NewRefund{OrderID: orderID, OutRefundNo: rno, AmountMinor: amount})
	if err != nil {
		b.t.Fatal(err)
	}
	if _, err := b.sb.Refund(p, otn, rno, amount); err != nil {
		b.t.Fatal(err)
	}
	return id
}

// deliver sends callbacks (copies at once, one attempt each) and returns what was answered.
func (b *bench) deliver(p reconcile.Platform, copies int, cbs ...sandbox.Callback) []sandbox.DeliveryResult {
	b.t.Helper()
	d, err := b.sb.Deliver(context.Background(), sandbox.DeliveryOptions{URL: b.url + "/notify/" + string(p), Copies: copies, MaxAttempts: 1}, cbs...)
	if err != nil {
		b.t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := d.Wait(ctx)
	if err != nil {
		b.t.Fatal(err)
	}
	return res
}

func (b *bench) count(query string, args ...any) int {
	b.t.Helper()
	var n int
	if err := b.db.Get(&n, query, args...); err != nil {
		b.t.Fatal(err)
	}
	return n
}

type moneyRow struct {
	Refund   string `db:"refund_status"`
	Order    string `db:"order_status"`
	Refunded int64  `db:"refunded_minor"`
}

func (b *bench) money(refundID int64) moneyRow {
	b.t.Helper()
	var m moneyRow
	if err := b.db.Get(&m, `SELECT r.status AS refund_status, o.status AS order_status, o.refunded_minor
		FROM payment_refunds r JOIN payment_orders o ON o.id = r.order_id WHERE r.id = $1`, refundID); err != nil {
		b.t.Fatal(err)
	}
	return m
}

// landedOnce: one REFUND_SUCCESS event and one refund.succeeded outbox row for the refund.
func (b *bench) landedOnce(orderID, refundID int64) {
	b.t.Helper()
	if n := b.count(`SELECT count(*) FROM payment_events WHERE order_id = $1 AND refund_id = $2 AND event_type = 'REFUND_SUCCESS' AND source = 'notify'`, orderID, refundID); n != 1 {
		b.t.Fatalf("%d REFUND_SUCCESS events, want 1", n)
	}
	if n := b.count(`SELECT count(*) FROM fulfillment_outbox WHERE order_id = $1 AND refund_id = $2 AND kind = 'refund.succeeded'`, orderID, refundID); n != 1 {
		b.t.Fatalf("%d refund.succeeded outbox rows, want 1", n)
	}
}

func (b *bench) counts(key string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.counted[key]
}

func acked(t *testing.T, results []sandbox.DeliveryResult, want bool) {
	t.Helper()
	for _, r := range results {
		if r.Acked != want {
			t.Fatalf("%+v: acknowledged %v, want %v", r, r.Acked, want)
		}
	}
}

func TestWechatRefundCallbackLandsOnce(t *testing.T) {
	b := newBench(t, time.Second)
	oid := b.paidOrder(reconcile.WechatPay, "WR-1", 9000)
	rid := b.refund(reconcile.WechatPay, oid, "WR-1", "WR-1-1", 3000)
	// Three copies at once, as WeChat Pay's duplicates arrive: each acknowledged, one landing.
	res := b.deliver(reconcile.WechatPay, 3, sandbox.Callback{Platform: reconcile.WechatPay, OutRefundNo: "WR-1-1"})
	if len(res) != 3 {
		t.Fatalf("%d deliveries", len(res))
	}
	acked(t, res, true)
	for _, r := range res {
		if r.LastStatus != http.StatusNoContent {
			t.Fatalf("answered %d, want 204", r.LastStatus)
		}
	}
	if m := b.money(rid); m != (moneyRow{Refund: "SUCCESS", Order: "PAID", Refunded: 3000}) {
		t.Fatalf("after the callback: %+v", m)
	}
	b.landedOnce(oid, rid)
	if n := b.count(`SELECT count(*) FROM reconcile_mismatches`); n != 0 {
		t.Fatalf("%d findings", n)
	}
	if b.counts("wechatpay acked") != 3 {
		t.Fatalf("counted %v", b.counted)
	}
}

// A verified event payrecon does not read is acknowledged and counted, never refused; one
// that does not verify is refused whatever its type.
func TestUnknownEventIgnored(t *testing.T) {
	b := newBench(t, time.Second)
	k := b.sb.Keys()
	body := []byte(`{"id":"EV-1","create_time":"2024-03-01T10:20:31+08:00","resource_type":"encrypt-resource","event_type":"COMPLAINT.CREATE",` +
		`"summary":"投诉","resource":{"original_type":"complaint","algorithm":"AEAD_AES_256_GCM","ciphertext":"AAAA","associated_data":"complaint","nonce":"n"}}`)
	post := func(key any) int {
		t.Helper()
		h := http.Header{}
		signer := k.WechatPlatformKey
		if key != nil {
			signer = k.WechatMerchantKey // someone else's key
		}
		if err := wechatpay.SignResponse(h, signer, k.WechatPublicKeyID, time.Now(), body); err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, b.url+"/notify/wechatpay", strings.NewReader(string(body)))
		req.Header = h
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		return resp.StatusCode
	}
	if code := post(nil); code != http.StatusNoContent || b.counts("wechatpay ignored") != 1 {
		t.Fatalf("answered %d, counted %v; want 204 and one ignored", code, b.counted)
	}
	if code := post("other"); code != http.StatusUnauthorized || b.counts("wechatpay refused_signature") != 1 {
		t.Fatalf("badly signed: %d, counted %v; want 401", code, b.counted)
	}
}

// Alipay's refund notification names the trade's running total: a partial refund lands its
// own amount, and the refund that empties the trade comes as TRADE_CLOSED, which lands the
// refund and makes the order REFUNDED: not a close, no finding.
func TestAlipayRefundNotifications(t *testing.T) {
	cases := []struct {
		name    string
		refunds []int64 // of a 100.00 order, each delivered in turn
		order   string
	}{
		{"partial", []int64{3000}, "PAID"},
		{"full at once, TRADE_CLOSED", []int64{10000}, "REFUNDED"},
		{"partial, then the rest, TRADE_CLOSED", []int64{3000, 7000}, "REFUNDED"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newBench(t, time.Second)
			otn := fmt.Sprintf("AR-%d", i)
			oid := b.paidOrder(reconcile.Alipay, otn, 10000)
			var total int64
			for j, amount := range tc.refunds {
				rno := fmt.Sprintf("%s-%d", otn, j+1)
				rid := b.refund(reconcile.Alipay, oid, otn, rno, amount)
				res := b.deliver(reconcile.Alipay, 1, sandbox.Callback{Platform: reconcile.Alipay, OutRefundNo: rno})
				acked(t, res, true)
				total += amount
				want := moneyRow{Refund: "SUCCESS", Order: "PAID", Refunded: total}
				if j == len(tc.refunds)-1 {
					want.Order = tc.order
				}
				if m := b.money(rid); m != want {
					t.Fatalf("after refund %s: %+v, want %+v", rno, m, want)
				}
				b.landedOnce(oid, rid)
			}
			if n := b.count(`SELECT count(*) FROM reconcile_mismatches`); n != 0 {
				t.Fatalf("%d findings", n)
			}
			if n := b.count(`SELECT count(*) FROM payment_events WHERE order_id = $1 AND event_type = 'CLOSED'`, oid); n != 0 {
				t.Fatal("the refunded order was closed")
			}
			wantRefunded := 0
			if tc.order == "REFUNDED" {
				wantRefunded = 1
			}
			if n := b.count(`SELECT count(*) FROM payment_events WHERE order_id = $1 AND event_type = 'REFUNDED'`, oid); n != wantRefunded {
				t.Fatalf("%d REFUNDED events, want %d", n, wantRefunded)
			}
		})
	}
}

// The second refund's notification first: its running total does not split onto it yet, so
// it is refused ("fail") and Alipay's retry lands it once the first refund has.
func TestAlipayRunningTotalOutOfOrder(t *testing.T) {
	b := newBench(t, time.Second)
	oid := b.paidOrder(reconcile.Alipay, "AO-1", 10000)
	first := b.refund(reconcile.Alipay, oid, "AO-1", "AO-1-1", 3000)
	second := b.refund(reconcile.Alipay, oid, "AO-1", "AO-1-2", 7000)
	acked(t, b.deliver(reconcile.Alipay, 1, sandbox.Callback{Platform: reconcile.Alipay, OutRefundNo: "AO-1-2"}), false)
	if m := b.money(second); m.Refund != "PROCESSING" || b.counts("alipay refused_pending") != 1 {
		t.Fatalf("out of order: %+v, counted %v", m, b.counted)
	}
	acked(t, b.deliver(reconcile.Alipay, 1, sandbox.Callback{Platform: reconcile.Alipay, OutRefundNo: "AO-1-1"}), true)
	acked(t, b.deliver(reconcile.Alipay, 1, sandbox.Callback{Platform: reconcile.Alipay, OutRefundNo: "AO-1-2"}), true)
	if m := b.money(second); m != (moneyRow{Refund: "SUCCESS", Order: "REFUNDED", Refunded: 10000}) {
		t.Fatalf("after the retry: %+v", m)
	}
	b.landedOnce(oid, first)
	b.landedOnce(oid, second)
}

// A refund's claim held by another handler: the callback waits for it like a payment's
// does, applies once the holder lets go, and is refused when the hold outlasts the wait.
func TestRefundCallbackWaitsForAHeldClaim(t *testing.T) {
	for _, tc := range []struct {
		name    string
		release time.Duration // when the holder lets go; 0: never
		wait    time.Duration
		ack     bool
	}{
		{"released while waiting", 150 * time.Millisecond, 2 * time.Second, true},
		{"held past the wait", 0, 100 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newBench(t, tc.wait)
			oid := b.paidOrder(reconcile.WechatPay, "WH-1", 5000)
			rid := b.refund(reconcile.WechatPay, oid, "WH-1", "WH-1-1", 5000)
			key := b.applier.RefundClaimKey(reconcile.WechatPay, b.sb.Scenario(reconcile.WechatPay, "WH-1").TradeNo, "WH-1-1")
			ctx := context.Background()
			if err := b.redis.Client.Set(ctx, key, "PROCESSING", time.Minute).Err(); err != nil {
				t.Fatal(err)
			}
			if tc.release > 0 {
				time.AfterFunc(tc.release, func() { b.redis.Client.Del(ctx, key) })
			}
			res := b.deliver(reconcile.WechatPay, 1, sandbox.Callback{Platform: reconcile.WechatPay, OutRefundNo: "WH-1-1"})
			acked(t, res, tc.ack)
			want := moneyRow{Refund: "PROCESSING", Order: "PAID"}
			if tc.ack {
				want = moneyRow{Refund: "SUCCESS", Order: "REFUNDED", Refunded: 5000}
				b.landedOnce(oid, rid)
			} else if res[0].LastStatus != http.StatusInternalServerError || b.counts("wechatpay refused_busy") != 1 {
				t.Fatalf("held: %+v, counted %v; want 500 refused_busy", res[0], b.counted)
			}
			if m := b.money(rid); m != want {
				t.Fatalf("%+v, want %+v", m, want)
			}
		})
	}
}

// Payments still take their own path.
func TestPaymentCallbackStillLands(t *testing.T) {
	b := newBench(t, time.Second)
	b.sb.SetScenario(reconcile.WechatPay, "WP-1", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 4200})
	// created_at: the column's default, now().
	id := repotest.InsertOrder(t, b.db, repotest.Order{Platform: "wechatpay", MerchantID: b.merchant(reconcile.WechatPay), OutTradeNo: "WP-1",
		AmountMinor: 4200, Status: "PENDING"})
	acked(t, b.deliver(reconcile.WechatPay, 2, sandbox.Callback{Platform: reconcile.WechatPay, OutTradeNo: "WP-1"}), true)
	if n := b.count(`SELECT count(*) FROM payment_events WHERE order_id = $1 AND event_type = 'PAID'`, id); n != 1 {
		t.Fatalf("%d PAID events", n)
	}
}
