package sandbox_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/platformclient/alipay"
	"github.com/payrecon/payrecon/platformclient/wechatpay"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/sandbox"
	"github.com/payrecon/payrecon/statement"
)

// The bill clients against the sandbox: the bill is made from the same store queries answer
// from, travels with real signatures, and every spoil reaches the reader as a rejection.

// billNow is the fixed clock of these tests: 11:00 on 2 December in China, after both
// platforms publish 1 December's bill.
var billNow = time.Date(2026, 12, 2, 11, 0, 0, 0, platformclient.ChinaTime)

var billDay = time.Date(2026, 12, 1, 0, 0, 0, 0, platformclient.ChinaTime)

type billClient interface {
	DownloadBill(ctx context.Context, day time.Time, dir string) (platformclient.BillInfo, error)
}

// countingBudget counts the calls the policy paces.
type countingBudget struct{ n atomic.Int64 }

func (b *countingBudget) Wait(context.Context) error { b.n.Add(1); return nil }

type billHarness struct {
	platform    reconcile.Platform
	merchant    func(sb *sandbox.Sandbox) string
	publishHour int
	newClient   func(t *testing.T, sb *sandbox.Sandbox, url string, budget platformclient.Budget) billClient
}

var billHarnesses = []billHarness{
	{
		platform: reconcile.Alipay, publishHour: alipay.BillPublishHour,
		merchant: func(sb *sandbox.Sandbox) string { return sb.Identity().AlipayAppID },
		newClient: func(t *testing.T, sb *sandbox.Sandbox, url string, budget platformclient.Budget) billClient {
			cfg := sb.AlipayConfig(url)
			cfg.Now = func() time.Time { return billNow }
			cfg.Tuning = platformclient.Tuning{BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond, Budget: budget}
			c, err := alipay.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return c
		},
	},
	{
		platform: reconcile.WechatPay, publishHour: wechatpay.BillPublishHour,
		merchant: func(sb *sandbox.Sandbox) string { return sb.Identity().WechatMchID },
		newClient: func(t *testing.T, sb *sandbox.Sandbox, url string, budget platformclient.Budget) billClient {
			cfg := sb.WechatPayConfig(url)
			cfg.Now = func() time.Time { return billNow }
			cfg.Tuning = platformclient.Tuning{BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond, Budget: budget}
			c, err := wechatpay.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			return c
		},
	},
}

// newBillSandbox starts a sandbox on billNow's clock with a day of trades: B1 paid, B2 paid
// and refunded that day outside the refund API (a portal refund), B3 paid the next day, B4
// still open, B5 another account's, B6 paid; and refunds made through the refund API: RB1-1
// (B1, 0.40, succeeded that day), RB1-2 (B1, 0.10, made late that day, succeeded the next),
// RB6-1 (B6, 0.70, still processing), RB6-2 (B6, 0.20, closed).
func newBillSandbox(t *testing.T) (*sandbox.Sandbox, string) {
	t.Helper()
	sb, url := serveSandbox(t, sandbox.Options{Now: func() time.Time { return billNow }})
	at := func(h int) time.Time { return billDay.Add(time.Duration(h) * time.Hour) }
	for _, p := range []reconcile.Platform{reconcile.Alipay, reconcile.WechatPay} {
		sb.SetScenario(p, "B1", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 100, PaidAt: at(10)})
		sb.SetScenario(p, "B2", sandbox.Scenario{State: sandbox.StateRefunded, AmountMinor: 250, PaidAt: at(11), RefundedAt: at(12)})
		sb.SetScenario(p, "B3", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 300, PaidAt: at(25)})
		sb.SetScenario(p, "B4", sandbox.Scenario{State: sandbox.StateOpen, AmountMinor: 400})
		sb.SetScenario(p, "B5", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 500, PaidAt: at(9), MerchantID: "someone-else"})
		sb.SetScenario(p, "B6", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 700, PaidAt: at(8)})
		for _, r := range []sandbox.RefundSpec{
			{OutTradeNo: "B1", OutRefundNo: "RB1-1", AmountMinor: 40, CreatedAt: at(13)},
			{OutTradeNo: "B1", OutRefundNo: "RB1-2", AmountMinor: 10, CreatedAt: at(23), SucceededAt: at(25)},
			{OutTradeNo: "B6", OutRefundNo: "RB6-1", AmountMinor: 70, CreatedAt: at(14), Outcome: sandbox.RefundProcessing},
			{OutTradeNo: "B6", OutRefundNo: "RB6-2", AmountMinor: 20, CreatedAt: at(15), Outcome: sandbox.RefundClosed},
		} {
			r.Platform = p
			if _, err := sb.AddRefund(r); err != nil {
				t.Fatal(err)
			}
		}
	}
	return sb, url
}

