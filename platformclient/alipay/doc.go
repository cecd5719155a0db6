// Package alipay speaks Alipay's OpenAPI gateway protocol (v1, RSA2) for what payrecon
// needs: alipay.trade.query (by out_trade_no or trade_no), alipay.trade.close,
// alipay.trade.fastpay.refund.query (QueryRefund), and the asynchronous trade notification,
// which ParseNotify reads as a payment's, or as a refund's when it carries out_biz_no
// (refund_fee is then the trade's running total).
//
// Requests are signed over every parameter except sign (sign_type included), empty values
// dropped, sorted, joined raw as k=v&...; SHA256withRSA, PKCS#1 v1.5, standard base64.
// Answers are verified over the raw bytes of the response node, exactly as sent, with the
// official SDKs' one retry after replacing `\/` by `/`. A success answer that does not
// verify is never turned into a Result.
//
// Both credential modes: public-key mode (Config.AlipayPublicKey) and certificate mode
// (Config.Cert, built by NewCertMode from the app, Alipay and root certificate files).
// Certificate mode adds app_cert_sn and alipay_root_cert_sn to every request and verifies
// each answer with the Alipay certificate its alipay_cert_sn names; an SN we do not hold
// means Alipay rotated its certificate and is a KindConfig error naming it. CertSN and
// RootCertSN compute the SNs exactly as the official Java SDK does.
//
// Errors: every method returns *reconcile.PlatformError. KindConfig messages name the
// setting to fix (RECONCILER_ALIPAY_APP_ID, RECONCILER_ALIPAY_PRIVATE_KEY_FILE, ...).
// ParseNotify's errors also carry ErrBadSignature or ErrMalformed (the platformclient
// sentinels) so the callback handler can answer "fail" and count security events.
package alipay
