package sandbox

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/platformclient/wechatpay"
	"github.com/payrecon/payrecon/reconcile"
)

// wechatError is an error answer's HTTP status, code and message.
type wechatError struct {
	status        int
	code, message string
}

// wechatErrors are the real shapes of the errors a Fault.ErrorCode can ask for.
var wechatErrors = map[string]wechatError{
	"PARAM_ERROR":         {400, "PARAM_ERROR", "参数错误"},
	"INVALID_REQUEST":     {400, "INVALID_REQUEST", "无效请求"},
	"ORDERPAID":           {400, "ORDERPAID", "订单已支付"},
	"ORDER_CLOSED":        {400, "ORDER_CLOSED", "订单已关闭"},
	"SIGN_ERROR":          {401, "SIGN_ERROR", "签名错误"},
	"NO_AUTH":             {403, "NO_AUTH", "商户无权限"},
	"RULE_LIMIT":          {403, "RULE_LIMIT", "业务规则限制"},
	"MCH_NOT_EXISTS":      {400, "MCH_NOT_EXISTS", "商户号不存在"},
	"ORDER_NOT_EXIST":     {404, "ORDER_NOT_EXIST", "订单不存在"},
	"RESOURCE_NOT_EXISTS": {404, "RESOURCE_NOT_EXISTS", "退款单不存在"},
	"FREQUENCY_LIMITED":   {429, "FREQUENCY_LIMITED", "频率超限"},
	"SYSTEM_ERROR":        {500, "SYSTEM_ERROR", "系统错误"},
	"BANK_ERROR":          {500, "BANK_ERROR", "银行系统异常"},
}

func wechatErrorFor(code string) wechatError {
	if e, ok := wechatErrors[code]; ok {
		return e
	}
	return wechatError{400, code, code}
}

// wechatCall is an authenticated, admitted WeChat request, or nil if it was answered.
type wechatCall struct {
	key   orderKey
	fault Fault
	body  []byte
	// merchant is the account the Authorization names (nil when it names none the sandbox
	// plays: the answer is then signed as the default merchant's).
	merchant *wechatMerchant
	// namesPublicKey: the request's Wechatpay-Serial is the merchant's public key id.
	namesPublicKey bool
	// sub is the sub-merchant a service provider's call is for (sub_mchid), "" for a
	// merchant's own call.
	sub string
}

// account is the merchant id the call acts for: the sub-merchant's, else the merchant's.
func (c *wechatCall) account() string {
	if c.sub != "" {
		return c.sub
	}
	return c.merchant.acct.MchID
}

// partnerPath says whether a path is one of the partner (service provider) APIs.
func partnerPath(path string) bool { return strings.HasPrefix(path, "/v3/pay/partner/") }

// wechatAdmit runs what every API v3 request goes through: header checks, counting, the QPS
// cap, faults and the merchant's signature. It answers and returns nil when the request ends
// there.
func (s *Sandbox) wechatAdmit(w http.ResponseWriter, r *http.Request, outTradeNo string, isQuery bool) *wechatCall {
	return s.wechatAdmitAs(w, r, request{platform: reconcile.WechatPay, key: orderKey{reconcile.WechatPay, outTradeNo}, isQuery: isQuery})
}