// billLine is what a bill line must say, in the bill's order.
type billLine struct {
	no       string
	kind     reconcile.BillLineKind
	amount   int64
	refundNo string // refunds: the merchant's number ("RF"+no for a portal refund)
	status   string // refunds: 退款状态 (WeChat Pay only)
}

// wantBillLines is newBillSandbox's day as each platform's bill lists it: Alipay lists a
// refund on the day it succeeded, WeChat Pay on the day it was made, with its status.
func wantBillLines(p reconcile.Platform) []billLine {
	want := []billLine{{"B6", reconcile.BillPayment, 700, "", ""}, {"B1", reconcile.BillPayment, 100, "", ""},
		{"B2", reconcile.BillPayment, 250, "", ""}, {"B2", reconcile.BillRefund, 250, "RFB2", ""}, {"B1", reconcile.BillRefund, 40, "RB1-1", ""}}
	if p == reconcile.WechatPay {
		want[3].status, want[4].status = "SUCCESS", "SUCCESS"
		want = append(want, billLine{"B6", reconcile.BillRefund, 70, "RB6-1", "PROCESSING"}, billLine{"B1", reconcile.BillRefund, 10, "RB1-2", "SUCCESS"})
	}
	return want
}

// checkBillLines compares a bill's lines with want: numbers, amounts, the trade number the
// queries answer with, and a refund's own numbers (WeChat Pay's refund_id is the refund's).
func checkBillLines(t *testing.T, sb *sandbox.Sandbox, p reconcile.Platform, lines []statement.Line, want []billLine) {
	t.Helper()
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d: %+v", len(lines), len(want), lines)
	}
	for i, w := range want {
		l := lines[i]
		if l.OutTradeNo != w.no || l.Kind != w.kind || l.AmountMinor != w.amount || l.PlatformTradeNo != sb.Scenario(p, w.no).TradeNo ||
			l.RefundNo != w.refundNo || l.RefundStatus != w.status {
			t.Errorf("line %d = %+v, want %+v with the queried trade number", i, l, w)
		}
		ref, ok := sb.RefundOf(p, w.refundNo)
		if ok && (l.PlatformRefundNo != ref.RefundID || (p == reconcile.WechatPay) != (l.PlatformRefundNo != "")) {
			t.Errorf("line %d: platform refund number %q, want %q (WeChat Pay's refund_id; Alipay has none)", i, l.PlatformRefundNo, ref.RefundID)
		}
	}
}

// readBill opens a downloaded bill as the statement run will.
func readBill(info platformclient.BillInfo) ([]statement.Line, error) {
	r, err := statement.Open(info.Platform, info.Path, statement.WithSHA1(info.HashValue))
	if err != nil {
		return nil, err
	}
	defer r.Close()
	var lines []statement.Line
	for {
		l, err := r.Next()
		if errors.Is(err, io.EOF) {
			return lines, nil
		}
		if err != nil {
			return lines, err
		}
		lines = append(lines, l)
	}
}

func TestDownloadBill(t *testing.T) {
	for _, h := range billHarnesses {
		t.Run(string(h.platform), func(t *testing.T) {
			sb, url := newBillSandbox(t)
			budget := &countingBudget{}
			c := h.newClient(t, sb, url, budget)
			dir := t.TempDir()
			info, err := c.DownloadBill(context.Background(), billDay.Add(15*time.Hour), dir)
			if err != nil {
				t.Fatal(err)
			}
			if budget.n.Load() != 2 {
				t.Errorf("%d calls paced by the budget, want 2 (the URL, the download)", budget.n.Load())
			}
			raw, err := os.ReadFile(info.Path)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(raw)
			if info.SHA256 != hex.EncodeToString(sum[:]) || info.Bytes != int64(len(raw)) || filepath.Dir(info.Path) != dir ||
				!info.Day.Equal(billDay) || info.MerchantID != h.merchant(sb) {
				t.Fatalf("info %+v does not describe the file", info)
			}
			if h.platform == reconcile.WechatPay && (!info.Gzip || info.HashType != "SHA1" || len(info.HashValue) != 40 || !bytes.HasPrefix(raw, []byte{0x1f, 0x8b})) {
				t.Fatalf("wechat bill %+v: want gzip with a SHA1", info)
			}
			if h.platform == reconcile.Alipay && (!strings.HasSuffix(info.Path, "_20261201.csv.zip") || !bytes.HasPrefix(raw, []byte("PK"))) {
				t.Fatalf("alipay bill at %s: want the zip named as Alipay names it", info.Path)
			}
			lines, err := readBill(info)
			if err != nil {
				t.Fatal(err)
			}
			checkBillLines(t, sb, h.platform, lines, wantBillLines(h.platform))
			if sb.BillDownloads(h.platform) != 1 {
				t.Errorf("%d downloads served, want 1", sb.BillDownloads(h.platform))
			}
		})
	}
}

