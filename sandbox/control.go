package sandbox

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/reconcile"
)

// The control API, mounted under /sandbox/ (all bodies JSON):
//
//	GET    /sandbox/                                  identity, serial, public key id, WeChat Pay merchants (no secrets)
//	PUT    /sandbox/scenarios/{platform}/{no}         body: Scenario
//	GET    /sandbox/scenarios/{platform}/{no}         the order's scenario
//	POST   /sandbox/scenarios                         body: [{"platform","out_trade_no", Scenario fields...}]
//	PUT    /sandbox/faults/{platform}                 body: Fault (platform-wide; {} clears)
//	DELETE /sandbox/faults/{platform}
//	PUT    /sandbox/qps/{platform}                    body: {"qps": 5} (0 removes the cap)
//	GET    /sandbox/counts                            {"alipay":{"queries":N,"orders":{"X":{"queries":n,"closes":m}}},...}
//	GET    /sandbox/counts/{platform}/{no}            {"queries":n,"closes":m,"last_answer_digest":"..."}
//	POST   /sandbox/refunds                           body: RefundSpec; answers the Refund made
//	PUT    /sandbox/refunds/{platform}/{no}           body: {"outcome":"SUCCESS"}: settle a PROCESSING or ABNORMAL refund
//	GET    /sandbox/refunds/{platform}/{no}           the refund
//	GET    /sandbox/refunds/{platform}?day=YYYY-MM-DD&merchant_id=   {"refunds":[...]}: RefundsOfDay
//	POST   /sandbox/callbacks                         body: DeliveryOptions fields + "callbacks":[Callback] + "wait":bool
//	POST   /sandbox/reset                             forget scenarios, refunds, faults, caps and counts
//
// Errors answer 400 with {"error":"..."}.
func (s *Sandbox) mountControl(mux *http.ServeMux) {
	mux.HandleFunc("GET /sandbox/{$}", s.ctlInfo)
	mux.HandleFunc("PUT /sandbox/scenarios/{platform}/{no}", s.ctlPutScenario)
	mux.HandleFunc("GET /sandbox/scenarios/{platform}/{no}", s.ctlGetScenario)
	mux.HandleFunc("POST /sandbox/scenarios", s.ctlPostScenarios)
	mux.HandleFunc("PUT /sandbox/faults/{platform}", s.ctlPutFault)
	mux.HandleFunc("DELETE /sandbox/faults/{platform}", s.ctlDeleteFault)
	mux.HandleFunc("PUT /sandbox/qps/{platform}", s.ctlPutQPS)
	mux.HandleFunc("GET /sandbox/counts", s.ctlCounts)
	mux.HandleFunc("GET /sandbox/counts/{platform}/{no}", s.ctlOrderCounts)
	mux.HandleFunc("POST /sandbox/refunds", s.ctlPostRefund)
	mux.HandleFunc("PUT /sandbox/refunds/{platform}/{no}", s.ctlSettleRefund)
	mux.HandleFunc("GET /sandbox/refunds/{platform}/{no}", s.ctlGetRefund)
	mux.HandleFunc("GET /sandbox/refunds/{platform}", s.ctlRefundsOfDay)
	mux.HandleFunc("POST /sandbox/callbacks", s.ctlCallbacks)
	mux.HandleFunc("POST /sandbox/reset", s.ctlReset)
	s.mountBillControl(mux)
}

func (s *Sandbox) ctlInfo(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{
		"identity":                s.id,
		"wechatpay_serial_no":     s.keys.WechatMerchantSerial,
		"wechatpay_public_key_id": s.keys.WechatPublicKeyID,
		"alipay_gateway_path":     "/gateway.do",
		"wechatpay_paths":         []string{"/v3/pay/transactions/out-trade-no/{out_trade_no}", "/v3/pay/transactions/id/{transaction_id}", "/v3/pay/transactions/out-trade-no/{out_trade_no}/close", "/v3/refund/domestic/refunds/{out_refund_no}", "/v3/certificates"},
		"wechatpay_merchants":     s.wechatMerchantInfo(),
		"bill_paths":              []string{alipayBillFilePath, "/v3/bill/tradebill", wechatBillFilePath, "/sandbox/bills/{platform}/{day}", "/sandbox/bills/{platform}/spoil"},
	})
}