// wechatAdmitAs is wechatAdmit for a request described in full (a refund query names its
// refund); rq.merchant is filled in from the Authorization.
func (s *Sandbox) wechatAdmitAs(w http.ResponseWriter, r *http.Request, rq request) *wechatCall {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		return nil
	}
	c := &wechatCall{key: rq.key, body: body}
	c.merchant, rq.merchant = s.wechatMerchantOf(r.Header.Get("Authorization"))
	// A service provider names its sub-merchant in the query (queries, the refund query,
	// the bill) or the body (the partner close): the call is then the sub-merchant's,
	// counted, capped and faulted as it is, and within its provider's cap.
	sub := r.URL.Query().Get("sub_mchid")
	if sub == "" && partnerPath(r.URL.Path) {
		var b struct {
			SubMchID string `json:"sub_mchid"`
		}
		_ = json.Unmarshal(body, &b)
		sub = b.SubMchID
	}
	if sub != "" && c.merchant != nil && s.wechat.providerOf[sub] == c.merchant {
		c.sub, rq.provider, rq.merchant = sub, rq.merchant, sub
	}
	f, hasFault, throttled := s.admit(rq)
	c.fault = f
	if hasFault && s.transportFault(w, r, f) {
		return nil
	}
	if r.Header.Get("Accept") == "" || r.Header.Get("User-Agent") == "" {
		s.writeWechatError(w, c, wechatError{400, "INVALID_REQUEST", "Http头缺少Accept或User-Agent"})
		return nil
	}
	if throttled || f.RateLimited {
		s.writeWechatError(w, c, wechatErrors["FREQUENCY_LIMITED"])
		return nil
	}
	if f.ErrorCode != "" {
		s.writeWechatError(w, c, wechatErrorFor(f.ErrorCode))
		return nil
	}
	if e, ok := s.checkWechatAuth(c.merchant, r, body); !ok {
		s.writeWechatError(w, c, e)
		return nil
	}
	if serial := r.Header.Get(wechatpay.HeaderSerial); serial != "" {
		known, publicKey := c.merchant.knowsSerial(serial)
		if !known {
			s.writeWechatError(w, c, wechatError{400, "PARAM_ERROR", "Wechatpay-Serial对应的平台证书或公钥不存在"})
			return nil
		}
		c.namesPublicKey = publicKey
	}
	// The transaction queries name the merchant in the query string (a provider's, sp_mchid
	// and sub_mchid); the refund query names none (the Authorization's merchant asks).
	param := "mchid"
	if partnerPath(r.URL.Path) {
		param = "sp_mchid"
	}
	if mchid := r.URL.Query().Get(param); rq.isQuery && rq.refund == "" && mchid != c.merchant.acct.MchID {
		s.writeWechatError(w, c, wechatError{400, "PARAM_ERROR", param + "与Authorization中商户号不一致"})
		return nil
	}
	if (sub != "" || partnerPath(r.URL.Path)) && c.sub == "" {
		s.writeWechatError(w, c, wechatError{400, "PARAM_ERROR", "sub_mchid与sp_mchid不存在授权关系"})
		return nil
	}
	return c
}

// checkWechatAuth verifies the Authorization header as WeChat Pay does, for the merchant
// it names.
func (s *Sandbox) checkWechatAuth(m *wechatMerchant, r *http.Request, body []byte) (wechatError, bool) {
	sign := func(msg string) wechatError { return wechatError{401, "SIGN_ERROR", msg} }
	a, err := wechatpay.ParseAuthorization(r.Header.Get("Authorization"))
	if err != nil {
		return sign("错误的签名，验签失败: Http头Authorization值格式错误"), false
	}
	if m == nil {
		return sign("商户号不存在或商户证书序列号不匹配"), false
	}
	acct := m.account()
	ts, err := strconv.ParseInt(a.Timestamp, 10, 64)
	if err != nil {
		return sign("Http头Authorization中的timestamp格式错误"), false
	}
	if d := s.now().Sub(time.Unix(ts, 0)); d >= 5*time.Minute || d <= -5*time.Minute {
		return sign("Http头Authorization中的timestamp与发起请求的时间不得超过5分钟"), false
	}
	if !strings.EqualFold(a.SerialNo, acct.MerchantSerial) {
		return sign("商户证书序列号有误"), false
	}
	msg := wechatpay.RequestMessage(r.Method, r.RequestURI, a.Timestamp, a.NonceStr, body)
	if platformclient.VerifySHA256(&acct.MerchantKey.PublicKey, msg, a.Signature) != nil {
		return sign("签名错误"), false
	}
	return wechatError{}, true
}

