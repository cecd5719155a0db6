package sandbox

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/platformclient/alipay"
	"github.com/payrecon/payrecon/reconcile"
)

// alipayError is a failure node's code, msg, sub_code and sub_msg.
type alipayError [4]string

// alipayErrors are the real shapes of the errors a Fault.ErrorCode can ask for.
var alipayErrors = map[string]alipayError{
	"ACQ.SYSTEM_ERROR":                 {"40004", "Business Failed", "ACQ.SYSTEM_ERROR", "系统错误"},
	"ACQ.INVALID_PARAMETER":            {"40004", "Business Failed", "ACQ.INVALID_PARAMETER", "参数无效"},
	"ACQ.TRADE_NOT_EXIST":              {"40004", "Business Failed", "ACQ.TRADE_NOT_EXIST", "交易不存在"},
	"ACQ.TRADE_STATUS_ERROR":           {"40004", "Business Failed", "ACQ.TRADE_STATUS_ERROR", "交易状态不合法"},
	"isp.unknow-error":                 {"20000", "Service Currently Unavailable", "isp.unknow-error", "系统繁忙"},
	"aop.unknow-error":                 {"20000", "Service Currently Unavailable", "aop.unknow-error", "系统繁忙"},
	"aop.invalid-auth-token":           {"20001", "Insufficient Token Permissions", "aop.invalid-auth-token", "无效的访问令牌"},
	"isv.missing-signature":            {"40001", "Missing Required Arguments", "isv.missing-signature", "缺少签名参数"},
	"isv.invalid-app-id":               {"40002", "Invalid Arguments", "isv.invalid-app-id", "无效的AppID参数"},
	"isv.invalid-signature":            {"40002", "Invalid Arguments", "isv.invalid-signature", "验签出错，建议检查签名字符串或签名私钥与应用公钥是否匹配"},
	"isv.invalid-signature-type":       {"40002", "Invalid Arguments", "isv.invalid-signature-type", "无效的签名类型"},
	"isv.invalid-method":               {"40002", "Invalid Arguments", "isv.invalid-method", "不存在的方法名"},
	"aop.call-limited":                 {"40005", "Call Limited", "aop.call-limited", "调用频率超限"},
	"isv.insufficient-isv-permissions": {"40006", "Insufficient Permissions", "isv.insufficient-isv-permissions", "ISV权限不足，建议在开发者中心检查对应功能是否已经添加"},
}

// alipayErrorFor reads a Fault.ErrorCode: a known sub-code, a bare code ("20000"), or
// "CODE/SUB_CODE".
func alipayErrorFor(code string) alipayError {
	if e, ok := alipayErrors[code]; ok {
		return e
	}
	c, sub, _ := strings.Cut(code, "/")
	for _, e := range alipayErrors {
		if e[0] == c && (sub == "" || e[2] == sub) {
			return e
		}
	}
	msg := map[string]string{"10000": "Success", "20000": "Service Currently Unavailable", "40004": "Business Failed"}[c]
	return alipayError{c, msg, sub, ""}
}

func (e alipayError) node(extra ...field) []byte {
	return object(append([]field{{"code", e[0]}, {"msg", e[1]}, {"sub_code", e[2]}, {"sub_msg", e[3]}}, extra...)...)
}

// gatewayRequired are the common parameters the gateway insists on, with the sub_code of
// their absence.
var gatewayRequired = []struct{ param, sub string }{
	{"app_id", "isv.missing-app-id"},
	{"method", "isv.missing-method"},
	{"sign_type", "isv.missing-signature-type"},
	{"sign", "isv.missing-signature"},
	{"timestamp", "isv.missing-timestamp"},
	{"version", "isv.missing-version"},
}

