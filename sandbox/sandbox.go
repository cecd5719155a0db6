package sandbox

import (
	"crypto/rsa"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"golang.org/x/time/rate"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/platformclient/alipay"
	"github.com/payrecon/payrecon/platformclient/wechatpay"
	"github.com/payrecon/payrecon/reconcile"
)

// Options configure a Sandbox.
type Options struct {
	// Keys to use; nil generates fresh 2048-bit keys (slow: share one set across tests).
	Keys *Keys
	// Identity of the simulated accounts; zero fields take defaults.
	Identity Identity
	Logger   zerolog.Logger
	// Now is the sandbox's clock (signing timestamps, checking WeChat request timestamps).
	Now func() time.Time
	// CallbackClient sends callbacks; default a client with a 5 s timeout (WeChat Pay's).
	CallbackClient *http.Client
	// Accounts are played beside the default account of each platform (the one Keys and
	// Identity describe, in public-key mode).
	Accounts Accounts
}

// Sandbox simulates both platforms. Create it with New; it is an http.Handler.
type Sandbox struct {
	keys     *Keys
	id       Identity
	log      zerolog.Logger
	now      func() time.Time
	cbClient *http.Client
	mux      *http.ServeMux
	wechat   *wechatMerchants // the default merchant and Options.Accounts.WechatPay, by mchid
	closed   chan struct{}
	closeMu  sync.Once
	wg       sync.WaitGroup // callback deliveries
	alipay   *alipayApps    // the Alipay apps played, by app_id (alipay_accounts.go)

	mu         sync.Mutex
	orders     map[orderKey]*order
	byTradeNo  map[orderKey]string        // (platform, trade no) -> out_trade_no
	global     map[accountKey]*faultState // merchant "": every account of the platform
	caps       map[accountKey]*rate.Limiter
	queries    map[orderKey]int
	closes     map[orderKey]int
	perPlat    map[reconcile.Platform]int
	perAcct    map[accountKey]int
	lastDigest map[orderKey]string
	seq        int
	// refunds (refunds.go)
	refunds       map[refundKey]*Refund
	refundQueries map[refundKey]int
	// bills (bills.go)
	billSpoils  map[accountKey]BillSpoil
	billTickets map[string]billTicket
	billServed  map[reconcile.Platform]int
	billsEarly  bool // PublishBillsEarly
}

// New builds a Sandbox.
func New(opts Options) (*Sandbox, error) {
	keys := opts.Keys
	if keys == nil {
		var err error
		if keys, err = GenerateKeys(0); err != nil {
			return nil, err
		}
	}
	if keys.AlipayAppKey == nil || keys.AlipayPlatformKey == nil || keys.WechatMerchantKey == nil ||
		keys.WechatPlatformKey == nil || len(keys.WechatAPIv3Key) != wechatpay.APIv3KeySize ||
		keys.WechatMerchantSerial == "" || keys.WechatPublicKeyID == "" {
		return nil, fmt.Errorf("sandbox: incomplete key set")
	}
	s := &Sandbox{
		keys:     keys,
		id:       opts.Identity.withDefaults(),
		log:      opts.Logger.With().Str("component", "sandbox").Logger(),
		now:      opts.Now,
		cbClient: opts.CallbackClient,
		closed:   make(chan struct{}),
	}
	if s.now == nil {
		s.now = time.Now
	}
	if s.cbClient == nil {
		s.cbClient = &http.Client{Timeout: 5 * time.Second}
	}
	s.resetLocked()
	if err := s.initAlipayApps(opts.Accounts.Alipay); err != nil {
		return nil, err
	}
	var err error
	if s.wechat, err = newWechatMerchants(keys, s.id, opts.Accounts.WechatPay); err != nil {
		return nil, err
	}
	s.mux = http.NewServeMux()
	s.mux.HandleFunc("/gateway.do", s.serveAlipay)
	s.mux.HandleFunc("GET /v3/pay/transactions/out-trade-no/{no}", s.serveWechatQuery)
	s.mux.HandleFunc("GET /v3/pay/transactions/id/{id}", s.serveWechatQuery)
	s.mux.HandleFunc("POST /v3/pay/transactions/out-trade-no/{no}/close", s.serveWechatClose)
	s.mux.HandleFunc("GET /v3/pay/partner/transactions/out-trade-no/{no}", s.serveWechatQuery)
	s.mux.HandleFunc("GET /v3/pay/partner/transactions/id/{id}", s.serveWechatQuery)
	s.mux.HandleFunc("POST /v3/pay/partner/transactions/out-trade-no/{no}/close", s.serveWechatClose)
	s.mux.HandleFunc("GET "+wechatpay.RefundPath+"{no}", s.serveWechatRefundQuery)
	s.mux.HandleFunc("GET "+wechatpay.CertificatesPath, s.serveWechatCertificates)
	s.mux.HandleFunc("GET "+wechatpay.TradeBillPath, s.serveWechatTradeBill)
	s.mux.HandleFunc("GET "+wechatBillFilePath, s.serveWechatBillFile)
	s.mux.HandleFunc("GET "+alipayBillFilePath, s.serveAlipayBillFile)
	s.mountControl(s.mux)
	return s, nil
}

