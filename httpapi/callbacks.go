package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/platformclient/wechatpay"
	"github.com/payrecon/payrecon/reconcile"
)

// maxCallbackBody bounds what a callback may send; real ones are a few KiB.
const maxCallbackBody = 64 << 10

// callbackDeadline keeps every answer well inside the platforms' 5 s.
const callbackDeadline = 4 * time.Second

// Settler is the apply path a verified callback goes through, a payment's or a refund's,
// with the callbacks' wait rule for a claim another handler holds: reconcile.Applier.
type Settler interface {
	ApplyCallback(ctx context.Context, r reconcile.Result, wait time.Duration) (reconcile.Applied, bool, error)
	ApplyRefundCallback(ctx context.Context, r reconcile.RefundResult, wait time.Duration) (reconcile.Applied, bool, error)
}

// Callbacks is what the callback port needs: the readers of each configured account, the
// apply path, and where to count and log.
type Callbacks struct {
	Settler Settler
	// NotifyWait is how long a callback waits for a claim held by another handler.
	NotifyWait time.Duration
	// Alipay reads notifications by app_id; Wechat lists the merchants in configuration
	// order. An account without its private key has a verify-only reader.
	Alipay map[string]AlipayNotifyReader
	Wechat []WechatNotifyReader
	// Count counts every callback by what was answered (payrecon_callbacks_total: acked,
	// ignored, refused_*); nil counts nothing.
	Count  func(p reconcile.Platform, result string)
	Pinger Pinger
	Log    zerolog.Logger
}

// callbackHandler serves the callback port.
type callbackHandler struct {
	Callbacks
	// refusals samples the log lines of refused callbacks: anyone can send those.
	refusals *logSampler
}

// NewCallbackMux is the public port: what the platforms reach: their callbacks
// (/notify/{platform}, /notify/{platform}/{merchant_id}) and the probes, nothing else.
func NewCallbackMux(c Callbacks) http.Handler {
	if c.Count == nil {
		c.Count = func(reconcile.Platform, string) {}
	}
	h := &callbackHandler{Callbacks: c, refusals: newLogSampler()}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /notify/alipay", h.notifyAlipay)
	mux.HandleFunc("POST /notify/alipay/{merchant_id}", h.notifyAlipay)
	mux.HandleFunc("POST /notify/wechatpay", h.notifyWechatPay)
	mux.HandleFunc("POST /notify/wechatpay/{merchant_id}", h.notifyWechatPay)
	probes(mux, c.Pinger)
	return mux
}

func readCallback(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxCallbackBody))
	if err != nil {
		return nil, fmt.Errorf("%w: read body: %v", platformclient.ErrMalformed, err)
	}
	return body, nil
}

// settle applies a verified notification and says whether to acknowledge it, and the
// result to count. An event payrecon does not read is acknowledged: refused, the platform
// would send it again for a day.
func (h *callbackHandler) settle(ctx context.Context, p reconcile.Platform, n reconcile.Notification) (bool, string) {
	ctx, cancel := context.WithTimeout(ctx, callbackDeadline)
	defer cancel()
	switch {
	case n.Payment != nil:
		res := *n.Payment
		res.Source = reconcile.SourceNotify
		applied, ack, err := h.Settler.ApplyCallback(ctx, res, h.NotifyWait)
		h.logPayment(res, applied, ack, err)
		return ack, settledReason(ack, applied, err)
	case n.Refund != nil:
		res := *n.Refund
		res.Source = reconcile.SourceNotify
		applied, ack, err := h.Settler.ApplyRefundCallback(ctx, res, h.NotifyWait)
		h.logRefund(res, applied, ack, err)
		return ack, settledReason(ack, applied, err)
	}
	h.Log.Info().Str("platform", string(p)).Str("event_type", clip(n.Ignored)).Msg("callback of an event payrecon does not handle; acknowledged")
	return true, "ignored"
}

func (h *callbackHandler) notifyAlipay(w http.ResponseWriter, r *http.Request) {
	reply := func(ok bool, result string) {
		h.Count(reconcile.Alipay, result)
		// Alipay stops retrying only on a body of exactly "success".
		if ok {
			io.WriteString(w, "success") //nolint:errcheck
			return
		}
		io.WriteString(w, "fail") //nolint:errcheck
	}
	if len(h.Alipay) == 0 {
		reply(false, "refused_not_configured")
		return
	}
	body, err := readCallback(w, r)
	var n reconcile.Notification
	if err == nil {
		var read AlipayNotifyReader
		if read, err = h.alipayAccountFor(r.PathValue("merchant_id"), body); err == nil {
			n, err = read(body)
		}
	}
	if err != nil {
		h.refused(reconcile.Alipay, err, r, body)
		reply(false, refusalReason(err))
		return
	}
	reply(h.settle(r.Context(), reconcile.Alipay, n))
}

