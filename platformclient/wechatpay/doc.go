// Package wechatpay speaks WeChat Pay API v3 for what payrecon needs: querying an order by
// out_trade_no (or transaction_id), closing it, querying a refund (QueryRefund), and
// reading callbacks, routed on their event_type: TRANSACTION.* a payment, REFUND.* a
// refund, any other verified and ignored.
//
// Requests carry the WECHATPAY2-SHA256-RSA2048 Authorization header, signed over
// "METHOD\nPATH?QUERY\nTIMESTAMP\nNONCE\nBODY\n" with the merchant key. Answers (2xx, like
// wechatpay-go) and callbacks are verified over "TIMESTAMP\nNONCE\nBODY\n": the timestamp
// must be within 300 s of now, WECHATPAY/SIGNTEST/ probe signatures always fail, and the
// Wechatpay-Serial header picks the key. The configured public key id selects the WeChat
// Pay public key, which every request names in its own Wechatpay-Serial header. Any other
// serial selects a platform certificate (the older scheme, and merchants migrating from
// it): with an API v3 key configured, the client downloads GET /v3/certificates through
// the same call policy as queries, decrypts them with the API v3 key, keeps the newest
// few, downloads again when a serial is unknown or the set is 12 h old (one download at a
// time, at most one a minute), keeps the last good set when a download fails, and refuses
// a serial the list does not explain. With both a public key and an API v3 key, either
// signer is accepted.
//
// Error answers (non-2xx) are read to classify the failure only. The error answers that
// become results, 404 ORDER_NOT_EXIST and a refund's 404 RESOURCE_NOT_EXISTS, must carry a
// signature that verifies, because "not found" lets the reconciler close an expired order
// (or report a refund the platform never made): unsigned, it is a bad signature.
//
// Errors: every method returns *reconcile.PlatformError. ParseNotify's errors also carry
// ErrBadSignature (answer 401) or ErrMalformed (answer 400) in their chain.
package wechatpay
