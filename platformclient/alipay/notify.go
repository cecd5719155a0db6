package alipay

import (
	"crypto/rsa"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/reconcile"
)

// Sentinels carried in the chain of every ParseNotify error (the same values as the
// platformclient ones, so a handler serving both platforms may use either).
var (
	ErrBadSignature = platformclient.ErrBadSignature
	ErrMalformed    = platformclient.ErrMalformed
)

// NotifySuccess is the exact body that acknowledges a notification; anything else is
// retried by Alipay about 8 times over 25 hours.
const NotifySuccess = "success"

// ParseNotify verifies an asynchronous notification (the raw POST body, form-encoded) with
// Alipay's public key and reads it into a Notification with Source notify. The signature is
// checked first, over every parameter except sign and sign_type, empty values dropped.
//
// A notification that carries out_biz_no is a refund's (Alipay sends the trade notification
// again when a refund succeeds): a Notification.Refund whose OutRefundNo is out_biz_no and
// whose RefundedTotalMinor is refund_fee, the trade's TOTAL refunded so far (AmountMinor
// stays 0: the apply path takes the earlier refunds off), whatever trade_status says
// (TRADE_SUCCESS partly refunded, TRADE_CLOSED fully refunded: not a close). Any other is a
// Notification.Payment.
//
// It checks nothing against the order: the caller compares app_id (MerchantID), seller_id
// (Result.SellerID), out_trade_no and the amounts with its own records. Errors are
// *reconcile.PlatformError whose chain holds ErrBadSignature (answer "fail" and count a
// security event) or ErrMalformed (answer "fail").
func ParseNotify(body []byte, alipayPublicKey *rsa.PublicKey) (reconcile.Notification, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return reconcile.Notification{}, platformclient.Malformed(reconcile.Alipay, "notification is not a form")
	}
	return verifiedNotify(form, body, alipayPublicKey, SettingPublicKey)
}

// ParseNotifyForm is ParseNotify for a form already parsed (r.PostForm); raw is the body,
// used for the RawDigest (pass nil to digest the re-encoded form).
func ParseNotifyForm(form url.Values, raw []byte, alipayPublicKey *rsa.PublicKey) (reconcile.Notification, error) {
	if raw == nil {
		raw = []byte(form.Encode())
	}
	return verifiedNotify(form, raw, alipayPublicKey, SettingPublicKey)
}

// ParseNotify verifies a notification with the client's Alipay public key, or in
// certificate mode with the key of the Alipay certificate (the one its alipay_cert_sn
// names, if it carries one), and reads it as the package-level ParseNotify does.
func (c *Client) ParseNotify(body []byte) (reconcile.Notification, error) {
	n, err := c.parseNotify(body)
	// Debug only: the HTTP handler logs the refusal as the security event, once and
	// sampled under a flood (anyone can post junk to a notify URL).
	if err != nil && reconcile.PlatformErrorKindOf(err) == reconcile.KindBadSignature {
		c.log.Debug().Str("event", "bad_signature").Str("raw_digest", platformclient.Digest(body)).
			Msg("alipay notification failed signature verification; refused")
	}
	return n, err
}

func (c *Client) parseNotify(body []byte) (reconcile.Notification, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return reconcile.Notification{}, platformclient.Malformed(reconcile.Alipay, "notification is not a form")
	}
	key, keyName, err := c.cfg.answerKey(form.Get("alipay_cert_sn"))
	if err != nil {
		// Forged or from a rotated certificate we do not hold: either way not verifiable,
		// and Alipay retries once the operator installed the new certificate.
		var pe *reconcile.PlatformError
		msg := "notification names an unknown alipay_cert_sn"
		if errors.As(err, &pe) {
			msg = pe.Message
		}
		return reconcile.Notification{}, platformclient.NewError(reconcile.Alipay, reconcile.KindBadSignature, "UNKNOWN_ALIPAY_CERT_SN",
			msg, platformclient.ErrBadSignature)
	}
	n, err := verifiedNotify(form, body, key, keyName)
	if err != nil {
		return n, err
	}
	if err := platformclient.CheckNotifyMerchant(reconcile.Alipay, n, c.cfg.AppID, c.subMerchants); err != nil {
		return reconcile.Notification{}, err
	}
	return n, nil
}

// notifyMerchant is the merchant a notification is for: auth_app_id, the merchant's own
// app (it equals app_id when the merchant calls for itself), else app_id.
func notifyMerchant(form url.Values) string {
	if id := form.Get("auth_app_id"); id != "" {
		return id
	}
	return form.Get("app_id")
}