// ServeHTTP routes to the Alipay gateway, WeChat Pay API v3 or the control API.
func (s *Sandbox) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Close releases hanging requests and stops callback deliveries, then waits for them.
func (s *Sandbox) Close() {
	s.closeMu.Do(func() { close(s.closed) })
	s.wg.Wait()
}

// Keys returns the key set (both sides).
func (s *Sandbox) Keys() *Keys { return s.keys }

// Identity returns the simulated accounts.
func (s *Sandbox) Identity() Identity { return s.id }

// AlipayConfig is a ready client configuration for this sandbox at baseURL (the server's
// root URL, e.g. httptest.Server.URL).
func (s *Sandbox) AlipayConfig(baseURL string) alipay.Config {
	return alipay.Config{
		Gateway:         strings.TrimRight(baseURL, "/") + "/gateway.do",
		AppID:           s.id.AlipayAppID,
		PrivateKey:      s.keys.AlipayAppKey,
		AlipayPublicKey: &s.keys.AlipayPlatformKey.PublicKey,
		SellerID:        s.id.AlipaySellerID,
	}
}

// WechatPayConfig is a ready client configuration for this sandbox at baseURL.
func (s *Sandbox) WechatPayConfig(baseURL string) wechatpay.Config {
	return wechatpay.Config{
		BaseURL:           strings.TrimRight(baseURL, "/"),
		MchID:             s.id.WechatMchID,
		SerialNo:          s.keys.WechatMerchantSerial,
		PrivateKey:        s.keys.WechatMerchantKey,
		PlatformPublicKey: &s.keys.WechatPlatformKey.PublicKey,
		PublicKeyID:       s.keys.WechatPublicKeyID,
		APIv3Key:          append([]byte(nil), s.keys.WechatAPIv3Key...),
		AppID:             s.id.WechatAppID,
	}
}

// Env lists the RECONCILER_* settings that point a reconciler at this sandbox.
func (s *Sandbox) Env(baseURL string, files KeyFiles) []string {
	base := strings.TrimRight(baseURL, "/")
	return []string{
		// The sandbox speaks plain http on loopback; production URLs must be https.
		"RECONCILER_ALLOW_INSECURE_PLATFORM=true",
		"RECONCILER_ALIPAY_GATEWAY=" + base + "/gateway.do",
		"RECONCILER_ALIPAY_APP_ID=" + s.id.AlipayAppID,
		"RECONCILER_ALIPAY_PRIVATE_KEY_FILE=" + files.AlipayPrivateKey,
		"RECONCILER_ALIPAY_PUBLIC_KEY_FILE=" + files.AlipayPublicKey,
		"RECONCILER_WECHATPAY_BASE_URL=" + base,
		"RECONCILER_WECHATPAY_MCHID=" + s.id.WechatMchID,
		"RECONCILER_WECHATPAY_SERIAL_NO=" + s.keys.WechatMerchantSerial,
		"RECONCILER_WECHATPAY_PRIVATE_KEY_FILE=" + files.WechatPrivateKey,
		"RECONCILER_WECHATPAY_PUBLIC_KEY_FILE=" + files.WechatPublicKey,
		"RECONCILER_WECHATPAY_PUBLIC_KEY_ID=" + s.keys.WechatPublicKeyID,
		"RECONCILER_WECHATPAY_APIV3_KEY_FILE=" + files.WechatAPIv3Key,
	}
}

// WriteKeyFiles writes this sandbox's key files into dir (see the package WriteKeyFiles).
func (s *Sandbox) WriteKeyFiles(dir string) (KeyFiles, error) {
	return WriteKeyFiles(dir, s.keys, s.id)
}