func TestDownloadBillNotReady(t *testing.T) {
	for _, h := range billHarnesses {
		t.Run(string(h.platform), func(t *testing.T) {
			sb, url := newBillSandbox(t)
			c := h.newClient(t, sb, url, nil)
			today := billNow
			for _, c2 := range []struct {
				name    string
				day     time.Time
				spoil   bool
				retryAt time.Time
			}{
				{"the day is not over", today, false, platformclient.BillDay(today).AddDate(0, 0, 1).Add(time.Duration(h.publishHour) * time.Hour)},
				{"published late", billDay, true, billNow.Add(15 * time.Minute)},
			} {
				if c2.spoil {
					sb.SetBillSpoil(h.platform, "", sandbox.BillSpoil{NotReady: true})
				}
				dir := t.TempDir()
				_, err := c.DownloadBill(context.Background(), c2.day, dir)
				var nr *platformclient.BillNotReadyError
				if !errors.Is(err, platformclient.ErrBillNotReady) || !errors.As(err, &nr) {
					t.Fatalf("%s: want not ready, got %v", c2.name, err)
				}
				if !nr.RetryAt.Equal(c2.retryAt) || nr.Platform != h.platform || nr.Code == "" {
					t.Fatalf("%s: %+v, want retry at %v", c2.name, nr, c2.retryAt)
				}
				if entries, _ := os.ReadDir(dir); len(entries) != 0 {
					t.Fatalf("%s: %d files left behind", c2.name, len(entries))
				}
			}
		})
	}
}

// TestDownloadBillEarly: with bills published early, today's bill is served at once and
// holds today's trades so far (the demo's statement step relies on it).
func TestDownloadBillEarly(t *testing.T) {
	for _, h := range billHarnesses {
		t.Run(string(h.platform), func(t *testing.T) {
			sb, url := newBillSandbox(t)
			sb.SetScenario(h.platform, "TODAY1", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 300, MerchantID: h.merchant(sb)})
			c := h.newClient(t, sb, url, nil)
			control(t, http.MethodPut, url+"/sandbox/bills/early")
			info, err := c.DownloadBill(context.Background(), billNow, t.TempDir())
			if err != nil {
				t.Fatalf("today's bill published early: %v", err)
			}
			lines, err := readBill(info)
			if err != nil {
				t.Fatal(err)
			}
			// B3 was paid at 01:00 today (newBillSandbox), TODAY1 at 11:00; RB1-2, made
			// yesterday, succeeded at 01:00 today: Alipay lists it today.
			want := []billLine{{"B1", reconcile.BillRefund, 10, "RB1-2", ""}, {"B3", reconcile.BillPayment, 300, "", ""}, {"TODAY1", reconcile.BillPayment, 300, "", ""}}
			if h.platform == reconcile.WechatPay {
				want = want[1:]
			}
			checkBillLines(t, sb, h.platform, lines, want)
			control(t, http.MethodDelete, url+"/sandbox/bills/early")
			if _, err := c.DownloadBill(context.Background(), billNow, t.TempDir()); !errors.Is(err, platformclient.ErrBillNotReady) {
				t.Fatalf("early publication turned off: want not ready, got %v", err)
			}
		})
	}
}

func control(t *testing.T, method, url string) {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("%s %s: %v %v", method, url, resp, err)
	}
	resp.Body.Close()
}