func (s *Sandbox) ctlPutScenario(w http.ResponseWriter, r *http.Request) {
	p, ok := pathPlatform(w, r)
	if !ok {
		return
	}
	var sc Scenario
	if !readJSON(w, r, &sc) {
		return
	}
	if _, err := ParseState(string(sc.State)); err != nil {
		writeErr(w, err)
		return
	}
	s.SetScenario(p, r.PathValue("no"), sc)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Sandbox) ctlGetScenario(w http.ResponseWriter, r *http.Request) {
	p, ok := pathPlatform(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, s.Scenario(p, r.PathValue("no")))
}

// scenarioEntry is one element of a bulk scenario upload.
type scenarioEntry struct {
	Platform   reconcile.Platform `json:"platform"`
	OutTradeNo string             `json:"out_trade_no"`
	Scenario
}

func (s *Sandbox) ctlPostScenarios(w http.ResponseWriter, r *http.Request) {
	var entries []scenarioEntry
	if !readJSON(w, r, &entries) {
		return
	}
	for i, e := range entries {
		if _, err := reconcile.ParsePlatform(string(e.Platform)); err != nil {
			writeErr(w, fmt.Errorf("entry %d: %w", i, err))
			return
		}
		if e.OutTradeNo == "" {
			writeErr(w, fmt.Errorf("entry %d: out_trade_no is required", i))
			return
		}
		if _, err := ParseState(string(e.State)); err != nil {
			writeErr(w, fmt.Errorf("entry %d: %w", i, err))
			return
		}
	}
	for _, e := range entries {
		s.SetScenario(e.Platform, e.OutTradeNo, e.Scenario)
	}
	writeJSON(w, http.StatusOK, map[string]int{"scenarios": len(entries)})
}

func (s *Sandbox) ctlPutFault(w http.ResponseWriter, r *http.Request) {
	p, ok := pathPlatform(w, r)
	if !ok {
		return
	}
	var f Fault
	if !readJSON(w, r, &f) {
		return
	}
	s.SetFault(p, f)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Sandbox) ctlDeleteFault(w http.ResponseWriter, r *http.Request) {
	p, ok := pathPlatform(w, r)
	if !ok {
		return
	}
	s.SetFault(p, Fault{})
	w.WriteHeader(http.StatusNoContent)
}

func (s *Sandbox) ctlPutQPS(w http.ResponseWriter, r *http.Request) {
	p, ok := pathPlatform(w, r)
	if !ok {
		return
	}
	var body struct {
		QPS float64 `json:"qps"`
	}
	if !readJSON(w, r, &body) {
		return
	}
	s.SetQPSCap(p, body.QPS)
	w.WriteHeader(http.StatusNoContent)
}

type orderCounts struct {
	Queries          int    `json:"queries"`
	Closes           int    `json:"closes"`
	LastAnswerDigest string `json:"last_answer_digest,omitempty"`
}