// SetScenario sets what the platform knows about one order. Trade number and paid time are
// filled in when the state needs them and none was given.
func (s *Sandbox) SetScenario(p reconcile.Platform, outTradeNo string, sc Scenario) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := orderKey{p, outTradeNo}
	if old, ok := s.orders[k]; ok && old.sc.TradeNo != "" {
		delete(s.byTradeNo, orderKey{p, old.sc.TradeNo})
	}
	if sc.State == "" {
		sc.State = StateNotFound
	}
	if sc.TradeNo == "" && sc.State != StateNotFound {
		sc.TradeNo = s.newTradeNoLocked(p)
	}
	if sc.PaidAt.IsZero() && (sc.State == StatePaid || sc.State == StateRefunded) {
		sc.PaidAt = s.now().Truncate(time.Second)
	}
	o := &order{sc: sc}
	if sc.Fault != nil {
		o.fault = newFaultState(*sc.Fault)
	}
	s.orders[k] = o
	if sc.TradeNo != "" {
		s.byTradeNo[orderKey{p, sc.TradeNo}] = outTradeNo
	}
}

// Scenario returns an order's scenario (StateNotFound when none was set).
func (s *Sandbox) Scenario(p reconcile.Platform, outTradeNo string) Scenario {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.orders[orderKey{p, outTradeNo}]; ok {
		return o.sc
	}
	return Scenario{State: StateNotFound}
}

// SetFault sets a platform-wide fault, applied to every request for which no order fault
// applies. A zero Fault clears it.
func (s *Sandbox) SetFault(p reconcile.Platform, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setFaultLocked(accountKey{p, ""}, f)
}

// SetAccountFault sets a fault for one account's requests (after the order's own fault,
// before the platform-wide one). A zero Fault clears it.
func (s *Sandbox) SetAccountFault(p reconcile.Platform, merchantID string, f Fault) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.setFaultLocked(accountKey{p, merchantID}, f)
}

func (s *Sandbox) setFaultLocked(k accountKey, f Fault) {
	if f.IsZero() {
		delete(s.global, k)
		return
	}
	s.global[k] = newFaultState(f)
}

// SetQPSCap makes the platform throttle above qps requests per second (a token bucket with
// a one-second burst), answering as the platform does. Zero removes the cap.
func (s *Sandbox) SetQPSCap(p reconcile.Platform, qps float64) {
	s.SetAccountQPSCap(p, "", qps)
}

// SetAccountQPSCap throttles one account (merchant id) above qps, as the platforms limit
// each merchant account; merchant "" caps the whole platform. Zero removes the cap.
func (s *Sandbox) SetAccountQPSCap(p reconcile.Platform, merchantID string, qps float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := accountKey{p, merchantID}
	if qps <= 0 {
		delete(s.caps, k)
		return
	}
	s.caps[k] = rate.NewLimiter(rate.Limit(qps), max(1, int(qps)))
}

// QueryCount is how many query requests reached the sandbox for one order.
func (s *Sandbox) QueryCount(p reconcile.Platform, outTradeNo string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.queries[orderKey{p, outTradeNo}]
}

// CloseCount is how many close requests reached the sandbox for one order.
func (s *Sandbox) CloseCount(p reconcile.Platform, outTradeNo string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closes[orderKey{p, outTradeNo}]
}

// PlatformQueryCount is how many query requests reached the platform in all.
func (s *Sandbox) PlatformQueryCount(p reconcile.Platform) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.perPlat[p]
}

// AccountQueryCount is how many query requests one account (merchant id) sent.
func (s *Sandbox) AccountQueryCount(p reconcile.Platform, merchantID string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.perAcct[accountKey{p, merchantID}]
}

// LastAnswerDigest is the hex SHA-256 of the last complete body answered about an order:
// what a client's Result.RawDigest must equal.
func (s *Sandbox) LastAnswerDigest(p reconcile.Platform, outTradeNo string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lastDigest[orderKey{p, outTradeNo}]
}

// Reset forgets every scenario, refund, fault, cap and count.
func (s *Sandbox) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resetLocked()
	s.wechat.resetCounts()
}

func (s *Sandbox) resetLocked() {
	s.orders = map[orderKey]*order{}
	s.byTradeNo = map[orderKey]string{}
	s.global = map[accountKey]*faultState{}
	s.caps = map[accountKey]*rate.Limiter{}
	s.perAcct = map[accountKey]int{}
	s.queries = map[orderKey]int{}
	s.closes = map[orderKey]int{}
	s.perPlat = map[reconcile.Platform]int{}
	s.lastDigest = map[orderKey]string{}
	s.refunds = map[refundKey]*Refund{}
	s.refundQueries = map[refundKey]int{}
	s.billSpoils = map[accountKey]BillSpoil{}
	s.billTickets = map[string]billTicket{}
	s.billServed = map[reconcile.Platform]int{}
	s.billsEarly = false
}

