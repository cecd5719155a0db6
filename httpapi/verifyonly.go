package httpapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/platformclient/wechatpay"
	"github.com/payrecon/payrecon/reconcile"
)

// AlipayNotifyReader verifies and reads one app's notification (a payment's or a
// refund's): an *alipay.Client's ParseNotify, or one that holds Alipay's public key alone.
type AlipayNotifyReader func(body []byte) (reconcile.Notification, error)

// WechatNotifyReader verifies and reads one merchant's callbacks: a *wechatpay.Client, or
// a WechatVerifier when serve runs without the merchant's private key.
type WechatNotifyReader interface {
	MerchantID() string
	HoldsSerial(serial string) bool
	KnowsSerial(ctx context.Context, serial string) bool
	ParseNotifyContext(ctx context.Context, h http.Header, body []byte) (reconcile.Notification, error)
}

// WechatVerifier reads a merchant's callbacks with the WeChat Pay public key and the API v3
// key alone. Platform certificates cannot serve here: downloading them is a signed request.
type WechatVerifier struct {
	mchID, publicKeyID string
	verifier           *wechatpay.NotifyVerifier
	subMerchants       map[string]bool // a service provider's sub_mchids, whose callbacks it reads too
}

// AcceptSubMerchants lets a service provider's callbacks name these sub-merchants (the
// sub_mchids as keys); any other is refused like a bad signature. Call it before serving.
func (v *WechatVerifier) AcceptSubMerchants(subMchIDs map[string]bool) { v.subMerchants = subMchIDs }

// NewWechatVerifier reads mchID's callbacks signed by the public key publicKeyID names.
func NewWechatVerifier(mchID, publicKeyID string, v *wechatpay.NotifyVerifier) *WechatVerifier {
	return &WechatVerifier{mchID: mchID, publicKeyID: publicKeyID, verifier: v}
}

func (v *WechatVerifier) MerchantID() string { return v.mchID }

func (v *WechatVerifier) HoldsSerial(serial string) bool {
	serial = strings.TrimSpace(serial)
	return serial != "" && strings.EqualFold(serial, v.publicKeyID)
}

func (v *WechatVerifier) KnowsSerial(_ context.Context, serial string) bool {
	return v.HoldsSerial(serial)
}

func (v *WechatVerifier) ParseNotifyContext(_ context.Context, h http.Header, body []byte) (reconcile.Notification, error) {
	n, err := v.verifier.ParseNotify(h, body)
	if err == nil {
		err = platformclient.CheckNotifyMerchant(reconcile.WechatPay, n, v.mchID, v.subMerchants)
	}
	if err != nil {
		return reconcile.Notification{}, err
	}
	return n, nil
}
