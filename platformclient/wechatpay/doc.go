// Package wechatpay speaks WeChat Pay API v3 for what payrecon needs: querying an order by
// out_trade_no (or transaction_id), closing it, and reading the payment callback.
//
// Requests carry the WECHATPAY2-SHA256-RSA2048 Authorization header, signed over
// "METHOD\nPATH?QUERY\nTIMESTAMP\nNONCE\nBODY\n" with the merchant key. Answers (2xx, like
// wechatpay-go) and callbacks are verified over "TIMESTAMP\nNONCE\nBODY\n" with the WeChat
// Pay public key: Wechatpay-Serial must equal the configured public key id, the timestamp
// must be within 300 s of now, and WECHATPAY/SIGNTEST/ probe signatures always fail.
// Platform certificates (the older scheme) are not supported: configure the public key.
//
// Error answers (non-2xx) are read to classify the failure only. The one error answer that
// becomes a Result, 404 ORDER_NOT_EXIST, is verified too when it carries signature headers,
// because "not found" lets the reconciler close an expired order.
//
// Errors: every method returns *reconcile.PlatformError. ParseNotify's errors also carry
// ErrBadSignature (answer 401) or ErrMalformed (answer 400) in their chain.
package wechatpay