func TestDownloadBillSpoiled(t *testing.T) {
	for _, h := range billHarnesses {
		for _, c2 := range []struct {
			name   string
			spoil  sandbox.BillSpoil
			why    string
			alipay bool // the spoil exists on Alipay too
		}{
			{"totals that disagree", sandbox.BillSpoil{SkewTotalsMinor: 1}, "the lines add up to", true},
			{"a truncated file", sandbox.BillSpoil{Truncate: true}, "cut short", true},
			{"a wrong hash", sandbox.BillSpoil{WrongHash: true}, "SHA1", false},
		} {
			if h.platform == reconcile.Alipay && !c2.alipay {
				continue
			}
			t.Run(string(h.platform)+"/"+c2.name, func(t *testing.T) {
				sb, url := newBillSandbox(t)
				sb.SetBillSpoil(h.platform, h.merchant(sb), c2.spoil)
				info, err := h.newClient(t, sb, url, nil).DownloadBill(context.Background(), billDay, t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				_, err = readBill(info)
				if !errors.Is(err, statement.ErrRejected) || !strings.Contains(err.Error(), c2.why) {
					t.Fatalf("want a rejection mentioning %q, got %v", c2.why, err)
				}
			})
		}
	}
}

func TestDownloadBillPolicy(t *testing.T) {
	for _, h := range billHarnesses {
		t.Run(string(h.platform)+"/a gateway error is retried", func(t *testing.T) {
			sb, url := newBillSandbox(t)
			sb.SetFault(h.platform, sandbox.Fault{HTTPStatus: 502, Times: 1})
			if _, err := h.newClient(t, sb, url, nil).DownloadBill(context.Background(), billDay, t.TempDir()); err != nil {
				t.Fatalf("one 502 should be retried: %v", err)
			}
		})
		t.Run(string(h.platform)+"/a bad signature is never downloaded", func(t *testing.T) {
			sb, url := newBillSandbox(t)
			sb.SetFault(h.platform, sandbox.Fault{BadSignature: true})
			dir := t.TempDir()
			_, err := h.newClient(t, sb, url, nil).DownloadBill(context.Background(), billDay, dir)
			if reconcile.PlatformErrorKindOf(err) != reconcile.KindBadSignature {
				t.Fatalf("want a bad signature, got %v", err)
			}
			if entries, _ := os.ReadDir(dir); len(entries) != 0 || sb.BillDownloads(h.platform) != 0 {
				t.Fatalf("%d files, %d downloads after a bad signature", len(entries), sb.BillDownloads(h.platform))
			}
		})
	}
}

func TestBillControlEndpoints(t *testing.T) {
	sb, url := newBillSandbox(t)
	req, _ := http.NewRequest(http.MethodPut, url+"/sandbox/bills/wechatpay/spoil", strings.NewReader(`{"not_ready":true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("PUT spoil: %v %v", resp, err)
	}
	resp.Body.Close()
	c := billHarnesses[1].newClient(t, sb, url, nil)
	if _, err := c.DownloadBill(context.Background(), billDay, t.TempDir()); !errors.Is(err, platformclient.ErrBillNotReady) {
		t.Fatalf("after the spoil: %v", err)
	}
	req, _ = http.NewRequest(http.MethodDelete, url+"/sandbox/bills/wechatpay/spoil", nil)
	if resp, err = http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusNoContent {
		t.Fatalf("DELETE spoil: %v %v", resp, err)
	}
	resp.Body.Close()
	for _, p := range []string{"alipay", "wechatpay"} {
		resp, err := http.Get(url + "/sandbox/bills/" + p + "/2026-12-01")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s bill: %v %v", p, resp, err)
		}
		path := filepath.Join(t.TempDir(), "bill")
		f, _ := os.Create(path)
		io.Copy(f, resp.Body)
		f.Close()
		resp.Body.Close()
		lines, err := readBill(platformclient.BillInfo{Platform: reconcile.Platform(p), Path: path, HashValue: resp.Header.Get("X-Bill-SHA1")})
		if err != nil || len(lines) != len(wantBillLines(reconcile.Platform(p))) {
			t.Fatalf("%s bill from the control API: %d lines, %v", p, len(lines), err)
		}
	}
}

func TestBillNotReadyMessage(t *testing.T) {
	sb, url := newBillSandbox(t)
	_, err := billHarnesses[0].newClient(t, sb, url, nil).DownloadBill(context.Background(), billNow, t.TempDir())
	want := "alipay permanent error 40004/isp.bill_not_exist: alipay bill of 2026-12-02 for " + sb.Identity().AlipayAppID +
		" not published yet (Business Failed 账单不存在); retry after 2026-12-03T09:00:00+08:00"
	if err == nil || err.Error() != want {
		t.Fatalf("got  %v\nwant %s", err, want)
	}
}

// An Alipay download URL lives about 30 seconds: one that expired before the download is
// asked for again, a bounded number of times.
func TestAlipayBillURLExpired(t *testing.T) {
	var ticks atomic.Int64
	clock := func() time.Time { return billNow.Add(time.Duration(ticks.Add(1)) * 31 * time.Second) }
	sb, url := serveSandbox(t, sandbox.Options{Now: clock})
	sb.SetScenario(reconcile.Alipay, "B1", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 100, PaidAt: billDay.Add(time.Hour)})
	budget := &countingBudget{}
	_, err := billHarnesses[0].newClient(t, sb, url, budget).DownloadBill(context.Background(), billDay, t.TempDir())
	var pe *reconcile.PlatformError
	if !errors.As(err, &pe) || pe.Code != "URL_EXPIRED" {
		t.Fatalf("want URL_EXPIRED, got %v", err)
	}
	if budget.n.Load() != 4 || sb.BillDownloads(reconcile.Alipay) != 0 {
		t.Fatalf("%d paced calls (want 4: URL, download, twice), %d downloads served", budget.n.Load(), sb.BillDownloads(reconcile.Alipay))
	}
}

// TestWechatDayWithoutTrades: WeChat Pay answers NO_STATEMENT_EXIST for a day on which the
// account had no trades. Before 10:00 the next morning that is "not ready, retry at 10:00";
// from then on it is an empty day (no file). STATEMENT_CREATING stays "not ready", an
// unsigned answer is never evidence, and a day with trades still gets its bill.
func TestWechatDayWithoutTrades(t *testing.T) {
	var now atomic.Pointer[time.Time]
	now.Store(&billNow)
	clock := func() time.Time { return *now.Load() }
	sb, url := serveSandbox(t, sandbox.Options{Now: clock})
	cfg := sb.WechatPayConfig(url)
	cfg.Now, cfg.Tuning = clock, platformclient.Tuning{BackoffBase: time.Millisecond, BackoffMax: 2 * time.Millisecond}
	c, err := wechatpay.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	mch := sb.Identity().WechatMchID
	sb.SetScenario(reconcile.WechatPay, "TRADED", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 100, PaidAt: billDay.AddDate(0, 0, 1).Add(time.Hour)})
	next := func(h, m int) time.Time {
		return billDay.AddDate(0, 0, 1).Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute)
	}
	for _, c2 := range []struct {
		name    string
		day     time.Time
		now     time.Time
		spoil   sandbox.BillSpoil
		fault   sandbox.Fault
		want    string // "empty", "not ready", "bill", "bad signature"
		retryAt time.Time
	}{
		{"09:59 the next day", billDay, next(9, 59), sandbox.BillSpoil{NoStatementWhenEmpty: true}, sandbox.Fault{}, "not ready", next(10, 0)},
		{"10:01 the next day", billDay, next(10, 1), sandbox.BillSpoil{NoStatementWhenEmpty: true}, sandbox.Fault{}, "empty", time.Time{}},
		{"two days later", billDay, next(34, 0), sandbox.BillSpoil{NoStatementWhenEmpty: true}, sandbox.Fault{}, "empty", time.Time{}},
		{"still being made at 10:01", billDay, next(10, 1), sandbox.BillSpoil{NotReady: true, NoStatementWhenEmpty: true}, sandbox.Fault{}, "not ready", next(10, 16)},
		{"unsigned at 10:01", billDay, next(10, 1), sandbox.BillSpoil{NoStatementWhenEmpty: true}, sandbox.Fault{Unsigned: true}, "bad signature", time.Time{}},
		{"a day with trades", billDay.AddDate(0, 0, 1), next(34, 0), sandbox.BillSpoil{NoStatementWhenEmpty: true}, sandbox.Fault{}, "bill", time.Time{}},
		{"an empty day served as a file when asked to", billDay, next(10, 1), sandbox.BillSpoil{}, sandbox.Fault{}, "bill", time.Time{}},
	} {
		t.Run(c2.name, func(t *testing.T) {
			now.Store(&c2.now)
			sb.SetBillSpoil(reconcile.WechatPay, mch, c2.spoil)
			sb.SetFault(reconcile.WechatPay, c2.fault)
			defer sb.SetFault(reconcile.WechatPay, sandbox.Fault{})
			dir := t.TempDir()
			info, err := c.DownloadBill(context.Background(), c2.day, dir)
			entries, _ := os.ReadDir(dir)
			var nr *platformclient.BillNotReadyError
			switch got := errors.As(err, &nr); {
			case c2.want == "not ready":
				if !got || !nr.RetryAt.Equal(c2.retryAt) {
					t.Fatalf("want not ready until %v, got %+v, %v", c2.retryAt, info, err)
				}
			case c2.want == "bad signature":
				if reconcile.PlatformErrorKindOf(err) != reconcile.KindBadSignature || info.Empty {
					t.Fatalf("want a bad signature, got %+v, %v", info, err)
				}
			case err != nil:
				t.Fatal(err)
			case c2.want == "empty":
				if !info.Empty || info.Path != "" || len(entries) != 0 || !info.Day.Equal(billDay) {
					t.Fatalf("want an empty day and no file, got %+v and %d files", info, len(entries))
				}
			default:
				if info.Empty || info.Path == "" {
					t.Fatalf("want a bill file, got %+v", info)
				}
			}
		})
	}
}
