package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/repotest"
	"github.com/payrecon/payrecon/sandbox"
)

// The service providers of the provider tests: an Alipay third-party app and a WeChat Pay
// service provider, two sub-merchants each. Generated once per test binary.
var (
	e2eProvidersOnce sync.Once
	e2eProvidersSet  sandbox.Accounts
	e2eProvidersErr  error
)

const (
	e2eISVAppID = "2021000122609009"
	e2eSPMchID  = "1900009109"
)

func e2eProviders(t *testing.T) sandbox.Accounts {
	t.Helper()
	e2eProvidersOnce.Do(func() {
		isv, err := sandbox.GenerateAlipayAccount(e2eISVAppID, "2088621000009009", false, 2048)
		if err != nil {
			e2eProvidersErr = err
			return
		}
		isv.SubMerchants = []string{"2021000122609101", "2021000122609102"}
		sp, err := sandbox.GenerateWechatAccount(e2eSPMchID, "wx9999999999999991", sandbox.WechatModePublicKey, 2048)
		if err != nil {
			e2eProvidersErr = err
			return
		}
		sp.SubMerchants = []string{"1900009201", "1900009202"}
		e2eProvidersSet = sandbox.Accounts{Alipay: []sandbox.AlipayAccount{isv}, WechatPay: []sandbox.WechatAccount{sp}}
	})
	if e2eProvidersErr != nil {
		t.Fatal(e2eProvidersErr)
	}
	return e2eProvidersSet
}

