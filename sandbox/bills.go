package sandbox

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/statement"
)

// The sandbox publishes each account's daily trade bill from the same store its queries
// answer from: a payment line for every paid (or since refunded) order paid that day and a
// refund line for every refund of the day the refund API made (RefundsOfDay: its real
// out_refund_no, refund_id and amount), with a 0.6% fee. A day's bill is
// published once the day is over (in China time); BillSpoil makes it late or wrong, or has
// WeChat Pay answer a day without trades with NO_STATEMENT_EXIST as the real one does.

// Bill download paths: Alipay's file server and WeChat Pay's download endpoint.
const (
	alipayBillFilePath = "/downloadBillFile.resource"
	wechatBillFilePath = "/v3/billdownload/file"
)

// Download URLs live as long as the platforms' do.
const (
	alipayBillURLLife = 30 * time.Second
	wechatBillURLLife = 5 * time.Minute
)

// feeMilliFenPerFen is the sandbox's fee rate: 0.6% of a fen is 6 milli-fen.
const feeMilliFenPerFen = 6

// BillSpoil makes the sandbox publish a bad bill, or none, for an account.
type BillSpoil struct {
	NotReady bool `json:"not_ready,omitempty"` // answer "not published yet"
	// WrongHash makes WeChat Pay declare a hash_value that is not the file's.
	WrongHash bool `json:"wrong_hash,omitempty"`
	// SkewTotalsMinor is added to the declared payment total: a bill that does not add up.
	SkewTotalsMinor int64 `json:"skew_totals_minor,omitempty"`
	// Truncate serves the first half of the file (with an honest length): a cut archive.
	Truncate bool `json:"truncate,omitempty"`
	// NoStatementWhenEmpty makes WeChat Pay answer a day without trades as the real one
	// does: 400 NO_STATEMENT_EXIST, no file (which the client takes for an empty day once
	// the bill is due, and for "not ready" before). Off, such a day is a bill without lines.
	NoStatementWhenEmpty bool `json:"no_statement_when_empty,omitempty"`
}

// billTicket is one issued download URL.
type billTicket struct {
	platform reconcile.Platform
	merchant string
	body     []byte
	expires  time.Time
}

// SetBillSpoil spoils the bills of one account (merchant id; "" spoils every account of the
// platform that has no spoil of its own). A zero BillSpoil clears it.
func (s *Sandbox) SetBillSpoil(p reconcile.Platform, merchantID string, sp BillSpoil) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := accountKey{p, merchantID}
	if sp == (BillSpoil{}) {
		delete(s.billSpoils, k)
		return
	}
	s.billSpoils[k] = sp
}

// BillDownloads is how many bill files the platform served.
func (s *Sandbox) BillDownloads(p reconcile.Platform) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.billServed[p]
}

func (s *Sandbox) billSpoil(p reconcile.Platform, merchantID string) BillSpoil {
	s.mu.Lock()
	defer s.mu.Unlock()
	if sp, ok := s.billSpoils[accountKey{p, merchantID}]; ok {
		return sp
	}
	return s.billSpoils[accountKey{p, ""}]
}

