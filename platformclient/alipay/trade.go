package alipay

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/reconcile"
)

// Trade statuses (trade_status).
const (
	StatusWaitBuyerPay  = "WAIT_BUYER_PAY"
	StatusTradeClosed   = "TRADE_CLOSED"
	StatusTradeSuccess  = "TRADE_SUCCESS"
	StatusTradeFinished = "TRADE_FINISHED"
)

// tradeNode is the part of alipay_trade_query_response payrecon reads.
type tradeNode struct {
	commonNode
	TradeNo     string               `json:"trade_no"`
	OutTradeNo  string               `json:"out_trade_no"`
	TradeStatus string               `json:"trade_status"`
	TotalAmount *platformclient.Yuan `json:"total_amount"`
	SendPayDate string               `json:"send_pay_date"`
	SellerID    string               `json:"seller_id"`
	BuyerUserID string               `json:"buyer_user_id"`
}

// StateOf maps trade_status to the normalised state. TRADE_CLOSED stays StateClosed here:
// a trade query tells a fully refunded trade from an unpaid one by its send_pay_date
// (queryResult), and on a locally paid order the domain reads a close as a refund anyway.
func StateOf(tradeStatus string) (reconcile.PlatformState, bool) {
	switch tradeStatus {
	case StatusTradeSuccess, StatusTradeFinished:
		return reconcile.StatePaid, true
	case StatusWaitBuyerPay:
		return reconcile.StateOpen, true
	case StatusTradeClosed:
		return reconcile.StateClosed, true
	}
	return "", false
}

// queryResult turns a verified alipay.trade.query answer into a Result.
func (c *Client) queryResult(a answer, wantOutTradeNo string) (reconcile.Result, error) {
	code, sub := string(a.common.Code), normSubCode(a.common.SubCode)
	base := reconcile.Result{
		Platform:   reconcile.Alipay,
		MerchantID: c.MerchantID(),
		OutTradeNo: wantOutTradeNo,
		RawDigest:  platformclient.Digest(a.raw),
	}
	switch {
	case code == codeSuccess:
		if !a.verified {
			// Never apply an unsigned or forged success.
			return reconcile.Result{}, c.badSignature(MethodTradeQuery, a, "success answer without a valid sign")
		}
	case code == codeBusinessFailed && sub == subTradeNotExist:
		// Not-found closes expired orders locally: it changes state, so it must be signed.
		if !a.verified {
			return reconcile.Result{}, c.badSignature(MethodTradeQuery, a, "trade-not-exist answer without a valid sign")
		}
		if err := c.sameTrade(a, wantOutTradeNo); err != nil {
			return reconcile.Result{}, err
		}
		base.State = reconcile.StateNotFound
		base.RawState = a.common.SubCode
		return base, nil
	default:
		return reconcile.Result{}, classify(a.common)
	}

	var n tradeNode
	if err := json.Unmarshal(a.env.Node, &n); err != nil {
		// Signed by Alipay yet unreadable (an amount with three decimals...): asking again
		// returns the same bytes, so this is permanent for the order.
		return reconcile.Result{}, platformclient.NewError(reconcile.Alipay, reconcile.KindPermanent, "UNREADABLE",
			"signed trade answer has unreadable fields", err)
	}
	if err := c.sameTrade(a, wantOutTradeNo); err != nil {
		return reconcile.Result{}, err
	}
	state, ok := StateOf(n.TradeStatus)
	if !ok {
		return reconcile.Result{}, platformclient.NewError(reconcile.Alipay, reconcile.KindPermanent, "UNKNOWN_STATUS",
			fmt.Sprintf("unknown trade_status %q", n.TradeStatus), nil)
	}
	if state == reconcile.StateClosed && n.SendPayDate != "" {
		// Closed after it was paid: refunded in full, never a close. An unpaid trade that
		// timed out has no payment date; reading this one as a close would close a
		// PENDING order whose payment and refund callbacks were both lost.
		state = reconcile.StateRefunded
	}
	res := base
	res.OutTradeNo = n.OutTradeNo
	if res.OutTradeNo == "" {
		res.OutTradeNo = wantOutTradeNo
	}
	res.PlatformTradeNo = n.TradeNo
	res.State = state
	res.RawState = n.TradeStatus
	res.SellerID = n.SellerID
	if n.TotalAmount != nil {
		res.AmountMinor = int64(*n.TotalAmount)
	}
	if (state == reconcile.StatePaid || state == reconcile.StateRefunded) && n.SendPayDate != "" {
		t, err := time.ParseInLocation(platformclient.ChinaTimeLayout, n.SendPayDate, platformclient.ChinaTime)
		if err != nil {
			return reconcile.Result{}, platformclient.NewError(reconcile.Alipay, reconcile.KindPermanent, "UNREADABLE",
				fmt.Sprintf("unreadable send_pay_date %q", n.SendPayDate), nil)
		}
		res.PaidAt = t
	}
	if state == reconcile.StatePaid && n.TotalAmount == nil {
		return reconcile.Result{}, platformclient.NewError(reconcile.Alipay, reconcile.KindPermanent, "UNREADABLE",
			"paid trade answer without total_amount", nil)
	}
	return res, nil
}

// sameTrade refuses a signed answer about another trade than the one asked for: a replayed
// answer must not repair the wrong order.
func (c *Client) sameTrade(a answer, want string) error {
	if want == "" {
		return nil
	}
	var ids struct {
		OutTradeNo string `json:"out_trade_no"`
	}
	_ = json.Unmarshal(a.env.Node, &ids)
	if ids.OutTradeNo != "" && ids.OutTradeNo != want {
		return c.badSignature(MethodTradeQuery, a, fmt.Sprintf("answer names out_trade_no %q, asked for %q", ids.OutTradeNo, want))
	}
	return nil
}