// TestE2EServiceProviderSubMerchants: a world configured through an accounts file that the
// sandbox writes, with an Alipay third-party app and a WeChat Pay service provider calling
// for two sub-merchants each. run repairs and closes the sub-merchants' orders through the
// partner calls, each under its own merchant id, and counts in the metrics it pushes the
// pending orders of sub-merchants no provider lists (never those of the listed ones); serve
// applies their provider-signed callbacks; statement --merchant reconciles one
// sub-merchant's own bill.
func TestE2EServiceProviderSubMerchants(t *testing.T) {
	t.Parallel()
	e, _ := newE2EAccountsWorld(t, e2eProviders(t), 200)
	sb := e.sb
	subs := []e2eAccount{
		{reconcile.Alipay, "2021000122609101", "alipay sub-merchant"}, {reconcile.Alipay, "2021000122609102", "alipay sub-merchant"},
		{reconcile.WechatPay, "1900009201", "wechatpay sub-merchant"}, {reconcile.WechatPay, "1900009202", "wechatpay sub-merchant"},
	}
	for i, a := range subs {
		e.seedPaidFor(a, fmt.Sprintf("sub-run-%d", i), int64(1500+i), e2eAgo(10*time.Minute))
		e.seedPaidFor(a, fmt.Sprintf("sub-cb-%d", i), int64(2500+i), e2eAgo(10*time.Second))
		// Never paid and long expired: closed.
		repotest.InsertOrder(t, e.db, repotest.Order{Platform: string(a.platform), MerchantID: a.merchant, OutTradeNo: fmt.Sprintf("sub-gone-%d", i),
			AmountMinor: 700, Status: "PENDING", CreatedAgo: 5 * time.Hour})
	}

	// Pending orders of a sub-merchant on each platform that no provider lists: no pass here
	// checks them, so the run counts them.
	unlisted := map[string]float64{"wechatpay:1900009299": 2, "alipay:2021000122609199": 1}
	for account, n := range unlisted {
		platform, merchant, _ := strings.Cut(account, ":")
		for j := range int(n) {
			repotest.InsertOrder(t, e.db, repotest.Order{Platform: platform, MerchantID: merchant, OutTradeNo: fmt.Sprintf("unlisted-%s-%d", merchant, j),
				AmountMinor: 900, Status: "PENDING", CreatedAgo: 10 * time.Minute})
		}
	}
	gw := newPushCatcher(t)

	e.run([]string{"RECONCILER_PUSHGATEWAY_URL=" + gw.url}, "run").expect(t, 0)
	if got := gw.unconfigured(t); !maps.Equal(got, unlisted) {
		t.Errorf("the run pushed payrecon_unconfigured_pending_orders %v, want %v: the unlisted sub-merchants' orders alone", got, unlisted)
	}
	for account := range unlisted {
		platform, merchant, _ := strings.Cut(account, ":")
		if r := e.order(reconcile.Platform(platform), "unlisted-"+merchant+"-0"); r.Status != "PENDING" || r.Events != 0 {
			t.Errorf("an order of the unlisted sub-merchant %s was touched: %+v", merchant, r)
		}
	}
	for i, a := range subs {
		e.expectPaidOnce(a, fmt.Sprintf("sub-run-%d", i))
		if r := e.order(a.platform, fmt.Sprintf("sub-gone-%d", i)); r.Status != "CLOSED" {
			t.Errorf("%s's expired order is %s, want CLOSED", a.merchant, r.Status)
		}
		if n := sb.AccountQueryCount(a.platform, a.merchant); n == 0 {
			t.Errorf("no query was made as sub-merchant %s", a.merchant)
		}
	}

	serve, base := e.startServe()
	// The metrics name each sub-merchant's provider.
	if code, body := getAs(t, serve.admin+"/metrics", ""); code != 200 ||
		!strings.Contains(body, `payrecon_sub_merchant_info{merchant_id="1900009201",platform="wechatpay",provider="`+sandbox.ProviderWechatMchID+`"} 1`) ||
		!strings.Contains(body, `payrecon_sub_merchant_info{merchant_id="2021000122609101",platform="alipay",provider="`+sandbox.ProviderAlipayAppID+`"} 1`) {
		t.Errorf("serve's metrics (HTTP %d) do not name the sub-merchants' providers:\n%s", code, grepLines(body, "payrecon_sub_merchant_info"))
	}
	var cbs []*sandbox.Delivery
	for i, a := range subs {
		d, err := sb.Deliver(context.Background(), sandbox.DeliveryOptions{URL: base + "/notify/" + string(a.platform), Copies: 3, TimeScale: 1000, MaxAttempts: 3},
			sandbox.Callback{Platform: a.platform, OutTradeNo: fmt.Sprintf("sub-cb-%d", i)})
		if err != nil {
			t.Fatal(err)
		}
		cbs = append(cbs, d)
	}
	for i, d := range cbs {
		waitAllAcked(t, context.Background(), d, subs[i].merchant+"'s")
	}
	serve.signal(t, syscall.SIGTERM)
	serve.wait(t, 30*time.Second)
	serve.expect(t, 0)
	for i, a := range subs {
		e.expectPaidOnce(a, fmt.Sprintf("sub-cb-%d", i))
	}

	// One sub-merchant's own bill, the day after.
	sb.PublishBillsEarly(true)
	day := time.Now().In(time.FixedZone("CST", 8*3600)).Format("2006-01-02")
	st := e.run(nil, "statement", "--date", day, "--platform", "wechatpay", "--merchant", "1900009201")
	st.expect(t, 0)
	if !strings.Contains(st.stdout.String(), "wechatpay:1900009201") || strings.Contains(st.stdout.String(), "1900009202") {
		t.Errorf("statement --merchant 1900009201 did not reconcile that sub-merchant alone:\n%s", st.stdout.String())
	}
	if n := e.count(`SELECT count(*) FROM statement_days WHERE merchant_id = '1900009201'`); n != 1 {
		t.Errorf("%d statement days saved for the sub-merchant, want 1", n)
	}
}

// grepLines is the lines of s that hold word.
func grepLines(s, word string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, word) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// pushCatcher plays the Pushgateway for `run`: it keeps the metric families of each push.
type pushCatcher struct {
	url    string
	mu     sync.Mutex
	pushes []map[string]*dto.MetricFamily
}