// BillLines are the lines of one account's bill of day, from the store, in time order.
func (s *Sandbox) BillLines(p reconcile.Platform, merchantID string, day time.Time) []statement.Line {
	d := platformclient.BillDay(day)
	lines := refundLines(p, d, s.RefundsOfDay(p, merchantID, day))
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, o := range s.orders {
		sc := o.sc
		if k.platform != p || s.ownerLocked(p, sc) != merchantID || (sc.State != StatePaid && sc.State != StateRefunded) {
			continue
		}
		cur := cmp.Or(sc.Currency, "CNY")
		pay := statement.Line{Kind: reconcile.BillPayment, OutTradeNo: k.outTradeNo, PlatformTradeNo: sc.TradeNo,
			MerchantID: merchantID, Currency: cur, AmountMinor: sc.AmountMinor, ReceivedMinor: sc.AmountMinor,
			FeeMilliFen: sc.AmountMinor * feeMilliFenPerFen, At: sc.PaidAt.In(platformclient.ChinaTime),
			CreatedAt: sc.PaidAt.Add(-time.Minute).In(platformclient.ChinaTime)} // the sandbox keeps no creation time
		if platformclient.BillDay(pay.At).Equal(d) {
			lines = append(lines, pay)
		}
		if sc.State == StateRefunded && !s.hasRefundsLocked(p, k.outTradeNo) {
			// Refunded without the refund API (Scenario.State only): a refund made in the
			// merchant portal, under a number the platform gave it and the merchant never saw.
			ref := pay
			ref.Kind, ref.RefundNo, ref.FeeMilliFen = reconcile.BillRefund, "RF"+k.outTradeNo, -pay.FeeMilliFen
			ref.At = refundedAt(sc).In(platformclient.ChinaTime)
			if platformclient.BillDay(ref.At).Equal(d) {
				lines = append(lines, ref)
			}
		}
	}
	slices.SortFunc(lines, func(a, b statement.Line) int {
		return cmp.Or(a.At.Compare(b.At), cmp.Compare(a.OutTradeNo, b.OutTradeNo), cmp.Compare(a.Kind, b.Kind),
			cmp.Compare(a.RefundNo, b.RefundNo))
	})
	return lines
}

// refundLines are the refund lines of the bill of day d among refunds (RefundsOfDay's, which
// holds the refunds made or succeeded that day), each under its real numbers and amount, as
// each platform files them: Alipay lists a refund once it succeeded, on the day it succeeded
// (完成时间); WeChat Pay lists it on the day it was made (交易时间 is the refund's start), with
// 退款状态 SUCCESS or, not finished yet, PROCESSING. A closed or abnormal refund paid nothing
// back and is not listed.
func refundLines(p reconcile.Platform, d time.Time, refunds []Refund) []statement.Line {
	var out []statement.Line
	for _, r := range refunds {
		l := statement.Line{Kind: reconcile.BillRefund, OutTradeNo: r.OutTradeNo, PlatformTradeNo: r.TradeNo,
			RefundNo: r.OutRefundNo, PlatformRefundNo: r.RefundID, MerchantID: r.MerchantID, Currency: r.Currency,
			AmountMinor: r.AmountMinor, ReceivedMinor: r.AmountMinor, FeeMilliFen: -r.AmountMinor * feeMilliFenPerFen,
			CreatedAt: r.CreatedAt.In(platformclient.ChinaTime)}
		switch {
		case p == reconcile.Alipay && r.Outcome == RefundSuccess:
			l.At = r.SucceededAt.In(platformclient.ChinaTime)
		case p == reconcile.WechatPay && (r.Outcome == RefundSuccess || r.Outcome == RefundProcessing):
			l.At, l.RefundStatus = r.CreatedAt.In(platformclient.ChinaTime), string(r.Outcome)
			if r.Outcome == RefundProcessing {
				l.Pending, l.FeeMilliFen = true, 0 // no fee comes back before the money does
			}
		default:
			continue
		}
		if platformclient.BillDay(l.At).Equal(d) {
			out = append(out, l)
		}
	}
	return out
}

// hasRefundsLocked says whether the refund API made any refund of a trade.
func (s *Sandbox) hasRefundsLocked(p reconcile.Platform, outTradeNo string) bool {
	for _, r := range s.refunds {
		if r.Platform == p && r.OutTradeNo == outTradeNo {
			return true
		}
	}
	return false
}

// refundedAt is when an order refunded without the refund API was refunded:
// Scenario.RefundedAt, else a minute after it was paid.
func refundedAt(sc Scenario) time.Time {
	if !sc.RefundedAt.IsZero() {
		return sc.RefundedAt
	}
	return sc.PaidAt.Add(time.Minute)
}

