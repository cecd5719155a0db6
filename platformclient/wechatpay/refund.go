package wechatpay

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/reconcile"
)

// RefundPath is the refund query's path; the merchant's out_refund_no follows it.
const RefundPath = "/v3/refund/domestic/refunds/"

// Refund statuses (status in query answers, refund_status in callbacks).
const (
	RefundSuccess    = "SUCCESS"
	RefundClosed     = "CLOSED"
	RefundProcessing = "PROCESSING"
	RefundAbnormal   = "ABNORMAL"
)

// codeRefundNotExists is the 404 of a refund WeChat Pay does not know.
const codeRefundNotExists = "RESOURCE_NOT_EXISTS"

// Refund is the refund object of query answers and of decrypted refund callbacks. The
// query names its state status, the callback refund_status.
type Refund struct {
	MchID string `json:"mchid,omitempty"`
	// A service provider's refund callback names the provider and the sub-merchant instead.
	SpMchID       string        `json:"sp_mchid,omitempty"`
	SubMchID      string        `json:"sub_mchid,omitempty"`
	OutTradeNo    string        `json:"out_trade_no"`
	TransactionID string        `json:"transaction_id,omitempty"`
	OutRefundNo   string        `json:"out_refund_no"`
	RefundID      string        `json:"refund_id,omitempty"`
	Status        string        `json:"status,omitempty"`
	RefundStatus  string        `json:"refund_status,omitempty"`
	SuccessTime   string        `json:"success_time,omitempty"`
	Amount        *RefundAmount `json:"amount,omitempty"`
}

// RefundAmount is in fen: JSON integers, decoded as int64, never through float64. Refund
// is this refund's amount; Total what the order was paid.
type RefundAmount struct {
	Total       *int64 `json:"total,omitempty"`
	Refund      *int64 `json:"refund,omitempty"`
	PayerTotal  *int64 `json:"payer_total,omitempty"`
	PayerRefund *int64 `json:"payer_refund,omitempty"`
	Currency    string `json:"currency,omitempty"`
}

// RefundStateOf maps a refund status to the normalised state.
func RefundStateOf(status string) (reconcile.RefundState, bool) {
	switch status {
	case RefundSuccess:
		return reconcile.RefundStateSuccess, true
	case RefundClosed:
		return reconcile.RefundStateClosed, true
	case RefundProcessing:
		return reconcile.RefundStateProcessing, true
	case RefundAbnormal:
		return reconcile.RefundStateAbnormal, true
	}
	return "", false
}

// toRefundResult reads a verified refund object. The error text is for the caller to wrap.
func (r Refund) toRefundResult() (reconcile.RefundResult, error) {
	status := r.Status
	if status == "" {
		status = r.RefundStatus
	}
	state, ok := RefundStateOf(status)
	if !ok {
		return reconcile.RefundResult{}, fmt.Errorf("unknown refund status %q", status)
	}
	if r.OutRefundNo == "" {
		return reconcile.RefundResult{}, fmt.Errorf("refund without out_refund_no")
	}
	merchant := r.MchID
	if r.SubMchID != "" {
		merchant = r.SubMchID
	}
	res := reconcile.RefundResult{
		Platform:         reconcile.WechatPay,
		MerchantID:       merchant,
		OutTradeNo:       r.OutTradeNo,
		PlatformTradeNo:  r.TransactionID,
		OutRefundNo:      r.OutRefundNo,
		PlatformRefundNo: r.RefundID,
		State:            state,
		RawState:         status,
	}
	if r.Amount == nil || r.Amount.Refund == nil {
		return reconcile.RefundResult{}, fmt.Errorf("refund without amount.refund")
	}
	if *r.Amount.Refund < 0 {
		return reconcile.RefundResult{}, fmt.Errorf("negative amount.refund")
	}
	res.AmountMinor = *r.Amount.Refund
	res.Currency = r.Amount.Currency
	if r.SuccessTime != "" {
		at, err := time.Parse(time.RFC3339, r.SuccessTime)
		if err != nil {
			return reconcile.RefundResult{}, fmt.Errorf("unreadable success_time %q", r.SuccessTime)
		}
		res.SucceededAt = at
	}
	return res, nil
}

