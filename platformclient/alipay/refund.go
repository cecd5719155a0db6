package alipay

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/reconcile"
)

// RefundStatusSuccess is the one refund_status Alipay documents. An answer without it (but
// with refund_amount) is a success too: older answers do not carry the field.
const RefundStatusSuccess = "REFUND_SUCCESS"

// refundQueryBiz is the biz_content of alipay.trade.fastpay.refund.query. A struct, not a
// map: query_options is an array, and the field order reads as the documentation writes it.
type refundQueryBiz struct {
	OutTradeNo   string   `json:"out_trade_no"`
	OutRequestNo string   `json:"out_request_no"`
	QueryOptions []string `json:"query_options"`
}

// refundNode is the part of alipay_trade_fastpay_refund_query_response payrecon reads.
type refundNode struct {
	commonNode
	TradeNo      string               `json:"trade_no"`
	OutTradeNo   string               `json:"out_trade_no"`
	OutRequestNo string               `json:"out_request_no"`
	RefundAmount *platformclient.Yuan `json:"refund_amount"`
	RefundStatus string               `json:"refund_status"`
	GmtRefundPay string               `json:"gmt_refund_pay"`
}

// QueryRefund asks alipay.trade.fastpay.refund.query about the refund outRefundNo (Alipay's
// out_request_no) of the trade outTradeNo, through the same call policy as Query. A refund
// Alipay has not made (never received, or failed) and a trade Alipay does not know are a
// RefundResult with RefundStateNotFound, not an error; both must be signed.
func (c *Client) QueryRefund(ctx context.Context, outTradeNo, outRefundNo string) (reconcile.RefundResult, error) {
	if outTradeNo == "" || outRefundNo == "" {
		return reconcile.RefundResult{}, platformclient.NewError(reconcile.Alipay, reconcile.KindPermanent, "",
			"empty out_trade_no or out_request_no", nil)
	}
	biz := refundQueryBiz{OutTradeNo: outTradeNo, OutRequestNo: outRefundNo,
		// gmt_refund_pay is only sent when asked for: the refund's success time.
		QueryOptions: []string{"gmt_refund_pay"}}
	var res reconcile.RefundResult
	err := c.policy.Do(ctx, MethodRefundQuery, func(ctx context.Context) error {
		a, err := c.call(ctx, MethodRefundQuery, biz)
		if err != nil {
			return err
		}
		res, err = c.refundResult(a, outTradeNo, outRefundNo)
		return err
	})
	if err != nil {
		return reconcile.RefundResult{}, c.logFailure(MethodRefundQuery,
			map[string]string{"out_trade_no": outTradeNo, "out_request_no": outRefundNo}, err)
	}
	return res, nil
}

// refundResult turns a verified refund query answer into a RefundResult.
func (c *Client) refundResult(a answer, wantOutTradeNo, wantOutRefundNo string) (reconcile.RefundResult, error) {
	code, sub := string(a.common.Code), normSubCode(a.common.SubCode)
	base := reconcile.RefundResult{
		Platform:    reconcile.Alipay,
		MerchantID:  c.MerchantID(),
		OutTradeNo:  wantOutTradeNo,
		OutRefundNo: wantOutRefundNo,
		RawDigest:   platformclient.Digest(a.raw),
	}
	switch {
	case code == codeSuccess:
	case code == codeBusinessFailed && sub == subTradeNotExist:
	default:
		return reconcile.RefundResult{}, classify(a.common)
	}
	// Both answers change state (a success lands the refund, "none" becomes a finding once
	// the refund is old): neither is evidence unless Alipay signed it.
	if !a.verified {
		return reconcile.RefundResult{}, c.badSignature(MethodRefundQuery, a, "refund answer "+code+" without a valid sign")
	}
	var n refundNode
	if err := json.Unmarshal(a.env.Node, &n); err != nil {
		// Signed yet unreadable (an amount with three decimals): the same bytes come back
		// next time, so this is permanent for the refund.
		return reconcile.RefundResult{}, platformclient.NewError(reconcile.Alipay, reconcile.KindPermanent, "UNREADABLE",
			"signed refund answer has unreadable fields", err)
	}
	if err := c.sameRefund(a, n, wantOutTradeNo, wantOutRefundNo); err != nil {
		return reconcile.RefundResult{}, err
	}
	if code != codeSuccess {
		base.State = reconcile.RefundStateNotFound
		base.RawState = a.common.SubCode
		return base, nil
	}
	return c.readRefundNode(base, n)
}

// readRefundNode reads a verified 10000 answer: with refund_amount the refund succeeded,
// without it Alipay has no successful refund of that number.
func (c *Client) readRefundNode(res reconcile.RefundResult, n refundNode) (reconcile.RefundResult, error) {
	res.PlatformTradeNo = n.TradeNo
	res.RawState = n.RefundStatus
	if n.OutTradeNo != "" {
		res.OutTradeNo = n.OutTradeNo
	}
	if n.RefundAmount == nil || *n.RefundAmount == 0 {
		// Never received, or failed (the merchant may try again): no money went back.
		res.State = reconcile.RefundStateNotFound
		return res, nil
	}
	if n.RefundStatus != "" && n.RefundStatus != RefundStatusSuccess {
		// A word Alipay does not document proves neither a success nor an absence: move
		// nothing and ask again later.
		res.State = reconcile.RefundStateProcessing
		return res, nil
	}
	res.State = reconcile.RefundStateSuccess
	res.AmountMinor = int64(*n.RefundAmount)
	if n.GmtRefundPay != "" {
		t, err := time.ParseInLocation(platformclient.ChinaTimeLayout, n.GmtRefundPay, platformclient.ChinaTime)
		if err != nil {
			return reconcile.RefundResult{}, platformclient.NewError(reconcile.Alipay, reconcile.KindPermanent, "UNREADABLE",
				fmt.Sprintf("unreadable gmt_refund_pay %q", n.GmtRefundPay), nil)
		}
		res.SucceededAt = t
	}
	return res, nil
}

// sameRefund refuses a signed answer about another trade or refund than the one asked
// for: a replayed answer must not settle the wrong refund.
func (c *Client) sameRefund(a answer, n refundNode, wantOutTradeNo, wantOutRefundNo string) error {
	if n.OutTradeNo != "" && n.OutTradeNo != wantOutTradeNo {
		return c.badSignature(MethodRefundQuery, a, fmt.Sprintf("answer names out_trade_no %q, asked for %q", n.OutTradeNo, wantOutTradeNo))
	}
	if n.OutRequestNo != "" && n.OutRequestNo != wantOutRefundNo {
		return c.badSignature(MethodRefundQuery, a, fmt.Sprintf("answer names out_request_no %q, asked for %q", n.OutRequestNo, wantOutRefundNo))
	}
	return nil
}
