// Package platformclient holds what the Alipay and WeChat Pay clients share: exact yuan
// amount parsing, RSA key loading and SHA256withRSA signatures, China time, the sentinel
// errors a callback handler branches on, and the call policy (per-call timeout, bounded
// retries with backoff and jitter, a token bucket and a circuit breaker) that keeps a slow
// or dead platform from eating a reconciliation pass.
//
// The sub-packages speak the wire protocols: alipay (OpenAPI gateway, RSA2) and wechatpay
// (API v3). sandbox simulates both for tests, the demo and staging. The dependency points
// one way: sandbox imports alipay and wechatpay, never the reverse, and none of them imports
// an adapter other than the reconcile domain types.
//
// Errors: every client method returns *reconcile.PlatformError. Callback parsing returns a
// *reconcile.PlatformError too, whose chain also holds ErrBadSignature (answer 401 / "fail":
// a security event) or ErrMalformed (answer 400 / "fail": the body could not be read), so a
// handler can branch with errors.Is. Neither messages nor logs ever carry key material.
package platformclient