// QueryRefund asks GET /v3/refund/domestic/refunds/{out_refund_no}, through the same call
// policy as Query. outTradeNo is not part of the request (WeChat Pay finds a refund by its
// number alone); it names the order of a refund WeChat Pay does not know. That answer, 404
// RESOURCE_NOT_EXISTS, is a RefundResult with RefundStateNotFound only when it verifies.
func (c *Client) QueryRefund(ctx context.Context, outTradeNo, outRefundNo string) (reconcile.RefundResult, error) {
	if outRefundNo == "" {
		return reconcile.RefundResult{}, platformclient.NewError(reconcile.WechatPay, reconcile.KindPermanent, "", "empty out_refund_no", nil)
	}
	path := RefundPath + url.PathEscape(outRefundNo)
	if c.subMchID != "" {
		path += "?sub_mchid=" + url.QueryEscape(c.subMchID)
	}
	var res reconcile.RefundResult
	err := c.policy.Do(ctx, "refund query", func(ctx context.Context) error {
		a, err := c.call(ctx, http.MethodGet, path, nil)
		if err != nil {
			return err
		}
		res, err = c.refundResult(ctx, a, outTradeNo, outRefundNo)
		return err
	})
	if err != nil {
		return reconcile.RefundResult{}, c.logFailure("refund query "+outRefundNo, outTradeNo, err)
	}
	return res, nil
}

// refundResult turns a refund query answer into a RefundResult: a verified 2xx refund, or
// the verified not-found answer.
func (c *Client) refundResult(ctx context.Context, a answer, wantOutTradeNo, wantOutRefundNo string) (reconcile.RefundResult, error) {
	if a.status/100 != 2 {
		if a.status != http.StatusNotFound || a.apiErr.Code != codeRefundNotExists {
			return reconcile.RefundResult{}, classify(a.status, a.apiErr)
		}
		// Not-found becomes a finding once the refund is old: evidence only when signed.
		if err := c.verifySignedError(ctx, a); err != nil {
			return reconcile.RefundResult{}, err
		}
		return reconcile.RefundResult{
			Platform:    reconcile.WechatPay,
			MerchantID:  c.MerchantID(),
			OutTradeNo:  wantOutTradeNo,
			OutRefundNo: wantOutRefundNo,
			State:       reconcile.RefundStateNotFound,
			RawState:    a.apiErr.Code,
			RawDigest:   platformclient.Digest(a.raw),
		}, nil
	}
	var r Refund
	if err := json.Unmarshal(a.raw, &r); err != nil {
		// Verified bytes that do not parse will not parse next time either.
		return reconcile.RefundResult{}, platformclient.NewError(reconcile.WechatPay, reconcile.KindPermanent, "UNREADABLE",
			"signed answer is not a refund", err)
	}
	res, err := r.toRefundResult()
	if err != nil {
		return reconcile.RefundResult{}, platformclient.NewError(reconcile.WechatPay, reconcile.KindPermanent, "UNREADABLE", err.Error(), nil)
	}
	if res.OutRefundNo != wantOutRefundNo {
		return reconcile.RefundResult{}, c.badSignature(a, fmt.Sprintf("answer names out_refund_no %q, asked for %q", res.OutRefundNo, wantOutRefundNo))
	}
	// Query answers name no mchid: the refund is the asking merchant's (the sub-merchant's,
	// whose sub_mchid the query named). An out_trade_no other than the one expected is left
	// for the apply path, which records it.
	res.MerchantID = c.MerchantID()
	if res.OutTradeNo == "" {
		res.OutTradeNo = wantOutTradeNo
	}
	res.RawDigest = platformclient.Digest(a.raw)
	return res, nil
}