func (s *Sandbox) ownerLocked(p reconcile.Platform, sc Scenario) string {
	if p == reconcile.Alipay {
		return s.alipay.owner(sc)
	}
	if sub := s.wechat.subOf(sc); sub != "" {
		return sub
	}
	if m := s.wechat.owner(sc); m != nil {
		return m.acct.MchID
	}
	return ""
}

// billPublished reports whether day's bill is out: the day must be over in China time (or
// bills published early).
func (s *Sandbox) billPublished(day time.Time) bool {
	s.mu.Lock()
	early := s.billsEarly
	s.mu.Unlock()
	return early || platformclient.BillDay(day).Before(platformclient.BillDay(s.now()))
}

// PublishBillsEarly makes the sandbox publish a day's bill before the day is over, holding
// the trades so far: a demo's "next morning" without waiting for midnight in China. Spoils
// still apply.
func (s *Sandbox) PublishBillsEarly(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.billsEarly = on
}

// WriteAlipayBill writes an Alipay merchant's bill of day, as its download serves it (the
// zip), spoils included: an app's own, or a sub-merchant's (its provider asking with the
// merchant's app_auth_token).
func (s *Sandbox) WriteAlipayBill(w io.Writer, appID string, day time.Time) error {
	app := s.alipay.signer(appID)
	if app == nil {
		return fmt.Errorf("sandbox: no Alipay app %q", appID)
	}
	f := statement.AlipayFile{UserID: app.SellerID + "0156", Day: day, SkewMinor: s.billSpoil(reconcile.Alipay, appID).SkewTotalsMinor}
	_, err := statement.WriteAlipayZip(w, f, slices.Values(s.BillLines(reconcile.Alipay, appID, day)))
	return err
}

// WriteWechatBill writes a WeChat Pay merchant's ALL bill of day, plain or gzip, spoils
// included, and returns the SHA1 of the unzipped bytes.
func (s *Sandbox) WriteWechatBill(w io.Writer, mchID string, day time.Time, gzip bool) (string, error) {
	m := s.wechat.byID(mchID)
	if m == nil {
		m = s.wechat.providerOf[mchID] // a sub-merchant's bill, under its provider's app
	}
	if m == nil {
		return "", fmt.Errorf("sandbox: no WeChat Pay merchant %q", mchID)
	}
	f := statement.WeChatFile{AppID: m.acct.AppID, MchID: mchID, Gzip: gzip, SkewMinor: s.billSpoil(reconcile.WechatPay, mchID).SkewTotalsMinor}
	sum, _, err := statement.WriteWeChatCSV(w, f, slices.Values(s.BillLines(reconcile.WechatPay, mchID, day)))
	return sum, err
}

// issueBill keeps a rendered bill behind a fresh token until it expires.
func (s *Sandbox) issueBill(p reconcile.Platform, merchant string, body []byte, life time.Duration) string {
	sp := s.billSpoil(p, merchant)
	if sp.Truncate {
		body = body[:len(body)/2]
	}
	token := randomAlnum(32)
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	for t, tk := range s.billTickets { // forget the expired ones
		if now.After(tk.expires) {
			delete(s.billTickets, t)
		}
	}
	s.billTickets[token] = billTicket{platform: p, merchant: merchant, body: body, expires: now.Add(life)}
	return token
}

// takeBill returns a ticket's bill, counting the download; ok false when the token is
// unknown or expired.
func (s *Sandbox) takeBill(p reconcile.Platform, token string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tk, ok := s.billTickets[token]
	if !ok || tk.platform != p || s.now().After(tk.expires) {
		return nil, false
	}
	s.billServed[p]++
	return tk.body, true
}

