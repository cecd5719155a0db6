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
// Alipay's public key and reads it into a Result with Source notify. The signature is
// checked first, over every parameter except sign and sign_type, empty values dropped.
//
// It checks nothing against the order: the caller compares app_id (Result.MerchantID),
// seller_id (Result.SellerID), out_trade_no and total_amount with its own records.
// Errors are *reconcile.PlatformError whose chain holds ErrBadSignature (answer "fail" and
// count a security event) or ErrMalformed (answer "fail").
func ParseNotify(body []byte, alipayPublicKey *rsa.PublicKey) (reconcile.Result, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return reconcile.Result{}, platformclient.Malformed(reconcile.Alipay, "notification is not a form")
	}
	return verifiedNotify(form, body, alipayPublicKey, SettingPublicKey)
}

// ParseNotifyForm is ParseNotify for a form already parsed (r.PostForm); raw is the body,
// used for Result.RawDigest (pass nil to digest the re-encoded form).
func ParseNotifyForm(form url.Values, raw []byte, alipayPublicKey *rsa.PublicKey) (reconcile.Result, error) {
	if raw == nil {
		raw = []byte(form.Encode())
	}
	return verifiedNotify(form, raw, alipayPublicKey, SettingPublicKey)
}

// ParseNotify verifies a notification with the client's Alipay public key, or in
// certificate mode with the key of the Alipay certificate (the one its alipay_cert_sn
// names, if it carries one).
func (c *Client) ParseNotify(body []byte) (reconcile.Result, error) {
	res, err := c.parseNotify(body)
	// Debug only: the HTTP handler logs the refusal as the security event, once and
	// sampled under a flood (anyone can post junk to a notify URL).
	if err != nil && reconcile.PlatformErrorKindOf(err) == reconcile.KindBadSignature {
		c.log.Debug().Str("event", "bad_signature").Str("raw_digest", platformclient.Digest(body)).
			Msg("alipay notification failed signature verification; refused")
	}
	return res, err
}

func (c *Client) parseNotify(body []byte) (reconcile.Result, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return reconcile.Result{}, platformclient.Malformed(reconcile.Alipay, "notification is not a form")
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
		return reconcile.Result{}, platformclient.NewError(reconcile.Alipay, reconcile.KindBadSignature, "UNKNOWN_ALIPAY_CERT_SN",
			msg, platformclient.ErrBadSignature)
	}
	return verifiedNotify(form, body, key, keyName)
}

// verifiedNotify checks the sign with pub (keyName says which configured key that is) and
// reads the form.
func verifiedNotify(form url.Values, raw []byte, pub *rsa.PublicKey, keyName string) (reconcile.Result, error) {
	if form.Get("sign") == "" {
		return reconcile.Result{}, platformclient.BadSignature(reconcile.Alipay, "notification carries no sign")
	}
	if st := form.Get("sign_type"); st != "" && st != "RSA2" {
		return reconcile.Result{}, platformclient.BadSignature(reconcile.Alipay, fmt.Sprintf("notification sign_type %q, want RSA2", st))
	}
	if err := VerifyNotifyParams(pub, form); err != nil {
		return reconcile.Result{}, platformclient.BadSignature(reconcile.Alipay, "notification signature does not verify with "+keyName)
	}

	res := reconcile.Result{
		Platform:        reconcile.Alipay,
		MerchantID:      form.Get("app_id"),
		OutTradeNo:      form.Get("out_trade_no"),
		PlatformTradeNo: form.Get("trade_no"),
		RawState:        form.Get("trade_status"),
		SellerID:        form.Get("seller_id"),
		Source:          reconcile.SourceNotify,
		RawDigest:       platformclient.Digest(raw),
	}
	if res.OutTradeNo == "" || res.MerchantID == "" {
		return reconcile.Result{}, platformclient.Malformed(reconcile.Alipay, "notification lacks out_trade_no or app_id")
	}
	state, ok := StateOf(res.RawState)
	if !ok {
		return reconcile.Result{}, platformclient.Malformed(reconcile.Alipay, fmt.Sprintf("notification trade_status %q unknown", res.RawState))
	}
	res.State = state
	if s := form.Get("total_amount"); s != "" {
		fen, err := platformclient.ParseYuan(s)
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