// serveWechatQuery answers GET /v3/pay/transactions/out-trade-no/{no} and /id/{id}.
func (s *Sandbox) serveWechatQuery(w http.ResponseWriter, r *http.Request) {
	outTradeNo := r.PathValue("no")
	if id := r.PathValue("id"); id != "" {
		outTradeNo, _ = s.outTradeNoOf(reconcile.WechatPay, id)
	}
	c := s.wechatAdmit(w, r, outTradeNo, true)
	if c == nil {
		return
	}
	sc := Scenario{State: StateNotFound}
	if outTradeNo != "" {
		sc = s.lookup(reconcile.WechatPay, outTradeNo)
	}
	if sc.State == StateNotFound || s.wechat.owner(sc) != c.merchant || s.wechat.subOf(sc) != c.sub {
		s.writeWechatError(w, c, wechatErrors["ORDER_NOT_EXIST"])
		return
	}
	s.writeWechat(w, c, http.StatusOK, s.wechatTransaction(c.merchant.account(), c.sub, outTradeNo, sc))
}

// serveWechatCertificates answers GET /v3/certificates: the merchant's platform
// certificates sealed with its API v3 key, signed like any answer.
func (s *Sandbox) serveWechatCertificates(w http.ResponseWriter, r *http.Request) {
	if m, _ := s.wechatMerchantOf(r.Header.Get("Authorization")); m != nil {
		m.countDownload()
	}
	c := s.wechatAdmit(w, r, "", false)
	if c == nil {
		return
	}
	body, err := c.merchant.certificateList()
	if err != nil {
		s.writeWechatError(w, c, wechatErrors["SYSTEM_ERROR"])
		return
	}
	s.writeWechat(w, c, http.StatusOK, body)
}

// serveWechatClose answers POST /v3/pay/transactions/out-trade-no/{no}/close.
func (s *Sandbox) serveWechatClose(w http.ResponseWriter, r *http.Request) {
	outTradeNo := r.PathValue("no")
	c := s.wechatAdmit(w, r, outTradeNo, false)
	if c == nil {
		return
	}
	var req struct {
		MchID   string `json:"mchid"`
		SpMchID string `json:"sp_mchid"`
	}
	err := json.Unmarshal(c.body, &req)
	mchID := req.MchID
	if c.sub != "" {
		mchID = req.SpMchID // the partner close names the provider and the sub-merchant
	}
	if err != nil || mchID != c.merchant.acct.MchID {
		s.writeWechatError(w, c, wechatError{400, "PARAM_ERROR", "请求体mchid错误"})
		return
	}
	if sc := s.lookup(reconcile.WechatPay, outTradeNo); sc.State != StateNotFound && (s.wechat.owner(sc) != c.merchant || s.wechat.subOf(sc) != c.sub) {
		s.writeWechatError(w, c, wechatErrors["ORDER_NOT_EXIST"])
		return
	}
	switch s.closeOrder(reconcile.WechatPay, outTradeNo) {
	case StateNotFound:
		s.writeWechatError(w, c, wechatErrors["ORDER_NOT_EXIST"])
	case StatePaid, StateRefunded:
		s.writeWechatError(w, c, wechatErrors["ORDERPAID"])
	default:
		s.writeWechat(w, c, http.StatusNoContent, nil)
	}
}

// wechatStateWord is the trade_state WeChat Pay reports for a scenario.
func wechatStateWord(sc Scenario) string {
	if sc.RawState != "" {
		return sc.RawState
	}
	return map[State]string{
		StatePaid: wechatpay.StateSuccess, StateOpen: wechatpay.StateNotPay, StateClosed: wechatpay.StateClosed,
		StateRefunded: wechatpay.StateRefund, StateFailed: wechatpay.StatePayError,
	}[sc.State]
}