// alipayBillNode answers alipay.data.dataservice.bill.downloadurl.query for app.
func (s *Sandbox) alipayBillNode(r *http.Request, app *alipayApp, merchant, bizContent string) []byte {
	var biz struct {
		BillType string `json:"bill_type"`
		BillDate string `json:"bill_date"`
	}
	_ = json.Unmarshal([]byte(bizContent), &biz)
	day, err := time.ParseInLocation("2006-01-02", biz.BillDate, platformclient.ChinaTime)
	if biz.BillType != "trade" || err != nil {
		return alipayErrors["ACQ.INVALID_PARAMETER"].node()
	}
	if !s.billPublished(day) || s.billSpoil(reconcile.Alipay, merchant).NotReady {
		return alipayError{"40004", "Business Failed", "isp.bill_not_exist", "账单不存在"}.node()
	}
	var b bytes.Buffer
	if err := s.WriteAlipayBill(&b, merchant, day); err != nil {
		return alipayErrors["isp.unknow-error"].node()
	}
	token := s.issueBill(reconcile.Alipay, merchant, b.Bytes(), alipayBillURLLife)
	userID, ymd := app.SellerID+"0156", day.Format("20060102")
	q := url.Values{"bizType": {"trade"}, "userId": {userID}, "fileType": {"csv.zip"}, "bizDates": {ymd},
		"downloadFileName": {userID + "_" + ymd + ".csv.zip"}, "token": {token}}
	link := "http://" + r.Host + alipayBillFilePath + "?" + q.Encode()
	return alipayError{"10000", "Success", "", ""}.node(field{"bill_download_url", link})
}

// serveAlipayBillFile serves a download URL: the URL is the credential, as at Alipay.
func (s *Sandbox) serveAlipayBillFile(w http.ResponseWriter, r *http.Request) {
	body, ok := s.takeBill(reconcile.Alipay, r.URL.Query().Get("token"))
	if !ok {
		http.Error(w, "download url expired", http.StatusForbidden)
		return
	}
	writeBody(w, http.StatusOK, "application/zip", body, Fault{})
}

// serveWechatTradeBill answers GET /v3/bill/tradebill, signed like any answer.
func (s *Sandbox) serveWechatTradeBill(w http.ResponseWriter, r *http.Request) {
	c := s.wechatAdmit(w, r, "", false)
	if c == nil {
		return
	}
	q := r.URL.Query()
	day, err := time.ParseInLocation("2006-01-02", q.Get("bill_date"), platformclient.ChinaTime)
	if err != nil || (q.Get("bill_type") != "" && q.Get("bill_type") != "ALL") ||
		(q.Get("tar_type") != "" && q.Get("tar_type") != "GZIP") {
		s.writeWechatError(w, c, wechatError{400, "PARAM_ERROR", "参数错误"})
		return
	}
	mchID := c.account() // a provider asking with sub_mchid gets that sub-merchant's bill
	sp := s.billSpoil(reconcile.WechatPay, mchID)
	switch {
	case !s.billPublished(day):
		s.writeWechatError(w, c, wechatError{400, "NO_STATEMENT_EXIST", "账单文件不存在"})
		return
	case sp.NotReady:
		s.writeWechatError(w, c, wechatError{400, "STATEMENT_CREATING", "账单生成中"})
		return
	case sp.NoStatementWhenEmpty && len(s.BillLines(reconcile.WechatPay, mchID, day)) == 0:
		s.writeWechatError(w, c, wechatError{400, "NO_STATEMENT_EXIST", "账单文件不存在"})
		return
	}
	var b bytes.Buffer
	sum, err := s.WriteWechatBill(&b, mchID, day, q.Get("tar_type") == "GZIP")
	if err != nil {
		s.writeWechatError(w, c, wechatErrors["SYSTEM_ERROR"])
		return
	}
	if sp.WrongHash {
		sum = "da39a3ee5e6b4b0d3255bfef95601890afd80709" // the SHA1 of nothing
	}
	token := s.issueBill(reconcile.WechatPay, mchID, b.Bytes(), wechatBillURLLife)
	link := "http://" + r.Host + wechatBillFilePath + "?token=" + token
	s.writeWechat(w, c, http.StatusOK, object(field{"hash_type", "SHA1"}, field{"hash_value", sum}, field{"download_url", link}))
}