func (s *Sandbox) ctlCounts(w http.ResponseWriter, _ *http.Request) {
	type platformCounts struct {
		Queries int                    `json:"queries"`
		Orders  map[string]orderCounts `json:"orders"`
	}
	s.mu.Lock()
	out := map[reconcile.Platform]*platformCounts{}
	for _, p := range reconcile.Platforms() {
		out[p] = &platformCounts{Queries: s.perPlat[p], Orders: map[string]orderCounts{}}
	}
	for k, n := range s.queries {
		c := out[k.platform].Orders[k.outTradeNo]
		c.Queries = n
		out[k.platform].Orders[k.outTradeNo] = c
	}
	for k, n := range s.closes {
		c := out[k.platform].Orders[k.outTradeNo]
		c.Closes = n
		out[k.platform].Orders[k.outTradeNo] = c
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func (s *Sandbox) ctlOrderCounts(w http.ResponseWriter, r *http.Request) {
	p, ok := pathPlatform(w, r)
	if !ok {
		return
	}
	no := r.PathValue("no")
	writeJSON(w, http.StatusOK, orderCounts{Queries: s.QueryCount(p, no), Closes: s.CloseCount(p, no), LastAnswerDigest: s.LastAnswerDigest(p, no)})
}

func (s *Sandbox) ctlCallbacks(w http.ResponseWriter, r *http.Request) {
	var body struct {
		DeliveryOptions
		Callbacks []Callback `json:"callbacks"`
		Wait      bool       `json:"wait"`
	}
	if !readJSON(w, r, &body) {
		return
	}
	ctx := context.Background() // bounded by the sandbox's lifetime, not this request's
	if body.Wait {
		ctx = r.Context()
	}
	d, err := s.Deliver(ctx, body.DeliveryOptions, body.Callbacks...)
	if err != nil {
		writeErr(w, err)
		return
	}
	if !body.Wait {
		writeJSON(w, http.StatusAccepted, map[string]int{"callbacks": len(body.Callbacks)})
		return
	}
	results, err := d.Wait(r.Context())
	if err != nil {
		return // the caller left
	}
	writeJSON(w, http.StatusOK, map[string]any{"results": results})
}

func (s *Sandbox) ctlPostRefund(w http.ResponseWriter, r *http.Request) {
	var spec RefundSpec
	if !readJSON(w, r, &spec) {
		return
	}
	ref, err := s.AddRefund(spec)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ref)
}

func (s *Sandbox) ctlSettleRefund(w http.ResponseWriter, r *http.Request) {
	p, ok := pathPlatform(w, r)
	if !ok {
		return
	}
	var body struct {
		Outcome RefundOutcome `json:"outcome"`
	}
	if !readJSON(w, r, &body) {
		return
	}
	ref, err := s.SettleRefund(p, r.PathValue("no"), body.Outcome)
	if err != nil {
		writeErr(w, err)
		return
	}
	writeJSON(w, http.StatusOK, ref)
}

func (s *Sandbox) ctlGetRefund(w http.ResponseWriter, r *http.Request) {
	p, ok := pathPlatform(w, r)
	if !ok {
		return
	}
	ref, found := s.RefundOf(p, r.PathValue("no"))
	if !found {
		writeErr(w, fmt.Errorf("%s has no refund %q", p, r.PathValue("no")))
		return
	}
	writeJSON(w, http.StatusOK, ref)
}

func (s *Sandbox) ctlRefundsOfDay(w http.ResponseWriter, r *http.Request) {
	p, ok := pathPlatform(w, r)
	if !ok {
		return
	}
	day, err := time.ParseInLocation(time.DateOnly, r.URL.Query().Get("day"), platformclient.ChinaTime)
	if err != nil {
		writeErr(w, fmt.Errorf("day: want YYYY-MM-DD"))
		return
	}
	refunds := s.RefundsOfDay(p, r.URL.Query().Get("merchant_id"), day)
	if refunds == nil {
		refunds = []Refund{}
	}
	writeJSON(w, http.StatusOK, map[string][]Refund{"refunds": refunds})
}

func (s *Sandbox) ctlReset(w http.ResponseWriter, _ *http.Request) {
	s.Reset()
	w.WriteHeader(http.StatusNoContent)
}

func pathPlatform(w http.ResponseWriter, r *http.Request) (reconcile.Platform, bool) {
	p, err := reconcile.ParsePlatform(r.PathValue("platform"))
	if err != nil {
		writeErr(w, err)
		return "", false
	}
	return p, true
}

func readJSON(w http.ResponseWriter, r *http.Request, v any) bool {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		writeErr(w, fmt.Errorf("request body: %w", err))
		return false
	}
	return true
}

func writeErr(w http.ResponseWriter, err error) {
	writeJSON(w, http.StatusBadRequest, map[string]string{"error": err.Error()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