// wechatTransaction is the query answer (and the callback plaintext) for an order: the
// merchant's form, or for a sub-merchant (sub) the partner form, which names the provider
// (acct) and the sub-merchant and identifies the buyer by both apps.
func (s *Sandbox) wechatTransaction(acct WechatAccount, sub, outTradeNo string, sc Scenario) []byte {
	state := wechatStateWord(sc)
	desc := map[string]string{
		wechatpay.StateSuccess: "支付成功", wechatpay.StateNotPay: "未支付", wechatpay.StateClosed: "已关闭",
		wechatpay.StateRefund: "转入退款", wechatpay.StatePayError: "支付失败", wechatpay.StateRevoked: "已撤销",
		wechatpay.StateUserPaying: "用户支付中",
	}[state]
	currency := sc.Currency
	if currency == "" {
		currency = "CNY"
	}
	paid := state == wechatpay.StateSuccess || state == wechatpay.StateRefund
	var txID, successTime, bank, tradeType any
	var payer, amount any
	if paid {
		txID = sc.TradeNo
		successTime = sc.PaidAt.In(platformclient.ChinaTime).Format(time.RFC3339)
		bank, tradeType = "OTHERS", "NATIVE"
		payer = json.RawMessage(object(field{"openid", "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"}))
		if sub != "" {
			payer = json.RawMessage(object(field{"sp_openid", "oUpF8uMuAJO_M2pxb1Q9zNjWeS6o"}, field{"sub_openid", "oUpF8uMuAJO_M2pxb1Q9zNjWeS6p"}))
		}
		amount = json.RawMessage(object(field{"total", sc.AmountMinor}, field{"payer_total", sc.AmountMinor},
			field{"currency", currency}, field{"payer_currency", currency}))
	} else {
		amount = json.RawMessage(object(field{"total", sc.AmountMinor}, field{"currency", currency}, field{"payer_currency", currency}))
	}
	if sub != "" {
		return object(
			field{"amount", amount}, field{"attach", ""}, field{"bank_type", bank}, field{"out_trade_no", outTradeNo},
			field{"payer", payer}, field{"promotion_detail", json.RawMessage("[]")}, field{"sp_appid", acct.AppID},
			field{"sp_mchid", acct.MchID}, field{"sub_mchid", sub}, field{"success_time", successTime},
			field{"trade_state", state}, field{"trade_state_desc", desc}, field{"trade_type", tradeType},
			field{"transaction_id", txID},
		)
	}
	return object(
		field{"amount", amount}, field{"appid", acct.AppID}, field{"attach", ""}, field{"bank_type", bank},
		field{"mchid", acct.MchID}, field{"out_trade_no", outTradeNo}, field{"payer", payer},
		field{"promotion_detail", json.RawMessage("[]")}, field{"success_time", successTime},
		field{"trade_state", state}, field{"trade_state_desc", desc}, field{"trade_type", tradeType},
		field{"transaction_id", txID},
	)
}

func (s *Sandbox) writeWechatError(w http.ResponseWriter, c *wechatCall, e wechatError) {
	s.writeWechat(w, c, e.status, object(field{"code", e.code}, field{"message", e.message}))
}

// writeWechat signs an answer with "WeChat Pay's" key for the merchant (error answers too,
// as the platform does), applying the signature faults, and writes it.
func (s *Sandbox) writeWechat(w http.ResponseWriter, c *wechatCall, status int, body []byte) {
	f := c.fault
	h := w.Header()
	h.Set(wechatpay.HeaderRequestID, "08"+randomAlnum(30))
	if !f.Unsigned {
		m := c.merchant
		if m == nil {
			m = s.wechat.defaultMerchant()
		}
		key, keyID := m.answerSigner(c.namesPublicKey)
		now := s.now()
		if f.BadSignature {
			key = otherKey(s.keys, reconcile.WechatPay)
		}
		if f.WrongSerial {
			keyID = "PUB_KEY_ID_0114232134912410000000000000WRONG"
		}
		if f.StaleTimestamp {
			now = now.Add(-10 * time.Minute)
		}
		if err := wechatpay.SignResponse(h, key, keyID, now, body); err != nil {
			http.Error(w, "sign failed", http.StatusInternalServerError)
			return
		}
		if f.SignTest {
			h.Set(wechatpay.HeaderSignature, wechatpay.SignTestPrefix+base64.StdEncoding.EncodeToString([]byte(randomAlnum(48))))
		}
	}
	if f.TamperBody {
		body = tamper(body, "total")
	}
	s.recordDigest(c.key, body)
	ct := "application/json; charset=utf-8"
	if len(body) == 0 {
		ct = ""
	}
	writeBody(w, status, ct, body, f)
}