func newPushCatcher(t *testing.T) *pushCatcher {
	t.Helper()
	pc := &pushCatcher{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fams := map[string]*dto.MetricFamily{}
		dec := expfmt.NewDecoder(r.Body, expfmt.ResponseFormat(r.Header))
		for {
			mf := &dto.MetricFamily{}
			err := dec.Decode(mf)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			fams[mf.GetName()] = mf
		}
		pc.mu.Lock()
		pc.pushes = append(pc.pushes, fams)
		pc.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	pc.url = srv.URL
	return pc
}

// unconfigured is payrecon_unconfigured_pending_orders of the last push, by
// "platform:merchant_id"; it fails the test when nothing was pushed.
func (pc *pushCatcher) unconfigured(t *testing.T) map[string]float64 {
	t.Helper()
	pc.mu.Lock()
	defer pc.mu.Unlock()
	if len(pc.pushes) == 0 {
		t.Fatal("the run pushed no metrics")
	}
	out := map[string]float64{}
	for _, m := range pc.pushes[len(pc.pushes)-1]["payrecon_unconfigured_pending_orders"].GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		out[labels["platform"]+":"+labels["merchant_id"]] = m.GetGauge().GetValue()
	}
	return out
}

// A provider's sub-merchants start only as fast as its budget uses them, end to end: with
// 300 of them due (more than a pass runs at once) and the provider at 50 calls/s, the orders
// taken at any moment stay near the two bunches the budget keeps waiting (8 calls), where
// starting every loop at once would lease 256. Every order is still repaired.
func TestE2EProviderSubMerchantsStartAsItsBudgetUsesThem(t *testing.T) {
	t.Parallel()
	const subs, qps = 300, 50
	sp, err := sandbox.GenerateWechatAccount("1900009309", "wx9999999999999309", sandbox.WechatModePublicKey, 2048)
	if err != nil {
		t.Fatal(err)
	}
	for i := range subs {
		sp.SubMerchants = append(sp.SubMerchants, fmt.Sprintf("17%08d", i))
	}
	e, _ := newE2EAccountsWorld(t, sandbox.Accounts{WechatPay: []sandbox.WechatAccount{sp}}, qps)
	for i, sub := range sp.SubMerchants {
		e.sb.SetScenario(reconcile.WechatPay, fmt.Sprintf("SUB-%d", i), sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 1000, MerchantID: sub})
	}
	e.db.MustExec(`INSERT INTO payment_orders (platform, merchant_id, out_trade_no, amount_minor, status, created_at)
		SELECT 'wechatpay', '17' || lpad(g::text, 8, '0'), 'SUB-' || g, 1000, 'PENDING', now() - interval '10 minutes'
		FROM generate_series(0, $1 - 1) g`, subs)

	p := e.start(nil, "run")
	most, samples := 0, 0
	for !p.exited() {
		most = max(most, e.count(`SELECT count(*) FROM payment_orders WHERE lease_until > now()`))
		samples++
		time.Sleep(20 * time.Millisecond)
	}
	p.expect(t, 0)
	// The pass said once, in JSON, that it held the provider's accounts back (the cleanup
	// checks that no line of it names a key twice).
	if n := strings.Count(p.stderr.String(), `"budget_owner":"1900009309"`); n != 1 {
		t.Fatalf("%d JSON log lines name the provider's held budget, want 1", n)
	}
	expectAllPaid(e, subs)
	t.Logf("at most %d orders taken at once (%d samples over %s)", most, samples, p.took.Round(time.Millisecond))
	if most > 64 {
		t.Fatalf("%d orders taken at once for a provider at %d calls/s; want them started as its budget uses them (at most 64)", most, qps)
	}
}

// repeatedLogKey finds the first JSON log line that names a key twice: zerolog writes what it
// is given, and log stores such as Elasticsearch refuse a document with a duplicate field.
// Lines that are not JSON objects (a killed process's last, cut short) are skipped.
func repeatedLogKey(logs string) (key, line string) {
	for _, line := range strings.Split(logs, "\n") {
		if !strings.HasPrefix(line, "{") {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(line))
		if _, err := dec.Token(); err != nil {
			continue
		}
		seen := map[string]bool{}
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				break
			}
			k, _ := tok.(string)
			if seen[k] {
				return k, line
			}
			seen[k] = true
			var v json.RawMessage
			if dec.Decode(&v) != nil {
				break
			}
		}
	}
	return "", ""
}