// request is what both protocol handlers learn about one call before answering.
type request struct {
	platform reconcile.Platform
	merchant string // the account the request authenticates as (app_id, mchid), or the sub-merchant it calls for
	provider string // the service provider calling for merchant ("" for a merchant's own call)
	key      orderKey
	isQuery  bool
	// refund is the out_refund_no a refund query asks about (key is then its trade's, so
	// the trade's fault applies): counted as the refund's query, not the trade's.
	refund string
}

// accountKey names one merchant account of a platform; merchant "" stands for all of them.
type accountKey struct {
	platform reconcile.Platform
	merchant string
}

// admit counts the request, applies the QPS cap and picks the fault. throttled reports a
// request over the cap.
func (s *Sandbox) admit(rq request) (f Fault, hasFault, throttled bool) {
	defer func() {
		s.log.Debug().Str("platform", string(rq.platform)).Str("out_trade_no", rq.key.outTradeNo).Bool("query", rq.isQuery).
			Bool("fault", hasFault).Bool("throttled", throttled).Msg("sandbox request")
	}()
	s.mu.Lock()
	defer s.mu.Unlock()
	if rq.refund != "" {
		s.refundQueries[refundKey{rq.platform, rq.refund}]++
	} else if rq.key.outTradeNo != "" {
		if rq.isQuery {
			s.queries[rq.key]++
		} else {
			s.closes[rq.key]++
		}
	}
	acct := accountKey{rq.platform, rq.merchant}
	if rq.isQuery {
		s.perPlat[rq.platform]++
		s.perAcct[acct]++
	}
	// Both caps are asked, so each bucket sees every request it governs.
	if lim, ok := s.caps[acct]; ok && rq.merchant != "" && !lim.Allow() {
		throttled = true
	}
	if lim, ok := s.caps[accountKey{rq.platform, rq.provider}]; ok && rq.provider != "" && !lim.Allow() {
		throttled = true
	}
	if lim, ok := s.caps[accountKey{rq.platform, ""}]; ok && !lim.Allow() {
		throttled = true
	}
	if o, ok := s.orders[rq.key]; ok {
		if f, ok := o.fault.take(); ok {
			return f, true, throttled
		}
	}
	if rq.merchant != "" {
		if f, ok := s.global[acct].take(); ok {
			return f, true, throttled
		}
	}
	if f, ok := s.global[accountKey{rq.platform, ""}].take(); ok {
		return f, true, throttled
	}
	return Fault{}, false, throttled
}

// lookup returns an order's scenario by out_trade_no.
func (s *Sandbox) lookup(p reconcile.Platform, outTradeNo string) Scenario {
	s.mu.Lock()
	defer s.mu.Unlock()
	if o, ok := s.orders[orderKey{p, outTradeNo}]; ok {
		return o.sc
	}
	return Scenario{State: StateNotFound}
}

// outTradeNoOf resolves a platform trade number.
func (s *Sandbox) outTradeNoOf(p reconcile.Platform, tradeNo string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	no, ok := s.byTradeNo[orderKey{p, tradeNo}]
	return no, ok
}

// closeOrder moves an open order to closed; it returns the state found.
func (s *Sandbox) closeOrder(p reconcile.Platform, outTradeNo string) State {
	s.mu.Lock()
	defer s.mu.Unlock()
	o, ok := s.orders[orderKey{p, outTradeNo}]
	if !ok {
		return StateNotFound
	}
	st := o.sc.State
	if st == StateOpen {
		o.sc.State = StateClosed
		o.sc.RawState = ""
	}
	return st
}

func (s *Sandbox) recordDigest(k orderKey, body []byte) {
	if k.outTradeNo == "" {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastDigest[k] = platformclient.Digest(body)
}

func (s *Sandbox) newTradeNoLocked(p reconcile.Platform) string {
	s.seq++
	day := s.now().In(platformclient.ChinaTime).Format("20060102")
	if p == reconcile.WechatPay {
		return fmt.Sprintf("4200%s%014d", day, s.seq) // transaction_id: 28 digits
	}
	return fmt.Sprintf("%s22%018d", day, s.seq) // trade_no: 28 digits
}

// otherKey is the "someone else's key" a BadSignature fault signs with.
func otherKey(keys *Keys, p reconcile.Platform) *rsa.PrivateKey {
	if p == reconcile.Alipay {
		return keys.AlipayAppKey
	}
	return keys.WechatMerchantKey
}
