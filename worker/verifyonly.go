package worker

import (
	"crypto/rsa"
	"fmt"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/httpapi"
	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/platformclient/alipay"
	"github.com/payrecon/payrecon/platformclient/wechatpay"
	"github.com/payrecon/payrecon/reconcile"
)

// alipayVerifier reads an app's notifications with Alipay's public key (or, in certificate
// mode, the key of Alipay's certificate) alone: no private key, no platform call.
func (a *App) alipayVerifier(acct config.AlipayAccount) (httpapi.AlipayNotifyReader, error) {
	fail := acct.FieldError
	var pub *rsa.PublicKey
	if acct.CertMode() {
		cert, err := readAccountFile(fail, "alipay_cert_file", acct.AlipayCertFile, alipay.ParseCertificate)
		if err != nil {
			return nil, err
		}
		var ok bool
		if pub, ok = cert.PublicKey.(*rsa.PublicKey); !ok {
			return nil, fail("alipay_cert_file", "the certificate's key is not RSA")
		}
	} else {
		var err error
		if pub, err = readAccountFile(fail, "public_key_file", acct.PublicKeyFile, platformclient.LoadPublicKey); err != nil {
			return nil, err
		}
	}
	subs := subMerchantIDs(acct.SubMerchants, func(s config.AlipaySubMerchant) string { return s.AuthAppID })
	return func(body []byte) (reconcile.Notification, error) {
		n, err := alipay.ParseNotify(body, pub)
		if err == nil {
			err = platformclient.CheckNotifyMerchant(reconcile.Alipay, n, acct.AppID, subs)
		}
		if err != nil {
			return reconcile.Notification{}, err
		}
		return n, nil
	}, nil
}

// wechatVerifier reads a merchant's callbacks with the WeChat Pay public key and the API v3
// key alone.
func (a *App) wechatVerifier(acct config.WechatAccount) (*httpapi.WechatVerifier, error) {
	fail := acct.FieldError
	v3, err := readKeyFile(a, fail, "apiv3_key_file", acct.APIv3KeyFile, wechatpay.ParseAPIv3Key)
	if err != nil {
		return nil, err
	}
	pub, err := readAccountFile(fail, "public_key_file", acct.PublicKeyFile, platformclient.LoadPublicKey)
	if err != nil {
		return nil, err
	}
	nv, err := wechatpay.NewNotifyVerifier(pub, acct.PublicKeyID, v3, nil)
	if err != nil {
		return nil, fail("public_key_id", fmt.Sprintf("cannot verify callbacks: %v", err))
	}
	v := httpapi.NewWechatVerifier(acct.ID(), acct.PublicKeyID, nv)
	v.AcceptSubMerchants(subMerchantIDs(acct.SubMerchants, func(s config.WechatSubMerchant) string { return s.SubMchID }))
	return v, nil
}
