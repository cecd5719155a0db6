// Package sandbox is a faithful local simulator of both payment platforms, for tests, the
// demo and staging: one http.Handler that answers Alipay's gateway (/gateway.do) and WeChat
// Pay API v3 (/v3/pay/transactions/...) with the real paths, parameters, signatures and
// error shapes, and verifies the caller's signatures as the platforms do.
//
// What it simulates is set per order in a scenario store keyed by (platform, out_trade_no):
// paid (amount, trade number, paid time), open, closed, refunded, failed, or not found (the
// default). Faults, per order or per platform: latency (fixed or a random range), HTTP 5xx,
// throttle answers, a real QPS cap (a token bucket per platform), bad or missing signatures,
// tampered and truncated bodies, hangs, and any platform error code. Close on an open order
// closes it; close on a paid order answers the platforms' "already paid" errors. Queries are
// counted per order and per platform.
//
// It can also send payment callbacks to a URL (Alipay's signed form, WeChat Pay's signed and
// encrypted JSON), with duplicates and shuffled order, on each platform's retry schedule
// (compressible by a factor) until acknowledged.
//
// Refunds are state too (refunds.go): Refund (or POST /sandbox/refunds) refunds part or
// all of a paid trade with an outcome (SUCCESS, PROCESSING, ABNORMAL, CLOSED; the refunds
// of a trade never above what it was paid), SettleRefund moves a pending one on later. The
// refund queries answer from that state with real signatures and error shapes, through
// the same faults and caps (WeChat Pay GET /v3/refund/domestic/refunds/{no}, 404
// RESOURCE_NOT_EXISTS; Alipay alipay.trade.fastpay.refund.query, refund_amount only for a
// successful refund). A refund's callback is sent like a payment's (Callback.OutRefundNo):
// WeChat Pay's REFUND.* envelope, Alipay's trade notification again with out_biz_no,
// refund_fee (the running total) and gmt_refund. RefundsOfDay lists a day's refunds for
// the bills.
//
// Alipay apps: the default app (Keys, Identity) in public-key mode, plus Options.Accounts.Alipay,
// each in public-key or certificate mode (GenerateAlipayAccount makes one, with its own
// root chain, "Alipay CA", app and Alipay certificates). The gateway picks the app by
// app_id, checks app_cert_sn and alipay_root_cert_sn in certificate mode, and signs as that
// app's Alipay certificate (alipay_cert_sn beside sign); Scenario.MerchantID gives an order
// to an app. RotateAlipayCert, AlipayAccountConfig, WriteAlipayAccountFiles.
//
// Bills: each account's daily trade bill is made from the same scenario store (paid and
// refunded orders of the day, Scenario.RefundedAt for the refund line) and served as the
// platforms serve it: Alipay's downloadurl.query and a zip behind the URL, WeChat Pay's
// /v3/bill/tradebill (signed) and its signed download, gzip with a SHA1. A day's bill is out
// once the day is over in China time. SetBillSpoil (or PUT /sandbox/bills/{platform}/spoil)
// makes it late, declare a wrong hash, disagree with its totals or arrive truncated;
// GET /sandbox/bills/{platform}/{day} hands out the file itself.
//
// Go API: New, SetScenario, Refund, SettleRefund, SetFault, SetQPSCap, QueryCount, Deliver,
// AlipayConfig and WechatPayConfig (ready client configurations pointing at a base URL),
// WriteKeyFiles.
// JSON control API under /sandbox/ (see control.go). Standalone: Main or Run, which the
// `reconciler sandbox --listen ADDR --keys-dir DIR` subcommand calls.
//
// The sandbox imports the alipay and wechatpay packages for their wire helpers (signing
// content, AES-GCM); they never import it.
package sandbox