// verifiedNotify checks the sign with pub (keyName says which configured key that is), then
// reads the form as a refund's notification (it names out_biz_no) or a payment's.
func verifiedNotify(form url.Values, raw []byte, pub *rsa.PublicKey, keyName string) (reconcile.Notification, error) {
	if form.Get("sign") == "" {
		return reconcile.Notification{}, platformclient.BadSignature(reconcile.Alipay, "notification carries no sign")
	}
	if st := form.Get("sign_type"); st != "" && st != "RSA2" {
		return reconcile.Notification{}, platformclient.BadSignature(reconcile.Alipay, fmt.Sprintf("notification sign_type %q, want RSA2", st))
	}
	if err := VerifyNotifyParams(pub, form); err != nil {
		return reconcile.Notification{}, platformclient.BadSignature(reconcile.Alipay, "notification signature does not verify with "+keyName)
	}
	if form.Get("out_biz_no") != "" {
		r, err := refundNotify(form, raw)
		if err != nil {
			return reconcile.Notification{}, err
		}
		return reconcile.Notification{Refund: &r}, nil
	}
	res, err := paymentNotify(form, raw)
	if err != nil {
		return reconcile.Notification{}, err
	}
	return reconcile.Notification{Payment: &res}, nil
}

// paymentNotify reads a verified payment notification.
func paymentNotify(form url.Values, raw []byte) (reconcile.Result, error) {
	res := reconcile.Result{
		Platform:        reconcile.Alipay,
		MerchantID:      notifyMerchant(form),
		OutTradeNo:      form.Get("out_trade_no"),
		PlatformTradeNo: form.Get("trade_no"),
		RawState:        form.Get("trade_status"),
		SellerID:        form.Get("seller_id"),
		Source:          reconcile.SourceNotify,
		RawDigest:       platformclient.Digest(raw),
	}
	if res.OutTradeNo == "" || form.Get("app_id") == "" {
		return reconcile.Result{}, platformclient.Malformed(reconcile.Alipay, "notification lacks out_trade_no or app_id")
	}
	state, ok := StateOf(res.RawState)
	if !ok {
		return reconcile.Result{}, platformclient.Malformed(reconcile.Alipay, fmt.Sprintf("notification trade_status %q unknown", res.RawState))
	}
	res.State = state
	if s := form.Get("total_amount"); s != "" {
		fen, err := reconcile.ParseYuan(s)
		if err != nil {
			return reconcile.Result{}, platformclient.Malformed(reconcile.Alipay, fmt.Sprintf("notification total_amount: %v", err))
		}
		res.AmountMinor = fen
	} else if state == reconcile.StatePaid {
		return reconcile.Result{}, platformclient.Malformed(reconcile.Alipay, "paid notification without total_amount")
	}
	if s := form.Get("gmt_payment"); s != "" && state == reconcile.StatePaid {
		t, err := time.ParseInLocation(platformclient.ChinaTimeLayout, s, platformclient.ChinaTime)
		if err != nil {
			return reconcile.Result{}, platformclient.Malformed(reconcile.Alipay, fmt.Sprintf("notification gmt_payment %q unreadable", s))
		}
		res.PaidAt = t
	}
	return res, nil
}

// refundNotify reads a verified refund notification. Alipay notifies only refunds that
// succeeded, so the state is SUCCESS whatever trade_status says; refund_fee is the trade's
// running total, never this refund's own amount.
func refundNotify(form url.Values, raw []byte) (reconcile.RefundResult, error) {
	r := reconcile.RefundResult{
		Platform:        reconcile.Alipay,
		MerchantID:      notifyMerchant(form),
		OutTradeNo:      form.Get("out_trade_no"),
		PlatformTradeNo: form.Get("trade_no"),
		OutRefundNo:     form.Get("out_biz_no"),
		State:           reconcile.RefundStateSuccess,
		RawState:        form.Get("trade_status"),
		Source:          reconcile.SourceNotify,
		RawDigest:       platformclient.Digest(raw),
	}
	if r.OutTradeNo == "" || form.Get("app_id") == "" {
		return reconcile.RefundResult{}, platformclient.Malformed(reconcile.Alipay, "refund notification lacks out_trade_no or app_id")
	}
	fee := form.Get("refund_fee")
	if fee == "" {
		return reconcile.RefundResult{}, platformclient.Malformed(reconcile.Alipay, "refund notification (out_biz_no) without refund_fee")
	}
	total, err := reconcile.ParseYuan(fee)
	if err != nil || total == 0 {
		return reconcile.RefundResult{}, platformclient.Malformed(reconcile.Alipay, fmt.Sprintf("refund notification refund_fee %q unreadable or zero", fee))
	}
	r.RefundedTotalMinor = total
	if s := form.Get("gmt_refund"); s != "" {
		// yyyy-MM-dd HH:mm:ss.S: Go reads a fractional second after the seconds even
		// though the layout has none, and the layout without one as well.
		t, err := time.ParseInLocation(platformclient.ChinaTimeLayout, s, platformclient.ChinaTime)
		if err != nil {
			return reconcile.RefundResult{}, platformclient.Malformed(reconcile.Alipay, fmt.Sprintf("refund notification gmt_refund %q unreadable", s))
		}
		r.SucceededAt = t
	}
	return r, nil
}