// serveWechatBillFile serves a download URL to the merchant that signs for it; the answer
// is not signed, as at WeChat Pay.
func (s *Sandbox) serveWechatBillFile(w http.ResponseWriter, r *http.Request) {
	c := s.wechatAdmit(w, r, "", false)
	if c == nil {
		return
	}
	body, ok := s.takeBill(reconcile.WechatPay, r.URL.Query().Get("token"))
	if !ok {
		s.writeWechatError(w, c, wechatError{400, "INVALID_REQUEST", "下载链接已过期"})
		return
	}
	writeBody(w, http.StatusOK, "application/octet-stream", body, Fault{})
}

// mountBillControl adds the bill control endpoints:
//
//	PUT    /sandbox/bills/{platform}/spoil   {"merchant_id","not_ready","wrong_hash","skew_totals_minor","truncate","no_statement_when_empty"}
//	DELETE /sandbox/bills/{platform}/spoil?merchant_id=
//	GET    /sandbox/bills/{platform}/{day}?merchant_id=&gzip=1   the bill file itself (for --file)
//	PUT    /sandbox/bills/early    publish a day's bill before the day is over (PublishBillsEarly)
//	DELETE /sandbox/bills/early    publish the morning after again
func (s *Sandbox) mountBillControl(mux *http.ServeMux) {
	mux.HandleFunc("PUT /sandbox/bills/early", func(w http.ResponseWriter, _ *http.Request) {
		s.PublishBillsEarly(true)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("DELETE /sandbox/bills/early", func(w http.ResponseWriter, _ *http.Request) {
		s.PublishBillsEarly(false)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("PUT /sandbox/bills/{platform}/spoil", s.ctlPutBillSpoil)
	mux.HandleFunc("DELETE /sandbox/bills/{platform}/spoil", s.ctlDeleteBillSpoil)
	mux.HandleFunc("GET /sandbox/bills/{platform}/{day}", s.ctlGetBill)
}

func (s *Sandbox) ctlPutBillSpoil(w http.ResponseWriter, r *http.Request) {
	p, ok := pathPlatform(w, r)
	if !ok {
		return
	}
	var req struct {
		MerchantID string `json:"merchant_id"`
		BillSpoil
	}
	if !readJSON(w, r, &req) {
		return
	}
	s.SetBillSpoil(p, req.MerchantID, req.BillSpoil)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Sandbox) ctlDeleteBillSpoil(w http.ResponseWriter, r *http.Request) {
	p, ok := pathPlatform(w, r)
	if !ok {
		return
	}
	s.SetBillSpoil(p, r.URL.Query().Get("merchant_id"), BillSpoil{})
	w.WriteHeader(http.StatusNoContent)
}

func (s *Sandbox) ctlGetBill(w http.ResponseWriter, r *http.Request) {
	p, ok := pathPlatform(w, r)
	if !ok {
		return
	}
	day, err := time.ParseInLocation("2006-01-02", r.PathValue("day"), platformclient.ChinaTime)
	if err != nil {
		writeErr(w, fmt.Errorf("day %q: want YYYY-MM-DD", r.PathValue("day")))
		return
	}
	merchant := r.URL.Query().Get("merchant_id")
	var b bytes.Buffer
	if p == reconcile.Alipay {
		err = s.WriteAlipayBill(&b, cmp.Or(merchant, s.alipay.defaultID), day)
	} else {
		var sum string
		sum, err = s.WriteWechatBill(&b, cmp.Or(merchant, s.id.WechatMchID), day, r.URL.Query().Get("gzip") == "1")
		w.Header().Set("X-Bill-SHA1", sum)
	}
	if err != nil {
		writeErr(w, err)
		return
	}
	writeBody(w, http.StatusOK, "application/octet-stream", b.Bytes(), Fault{})
}