func (h *callbackHandler) notifyWechatPay(w http.ResponseWriter, r *http.Request) {
	reply := func(status int, result, msg string) {
		h.Count(reconcile.WechatPay, result)
		if status == http.StatusNoContent {
			w.WriteHeader(status)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(map[string]string{"code": "FAIL", "message": msg}) //nolint:errcheck
	}
	if len(h.Wechat) == 0 {
		reply(http.StatusNotFound, "refused_not_configured", "wechat pay is not configured here")
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), callbackDeadline)
	defer cancel()
	body, err := readCallback(w, r)
	var n reconcile.Notification
	if err == nil {
		var c WechatNotifyReader
		if c, err = h.wechatAccountFor(ctx, r.PathValue("merchant_id"), r.Header.Get(wechatpay.HeaderSerial)); err == nil {
			n, err = c.ParseNotifyContext(ctx, r.Header, body)
		}
	}
	if err != nil {
		h.refused(reconcile.WechatPay, err, r, body)
		switch {
		case errors.Is(err, platformclient.ErrBadSignature):
			reply(http.StatusUnauthorized, "refused_signature", "signature verification failed")
		case errors.Is(err, platformclient.ErrMalformed):
			reply(http.StatusBadRequest, "refused_malformed", "malformed notification")
		default:
			// Not the notification's fault (certificates still downloading): retry later.
			reply(http.StatusInternalServerError, "refused_error", "temporarily unable to verify; retry")
		}
		return
	}
	ack, result := h.settle(ctx, reconcile.WechatPay, n)
	if ack {
		reply(http.StatusNoContent, result, "")
		return
	}
	reply(http.StatusInternalServerError, result, "temporarily unable to process; retry")
}

// errNoAccount refuses a callback no configured account can read, like a bad signature: an
// unknown sender is not to be trusted.
func errNoAccount(p reconcile.Platform, msg string) error {
	return platformclient.BadSignature(p, "callback: "+msg)
}

// alipayAccountFor finds the app a notification is for: the one its URL names, else the
// notification's own app_id (which the signature then covers).
func (h *callbackHandler) alipayAccountFor(pathMerchant string, body []byte) (AlipayNotifyReader, error) {
	form, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, platformclient.Malformed(reconcile.Alipay, "callback body is not a form")
	}
	appID := form.Get("app_id")
	if pathMerchant != "" && appID != pathMerchant {
		return nil, errNoAccount(reconcile.Alipay, "app_id does not match the notify URL's account")
	}
	if c, ok := h.Alipay[appID]; ok {
		return c, nil
	}
	return nil, errNoAccount(reconcile.Alipay, "no configured app has the notification's app_id")
}

// wechatAccountFor finds the merchant a callback is for: the one its URL names, else the one
// whose public key or platform certificate has the serial that signed it (then that
// merchant's API v3 key decrypts it).
func (h *callbackHandler) wechatAccountFor(ctx context.Context, pathMerchant, serial string) (WechatNotifyReader, error) {
	if pathMerchant != "" {
		for _, c := range h.Wechat {
			if c.MerchantID() == pathMerchant {
				return c, nil
			}
		}
		return nil, errNoAccount(reconcile.WechatPay, "no configured merchant has the notify URL's mchid")
	}
	// First what every merchant already holds; only then may a merchant download its
	// platform certificates (a rotated certificate), so one callback never makes every
	// merchant download.
	for _, c := range h.Wechat {
		if c.HoldsSerial(serial) {
			return c, nil
		}
	}
	for _, c := range h.Wechat {
		if c.KnowsSerial(ctx, serial) {
			return c, nil
		}
	}
	return nil, errNoAccount(reconcile.WechatPay, "no configured merchant knows the signing key's serial")
}

func refusalReason(err error) string {
	if errors.Is(err, platformclient.ErrBadSignature) {
		return "refused_signature"
	}
	return "refused_malformed"
}

func settledReason(ack bool, applied reconcile.Applied, err error) string {
	switch {
	case ack:
		return "acked"
	case err != nil:
		return "refused_error"
	case applied.Outcome == reconcile.OutcomeStillPending:
		return "refused_pending"
	}
	return "refused_busy"
}

// refused logs a callback we would not read: a bad signature is a security event. Anyone
// can send junk, so under a flood the lines are sampled (payrecon_callbacks_total still
// counts every refusal) and what the sender chose is clipped and escaped.
func (h *callbackHandler) refused(p reconcile.Platform, err error, r *http.Request, body []byte) {
	if !h.refusals.allow() {
		return
	}
	ev := h.Log.Warn()
	if errors.Is(err, platformclient.ErrBadSignature) {
		ev = h.Log.Error().Str("event", "bad_signature")
	}
	ev = ev.Str("platform", string(p)).Str("raw_digest", platformclient.Digest(body)).
		Str("request_id", clip(r.Header.Get("Request-Id"))).Str("error", clip(err.Error()))
	if p == reconcile.WechatPay {
		ev = ev.Str("serial", clip(r.Header.Get(wechatpay.HeaderSerial)))
	}
	if n := h.refusals.suppressed.Swap(0); n > 0 {
		ev = ev.Int64("suppressed_since_last", n)
	}
	ev.Msg("callback refused")
}

func (h *callbackHandler) logPayment(res reconcile.Result, applied reconcile.Applied, ack bool, err error) {
	ev := h.Log.Info()
	if err != nil || !ack {
		ev = h.Log.Warn().Err(err)
	}
	ev.Str("platform", string(res.Platform)).Str("out_trade_no", res.OutTradeNo).Str("platform_trade_no", res.PlatformTradeNo).
		Str("outcome", string(applied.Outcome)).Str("mismatch", string(applied.Mismatch)).Bool("acked", ack).Msg("callback")
}

func (h *callbackHandler) logRefund(res reconcile.RefundResult, applied reconcile.Applied, ack bool, err error) {
	ev := h.Log.Info()
	if err != nil || !ack {
		ev = h.Log.Warn().Err(err)
	}
	ev.Str("platform", string(res.Platform)).Str("out_trade_no", res.OutTradeNo).Str("platform_trade_no", res.PlatformTradeNo).
		Str("out_refund_no", res.OutRefundNo).Str("refund_state", string(res.State)).Str("outcome", string(applied.Outcome)).
		Str("mismatch", string(applied.Mismatch)).Bool("acked", ack).Msg("refund callback")
}
