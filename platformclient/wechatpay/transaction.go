package wechatpay

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/reconcile"
)

// Trade states (trade_state).
const (
	StateSuccess    = "SUCCESS"
	StateRefund     = "REFUND"
	StateNotPay     = "NOTPAY"
	StateClosed     = "CLOSED"
	StateRevoked    = "REVOKED"
	StateUserPaying = "USERPAYING"
	StatePayError   = "PAYERROR"
)

// Transaction is the order object of query answers and of decrypted callbacks.
type Transaction struct {
	AppID string `json:"appid"`
	MchID string `json:"mchid"`
	// The partner form (a service provider's sub-merchant) names the provider and the
	// sub-merchant instead of appid and mchid.
	SpAppID        string  `json:"sp_appid,omitempty"`
	SpMchID        string  `json:"sp_mchid,omitempty"`
	SubAppID       string  `json:"sub_appid,omitempty"`
	SubMchID       string  `json:"sub_mchid,omitempty"`
	OutTradeNo     string  `json:"out_trade_no"`
	TransactionID  string  `json:"transaction_id,omitempty"`
	TradeType      string  `json:"trade_type,omitempty"`
	TradeState     string  `json:"trade_state"`
	TradeStateDesc string  `json:"trade_state_desc,omitempty"`
	BankType       string  `json:"bank_type,omitempty"`
	Attach         string  `json:"attach,omitempty"`
	SuccessTime    string  `json:"success_time,omitempty"`
	Payer          *Payer  `json:"payer,omitempty"`
	Amount         *Amount `json:"amount,omitempty"`
}

// Payer identifies the buyer (by the provider's and the sub-merchant's app in the partner
// form).
type Payer struct {
	OpenID    string `json:"openid,omitempty"`
	SpOpenID  string `json:"sp_openid,omitempty"`
	SubOpenID string `json:"sub_openid,omitempty"`
}

// Amount is in fen: JSON integers, decoded as int64, never through float64.
type Amount struct {
	Total         *int64 `json:"total,omitempty"`
	PayerTotal    *int64 `json:"payer_total,omitempty"`
	Currency      string `json:"currency,omitempty"`
	PayerCurrency string `json:"payer_currency,omitempty"`
}

// StateOf maps trade_state to the normalised state.
func StateOf(tradeState string) (reconcile.PlatformState, bool) {
	switch tradeState {
	case StateSuccess:
		return reconcile.StatePaid, true
	case StateNotPay, StateUserPaying:
		return reconcile.StateOpen, true
	case StateClosed:
		return reconcile.StateClosed, true
	case StateRefund:
		return reconcile.StateRefunded, true
	case StatePayError, StateRevoked:
		return reconcile.StateFailed, true
	}
	return "", false
}

// toResult reads a verified transaction. The error text is for the caller to wrap.
func (t Transaction) toResult() (reconcile.Result, error) {
	state, ok := StateOf(t.TradeState)
	if !ok {
		return reconcile.Result{}, fmt.Errorf("unknown trade_state %q", t.TradeState)
	}
	if t.OutTradeNo == "" {
		return reconcile.Result{}, fmt.Errorf("transaction without out_trade_no")
	}
	res := reconcile.Result{
		Platform:        reconcile.WechatPay,
		MerchantID:      t.MchID,
		OutTradeNo:      t.OutTradeNo,
		PlatformTradeNo: t.TransactionID,
		State:           state,
		RawState:        t.TradeState,
		SellerID:        t.AppID,
	}
	if t.SubMchID != "" {
		// The order is the sub-merchant's; the app to check is its own (sub_appid), when
		// it has one.
		res.MerchantID, res.SellerID = t.SubMchID, t.SubAppID
	}
	if t.Amount != nil {
		if t.Amount.Total != nil {
			if *t.Amount.Total < 0 {
				return reconcile.Result{}, fmt.Errorf("negative amount.total")
			}
			res.AmountMinor = *t.Amount.Total
		}
		res.Currency = t.Amount.Currency
	}
	if state == reconcile.StatePaid && (t.Amount == nil || t.Amount.Total == nil) {
		return reconcile.Result{}, fmt.Errorf("paid transaction without amount.total")
	}
	if t.SuccessTime != "" && (state == reconcile.StatePaid || state == reconcile.StateRefunded) {
		at, err := time.Parse(time.RFC3339, t.SuccessTime)
		if err != nil {
			return reconcile.Result{}, fmt.Errorf("unreadable success_time %q", t.SuccessTime)
		}
		res.PaidAt = at
	}
	return res, nil
}

// queryResult turns a query answer into a Result: a verified 2xx transaction, or the
// not-found answer.
func (c *Client) queryResult(ctx context.Context, a answer, wantOutTradeNo string) (reconcile.Result, error) {
	if a.status/100 != 2 {
		if a.status == http.StatusNotFound && a.apiErr.Code == "ORDER_NOT_EXIST" {
			// Not-found lets the reconciler close an expired order, so it is evidence only
			// when it verifies, as Alipay's is.
			if err := c.verifySignedError(ctx, a); err != nil {
				return reconcile.Result{}, err
			}
			return reconcile.Result{
				Platform:   reconcile.WechatPay,
				MerchantID: c.MerchantID(),
				OutTradeNo: wantOutTradeNo,
				State:      reconcile.StateNotFound,
				RawState:   a.apiErr.Code,
				RawDigest:  platformclient.Digest(a.raw),
			}, nil
		}
		return reconcile.Result{}, classify(a.status, a.apiErr)
	}
	var t Transaction
	if err := json.Unmarshal(a.raw, &t); err != nil {
		// Verified bytes that do not parse will not parse next time either.
		return reconcile.Result{}, platformclient.NewError(reconcile.WechatPay, reconcile.KindPermanent, "UNREADABLE",
			"signed answer is not a transaction", err)
	}
	res, err := t.toResult()
	if err != nil {
		return reconcile.Result{}, platformclient.NewError(reconcile.WechatPay, reconcile.KindPermanent, "UNREADABLE", err.Error(), nil)
	}
	if wantOutTradeNo != "" && res.OutTradeNo != wantOutTradeNo {
		return reconcile.Result{}, c.badSignature(a, fmt.Sprintf("answer names out_trade_no %q, asked for %q", res.OutTradeNo, wantOutTradeNo))
	}
	if c.subMchID != "" && res.MerchantID != c.subMchID {
		// A provider's signature covers every sub-merchant's answers: one about another
		// sub-merchant's order must not be applied to this one's.
		return reconcile.Result{}, c.badSignature(a, fmt.Sprintf("answer names sub_mchid %q, asked for %q", res.MerchantID, c.subMchID))
	}
	if res.MerchantID == "" {
		res.MerchantID = c.MerchantID()
	}
	res.RawDigest = platformclient.Digest(a.raw)
	return res, nil
}

// verifySignedError verifies an error answer that is to become evidence (a not-found):
// WeChat Pay signs error answers too, and anyone on the path can strip the headers, so an
// unsigned one is a bad signature, never "not found".
func (c *Client) verifySignedError(ctx context.Context, a answer) error {
	if !hasSignatureHeaders(a.header) {
		return c.badSignature(a, "unsigned "+a.apiErr.Code+" answer")
	}
	return c.verify(ctx, a)
}