// serveAlipay answers /gateway.do. Parameters may come in the form, the query string or
// both, as the official SDKs and the community clients send them.
func (s *Sandbox) serveAlipay(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost && r.Method != http.MethodGet {
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	p := r.Form
	method, appID, token := p.Get("method"), p.Get("app_id"), p.Get("app_auth_token")
	biz, outTradeNo := s.alipayBiz(p.Get("biz_content"))
	rq := s.alipayRequest(method, appID, token, outTradeNo, alipayRefundNo(method, p.Get("biz_content")))
	merchant, provider, refundNo := rq.merchant, rq.provider, rq.refund
	f, hasFault, throttled := s.admit(rq)
	if hasFault && s.transportFault(w, r, f) {
		return
	}
	nodeName := "error_response"
	if method == alipay.MethodTradeQuery || method == alipay.MethodTradeClose || method == alipay.MethodBillDownloadURL || method == alipay.MethodRefundQuery {
		nodeName = alipay.ResponseNodeName(method)
	}
	app := s.alipay.get(appID)
	signer := app
	if signer == nil { // an unknown app still gets an answer signed as the default app's
		signer = s.alipay.get(s.alipay.defaultID)
	}
	reply := func(node []byte) { s.writeAlipay(w, rq.key, nodeName, node, f, signer) }

	if throttled || f.RateLimited {
		reply(alipayErrors["aop.call-limited"].node())
		return
	}
	if f.ErrorCode != "" {
		reply(alipayErrorFor(f.ErrorCode).node())
		return
	}
	if e, refused := alipayRefusal(p, nodeName, app); refused {
		reply(e.node())
		return
	}
	if token != "" && provider == "" {
		// A token this app was never granted (or another app's): the gateway's own refusal.
		reply(alipayErrors["aop.invalid-auth-token"].node())
		return
	}
	if method == alipay.MethodBillDownloadURL {
		reply(s.alipayBillNode(r, app, merchant, p.Get("biz_content")))
		return
	}
	if biz.OutTradeNo == "" && biz.TradeNo == "" {
		reply(alipayErrors["ACQ.INVALID_PARAMETER"].node())
		return
	}
	if outTradeNo != "" && s.alipay.owner(s.lookup(reconcile.Alipay, outTradeNo)) != merchant {
		outTradeNo = "" // another merchant's trade: this call finds nothing
	}
	if method == alipay.MethodTradeClose {
		reply(s.alipayCloseNode(outTradeNo, biz.OutTradeNo))
		return
	}
	if method == alipay.MethodRefundQuery {
		reply(s.alipayRefundNode(outTradeNo, biz.OutTradeNo, refundNo))
		return
	}
	reply(s.alipayQueryNode(outTradeNo, biz.OutTradeNo))
}

// alipayBizContent is the part of biz_content the gateway routes on.
type alipayBizContent struct {
	OutTradeNo string `json:"out_trade_no"`
	TradeNo    string `json:"trade_no"`
}

// alipayBiz reads biz_content and the out_trade_no it asks about (trade_no wins when both
// are given).
func (s *Sandbox) alipayBiz(bizContent string) (alipayBizContent, string) {
	var biz alipayBizContent
	_ = json.Unmarshal([]byte(bizContent), &biz)
	outTradeNo := biz.OutTradeNo
	if biz.TradeNo != "" {
		outTradeNo, _ = s.outTradeNoOf(reconcile.Alipay, biz.TradeNo)
	}
	return biz, outTradeNo
}

// alipayRequest is the gateway call as admit counts it. The account is the app_id as sent,
// known or not, so per-account caps and faults apply before the gateway looks at
// credentials, as a throttle in front of it would; a third-party app's call with a
// merchant's app_auth_token is that merchant's, within its provider's cap as well.
func (s *Sandbox) alipayRequest(method, appID, token, outTradeNo, refundNo string) request {
	rq := request{platform: reconcile.Alipay, merchant: appID, key: orderKey{reconcile.Alipay, outTradeNo},
		isQuery: method == alipay.MethodTradeQuery || method == alipay.MethodRefundQuery, refund: refundNo}
	if sub := s.alipay.subMerchant(appID, token); sub != "" {
		rq.merchant, rq.provider = sub, appID
	}
	return rq
}

// alipayRefusal is the gateway's own refusal of a call, before any business logic: a
// missing common parameter, an unknown method or app, a bad signature or certificate SN.
func alipayRefusal(p url.Values, nodeName string, app *alipayApp) (alipayError, bool) {
	for _, req := range gatewayRequired {
		if p.Get(req.param) == "" {
			return alipayError{"40001", "Missing Required Arguments", req.sub, "缺少必选参数"}, true
		}
	}
	switch {
	case nodeName == "error_response":
		return alipayErrors["isv.invalid-method"], true
	case app == nil:
		return alipayErrors["isv.invalid-app-id"], true
	case p.Get("sign_type") != "RSA2":
		return alipayErrors["isv.invalid-signature-type"], true
	case alipay.VerifyRequest(&app.AppKey.PublicKey, p) != nil:
		e := alipayErrors["isv.invalid-signature"]
		e[3] += "，网关生成的验签字符串为：" + alipay.SignContent(p, "sign")
		return e, true
	}
	return alipayCertSNRefusal(app, p)
}

// alipayQueryNode builds alipay_trade_query_response for an order.
func (s *Sandbox) alipayQueryNode(outTradeNo, asked string) []byte {
	sc := Scenario{State: StateNotFound}
	if outTradeNo != "" {
		sc = s.lookup(reconcile.Alipay, outTradeNo)
	}
	if sc.State == StateNotFound {
		// The real shape of a not-found answer, zero amounts included.
		return alipayErrors["ACQ.TRADE_NOT_EXIST"].node(
			field{"buyer_pay_amount", "0.00"}, field{"invoice_amount", "0.00"}, field{"out_trade_no", asked},
			field{"point_amount", "0.00"}, field{"receipt_amount", "0.00"})
	}
	status := map[State]string{
		StatePaid: alipay.StatusTradeSuccess, StateOpen: alipay.StatusWaitBuyerPay, StateClosed: alipay.StatusTradeClosed,
		StateRefunded: alipay.StatusTradeClosed, StateFailed: alipay.StatusTradeClosed,
	}[sc.State]
	if sc.RawState != "" {
		status = sc.RawState
	}
	paid := sc.State == StatePaid || sc.State == StateRefunded
	amount := func(fen int64) any {
		if sc.AmountAsNumber {
			return json.Number(reconcile.FormatYuan(fen))
		}
		return reconcile.FormatYuan(fen)
	}
	buyerPaid := amount(0)
	var sendPayDate, buyerID, logon any
	if paid {
		buyerPaid = amount(sc.AmountMinor)
		sendPayDate = sc.PaidAt.In(platformclient.ChinaTime).Format(platformclient.ChinaTimeLayout)
		buyerID = "2088102177846880"
		logon = "tes***@example.com"
		if sc.BuyerLogonID != "" {
			logon = sc.BuyerLogonID
		}
	}
	return object(
		field{"code", "10000"}, field{"msg", "Success"},
		field{"buyer_logon_id", logon}, field{"buyer_pay_amount", buyerPaid}, field{"buyer_user_id", buyerID},
		field{"invoice_amount", buyerPaid}, field{"out_trade_no", outTradeNo}, field{"point_amount", amount(0)},
		field{"receipt_amount", buyerPaid}, field{"send_pay_date", sendPayDate},
		field{"total_amount", amount(sc.AmountMinor)}, field{"trade_no", sc.TradeNo}, field{"trade_status", status},
	)
}

// alipayCloseNode closes an open order and builds alipay_trade_close_response.
func (s *Sandbox) alipayCloseNode(outTradeNo, asked string) []byte {
	if outTradeNo == "" {
		return alipayErrors["ACQ.TRADE_NOT_EXIST"].node()
	}
	switch s.closeOrder(reconcile.Alipay, outTradeNo) {
	case StateNotFound:
		return alipayErrors["ACQ.TRADE_NOT_EXIST"].node()
	case StatePaid, StateRefunded:
		return alipayErrors["ACQ.TRADE_STATUS_ERROR"].node()
	}
	sc := s.lookup(reconcile.Alipay, outTradeNo)
	return object(field{"code", "10000"}, field{"msg", "Success"}, field{"out_trade_no", outTradeNo}, field{"trade_no", sc.TradeNo})
}

// alipayCertSNRefusal is the gateway's answer to an app in certificate mode whose request
// lacks app_cert_sn or alipay_root_cert_sn, or names other certificates than the app's.
func alipayCertSNRefusal(app *alipayApp, p url.Values) (alipayError, bool) {
	if app.certMode == nil {
		return alipayError{}, false
	}
	switch {
	case p.Get("app_cert_sn") == "":
		return alipayError{"40002", "Invalid Arguments", "isv.app-cert-sn-invalid", "应用证书序列号app_cert_sn缺失"}, true
	case p.Get("app_cert_sn") != app.certMode.AppCertSN:
		return alipayError{"40002", "Invalid Arguments", "isv.app-cert-sn-invalid", "应用证书序列号app_cert_sn与应用不匹配"}, true
	case p.Get("alipay_root_cert_sn") == "":
		return alipayError{"40002", "Invalid Arguments", "isv.alipay-root-cert-sn-invalid", "支付宝根证书序列号alipay_root_cert_sn缺失"}, true
	case p.Get("alipay_root_cert_sn") != app.certMode.RootCertSN:
		return alipayError{"40002", "Invalid Arguments", "isv.alipay-root-cert-sn-invalid", "支付宝根证书序列号alipay_root_cert_sn无效"}, true
	}
	return alipayError{}, false
}

// writeAlipay signs the node with the app's "Alipay" key (or applies the signature faults)
// and writes {"<node name>":<node>,"sign":"..."}, with "alipay_cert_sn" before sign for an
// app in certificate mode.
func (s *Sandbox) writeAlipay(w http.ResponseWriter, k orderKey, nodeName string, node []byte, f Fault, app *alipayApp) {
	key := app.PlatformKey
	if f.BadSignature {
		key = otherKey(s.keys, reconcile.Alipay)
	}
	sig, err := platformclient.SignSHA256(key, node)
	if err != nil {
		http.Error(w, "sign failed", http.StatusInternalServerError)
		return
	}
	wire := node
	if f.EscapeSlashes {
		wire = bytes.ReplaceAll(wire, []byte("/"), []byte(`\/`))
	}
	if f.TamperBody {
		wire = tamper(wire, "total_amount")
	}
	var b bytes.Buffer
	b.WriteString(`{"`)
	b.WriteString(nodeName)
	b.WriteString(`":`)
	b.Write(wire)
	if sn := app.alipayCertSN(); sn != "" {
		b.WriteString(`,"alipay_cert_sn":"`)
		b.WriteString(sn)
		b.WriteString(`"`)
	}
	if !f.Unsigned {
		b.WriteString(`,"sign":"`)
		b.WriteString(sig)
		b.WriteString(`"`)
	}
	b.WriteString("}")
	s.recordDigest(k, b.Bytes())
	writeBody(w, http.StatusOK, "text/html;charset=utf-8", b.Bytes(), f)
}
