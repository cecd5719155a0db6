package wechatpay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/reconcile"
)

// UserAgent is sent on every request: WeChat Pay refuses requests without one.
const UserAgent = "payrecon/1.0 (+https://github.com/payrecon/payrecon)"

// Client speaks to WeChat Pay API v3 for one merchant. Safe for concurrent use; share one
// per process so its token bucket and circuit breaker see every call.
//
// A service provider's Client (its mchid is the sp_mchid) also calls the partner APIs for
// its sub-merchants: ForSubMerchant gives a Client for one of them, which signs with the
// provider's keys and shares its policy and platform certificates.
type Client struct {
	cfg    Config
	policy *platformclient.Policy
	certs  *certificateSet // shared with the provider's sub-merchant views
	log    zerolog.Logger

	subMchID, subAppID string // the sub-merchant a partner view calls for; "" for the merchant itself
	// subMerchants are the sub_mchids whose callbacks a provider accepts
	// (AcceptSubMerchants); nil: none.
	subMerchants map[string]bool
}

var _ reconcile.PlatformClient = (*Client)(nil)

// New validates cfg and builds a Client. Its errors name the settings to fix.
func New(cfg Config) (*Client, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("wechatpay client: %w", err)
	}
	log := cfg.Logger.With().Str("platform", string(reconcile.WechatPay)).Str("mchid", cfg.MchID).Logger()
	return &Client{
		cfg:   cfg,
		log:   log,
		certs: &certificateSet{},
		policy: platformclient.NewPolicy(platformclient.PolicyConfig{
			Platform:   reconcile.WechatPay,
			QPS:        cfg.QPS,
			Timeout:    cfg.Timeout,
			MaxRetries: cfg.MaxRetries,
			Tuning:     cfg.Tuning,
			Logger:     log,
		}),
	}, nil
}

// Platform is reconcile.WechatPay.
func (c *Client) Platform() reconcile.Platform { return reconcile.WechatPay }

// MerchantID is the mchid, or for a sub-merchant's view its sub_mchid: payment_orders.
// merchant_id either way.
func (c *Client) MerchantID() string {
	if c.subMchID != "" {
		return c.subMchID
	}
	return c.cfg.MchID
}

// ForSubMerchant is a Client for one of a service provider's sub-merchants (特约商户): its
// queries, closes, refund queries and bills go through the partner APIs with sp_mchid (this
// Client's mchid) and sub_mchid, signed with the provider's keys; results name the
// sub-merchant. It shares the provider's policy (its budget, and first the sub-merchant's
// own when own is not nil: platformclient.Policy.Within) and platform certificates.
// subAppID (optional) is the sub-merchant's own app: results carry the answer's sub_appid
// as their SellerID, for the apply path to hold to it as it holds a merchant's appid.
func (c *Client) ForSubMerchant(subMchID, subAppID string, own platformclient.Budget) (*Client, error) {
	subMchID = strings.TrimSpace(subMchID)
	if subMchID == "" {
		return nil, fmt.Errorf("wechatpay client: a sub-merchant of service provider %s needs its sub_mchid", c.cfg.MchID)
	}
	view := *c
	view.subMchID, view.subAppID, view.subMerchants = subMchID, strings.TrimSpace(subAppID), nil
	view.policy = c.policy.Within(own)
	view.log = c.log.With().Str("sub_mchid", subMchID).Logger()
	return &view, nil
}

// AcceptSubMerchants lets a service provider's callbacks name these sub-merchants (the
// sub_mchids as keys); a callback for any other is refused like a bad signature. Call it
// before the Client is shared; the set is not copied.
func (c *Client) AcceptSubMerchants(subMchIDs map[string]bool) { c.subMerchants = subMchIDs }

// partner is the query string that names a sub-merchant to the partner APIs.
func (c *Client) partner() string {
	return "sp_mchid=" + url.QueryEscape(c.cfg.MchID) + "&sub_mchid=" + url.QueryEscape(c.subMchID)
}

// BreakerState reports the circuit breaker's state ("closed", "half-open", "open").
func (c *Client) BreakerState() string { return c.policy.BreakerState() }

// Query asks GET /v3/pay/transactions/out-trade-no/{out_trade_no}?mchid=.
func (c *Client) Query(ctx context.Context, outTradeNo string) (reconcile.Result, error) {
	if outTradeNo == "" {
		return reconcile.Result{}, platformclient.NewError(reconcile.WechatPay, reconcile.KindPermanent, "", "empty out_trade_no", nil)
	}
	return c.query(ctx, "out-trade-no/"+url.PathEscape(outTradeNo), outTradeNo)
}

// QueryByTransactionID asks GET /v3/pay/transactions/id/{transaction_id}?mchid=.
func (c *Client) QueryByTransactionID(ctx context.Context, transactionID string) (reconcile.Result, error) {
	if transactionID == "" {
		return reconcile.Result{}, platformclient.NewError(reconcile.WechatPay, reconcile.KindPermanent, "", "empty transaction_id", nil)
	}
	return c.query(ctx, "id/"+url.PathEscape(transactionID), "")
}

// query asks about one transaction: by, "out-trade-no/{no}" or "id/{id}", under
// /v3/pay/transactions/ for a merchant or /v3/pay/partner/transactions/ for a sub-merchant.
func (c *Client) query(ctx context.Context, by, wantOutTradeNo string) (reconcile.Result, error) {
	path := "/v3/pay/transactions/" + by + "?mchid=" + url.QueryEscape(c.cfg.MchID)
	if c.subMchID != "" {
		path = "/v3/pay/partner/transactions/" + by + "?" + c.partner()
	}
	var res reconcile.Result
	err := c.policy.Do(ctx, "query", func(ctx context.Context) error {
		a, err := c.call(ctx, http.MethodGet, path, nil)
		if err != nil {
			return err
		}
		res, err = c.queryResult(ctx, a, wantOutTradeNo)
		return err
	})
	if err != nil {
		return reconcile.Result{}, c.logFailure("query", wantOutTradeNo, err)
	}
	return res, nil
}

// Close asks POST /v3/pay/transactions/out-trade-no/{no}/close. An order WeChat Pay does
// not know (or closed already) is not an error; one paid meanwhile is KindAlreadyPaid.
func (c *Client) Close(ctx context.Context, outTradeNo string) error {
	if outTradeNo == "" {
		return platformclient.NewError(reconcile.WechatPay, reconcile.KindPermanent, "", "empty out_trade_no", nil)
	}
	body, _ := json.Marshal(map[string]string{"mchid": c.cfg.MchID})
	path := "/v3/pay/transactions/out-trade-no/" + url.PathEscape(outTradeNo) + "/close"
	if c.subMchID != "" {
		body, _ = json.Marshal(map[string]string{"sp_mchid": c.cfg.MchID, "sub_mchid": c.subMchID})
		path = "/v3/pay/partner/transactions/out-trade-no/" + url.PathEscape(outTradeNo) + "/close"
	}
	err := c.policy.Do(ctx, "close", func(ctx context.Context) error {
		a, err := c.call(ctx, http.MethodPost, path, body)
		if err != nil {
			return err
		}
		if a.status/100 == 2 {
			return nil
		}
		switch a.apiErr.Code {
		case "ORDER_NOT_EXIST", "ORDER_CLOSED":
			return nil
		case "ORDERPAID":
			return platformclient.NewError(reconcile.WechatPay, reconcile.KindAlreadyPaid, a.apiErr.Code, a.apiErr.Message, nil)
		}
		return classify(a.status, a.apiErr)
	})
	if err != nil {
		return c.logFailure("close", outTradeNo, err)
	}
	return nil
}

// answer is one HTTP answer: verified when 2xx, classified by its error body otherwise.
type answer struct {
	status   int
	header   http.Header
	raw      []byte
	apiErr   apiError
	verified bool
}

// apiError is the body of a non-2xx answer.
type apiError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

// call sends one signed request. A 2xx answer is verified before it is returned; a 5xx or
// 429 comes back as an error already, other error answers are left to the caller.
func (c *Client) call(ctx context.Context, method, pathAndQuery string, body []byte) (answer, error) {
	a, err := c.send(ctx, method, pathAndQuery, body)
	if err != nil || a.status/100 != 2 {
		return a, err
	}
	if err := c.verify(ctx, a); err != nil {
		return answer{}, err
	}
	a.verified = true
	return a, nil
}

// verify checks an answer's signature. A caller that gave up while the platform
// certificates were being downloaded, or whose download got no answer, has learnt nothing
// about the signature: that is a retryable failure, not a bad signature.
func (c *Client) verify(ctx context.Context, a answer) error {
	err := c.verifier(ctx).Verify(a.header, a.raw)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return platformclient.NewError(reconcile.WechatPay, reconcile.KindRetryable, "TIMEOUT",
			"gave up waiting for the platform certificates that verify the answer", ctx.Err())
	case c.cannotTell(a.header.Get(HeaderSerial)):
		return platformclient.NewError(reconcile.WechatPay, reconcile.KindRetryable, "CERTIFICATES_UNAVAILABLE",
			"the platform certificates that verify the answer could not be downloaded", nil)
	}
	return c.badSignature(a, err.Error())
}

// send sends one signed request and reads the answer, verifying nothing: a 5xx or 429
// comes back as an error, every other answer to the caller.
func (c *Client) send(ctx context.Context, method, pathAndQuery string, body []byte) (answer, error) {
	req, err := c.signedRequest(ctx, method, c.cfg.BaseURL+pathAndQuery, body)
	if err != nil {
		return answer{}, err
	}
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return answer{}, transportError(ctx, err)
	}
	defer resp.Body.Close()
	raw, err := platformclient.ReadBody(resp.Body)
	if err != nil {
		return answer{}, platformclient.NewError(reconcile.WechatPay, reconcile.KindRetryable, "TRUNCATED", "answer body cut short", err)
	}
	return readAnswer(resp, raw)
}

// readAnswer classifies an answer: a 5xx or 429 comes back as an error, every other answer
// to the caller.
func readAnswer(resp *http.Response, raw []byte) (answer, error) {
	a := answer{status: resp.StatusCode, header: resp.Header, raw: raw}
	if a.status/100 == 2 {
		return a, nil
	}
	_ = json.Unmarshal(raw, &a.apiErr) // classification only; a proxy's HTML page has no code
	switch {
	case a.status >= 500:
		return answer{}, platformclient.NewError(reconcile.WechatPay, reconcile.KindRetryable, errCode(a), a.apiErr.Message, nil)
	case a.status == http.StatusTooManyRequests || a.apiErr.Code == "FREQUENCY_LIMITED":
		return answer{}, platformclient.NewError(reconcile.WechatPay, reconcile.KindRateLimited, errCode(a), a.apiErr.Message, nil)
	}
	return a, nil
}

func transportError(ctx context.Context, err error) error {
	code := "TRANSPORT"
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		code = "TIMEOUT"
	}
	return platformclient.NewError(reconcile.WechatPay, reconcile.KindRetryable, code, "no answer from WeChat Pay", err)
}

// signedRequest builds a request to full (a URL) signed with the merchant key.
func (c *Client) signedRequest(ctx context.Context, method, full string, body []byte) (*http.Request, error) {
	var rdr io.Reader
	if body != nil {
		rdr = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, full, rdr)
	if err != nil {
		return nil, platformclient.NewError(reconcile.WechatPay, reconcile.KindConfig, "",
			fmt.Sprintf("cannot build request: check %s", SettingBaseURL), err)
	}
	ts := strconv.FormatInt(c.cfg.Now().Unix(), 10)
	auth, err := Authorization(c.cfg.PrivateKey, c.cfg.MchID, c.cfg.SerialNo, method, req.URL.RequestURI(), ts, NewNonce(), body)
	if err != nil {
		return nil, platformclient.NewError(reconcile.WechatPay, reconcile.KindConfig, "",
			fmt.Sprintf("cannot sign the request: check %s", SettingPrivateKey), nil)
	}
	req.Header.Set("Authorization", auth)
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", UserAgent)
	if c.cfg.PublicKeyID != "" {
		// Names the key we verify with: a merchant migrating from platform certificates gets
		// answers signed with the public key only when the request asks for it.
		req.Header.Set(HeaderSerial, c.cfg.PublicKeyID)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

func errCode(a answer) string {
	if a.apiErr.Code != "" {
		return a.apiErr.Code
	}
	return fmt.Sprintf("HTTP %d", a.status)
}

// classify maps a 4xx answer to the error the reconciler acts on.
func classify(status int, e apiError) error {
	code := e.Code
	if code == "" {
		code = fmt.Sprintf("HTTP %d", status)
	}
	mk := func(kind reconcile.PlatformErrorKind, msg string) error {
		return platformclient.NewError(reconcile.WechatPay, kind, code, msg, nil)
	}
	switch {
	case e.Code == "SIGN_ERROR" || status == http.StatusUnauthorized:
		return mk(reconcile.KindConfig, fmt.Sprintf("%s (WeChat Pay rejected our signature: check %s, %s and %s belong together)",
			e.Message, SettingPrivateKey, SettingSerialNo, SettingMchID))
	case e.Code == "NO_AUTH":
		return mk(reconcile.KindConfig, fmt.Sprintf("%s (no permission for this API: check %s and its products)", e.Message, SettingMchID))
	case e.Code == "MCH_NOT_EXISTS":
		return mk(reconcile.KindConfig, fmt.Sprintf("%s (check %s)", e.Message, SettingMchID))
	case e.Code == "SYSTEM_ERROR" || e.Code == "BANK_ERROR":
		return mk(reconcile.KindRetryable, e.Message)
	case status == http.StatusNotFound && e.Code == "":
		return mk(reconcile.KindConfig, fmt.Sprintf("no such API path: check %s", SettingBaseURL))
	case status == http.StatusForbidden && e.Code != "RULE_LIMIT":
		return mk(reconcile.KindConfig, fmt.Sprintf("%s (forbidden: check %s)", e.Message, SettingMchID))
	}
	// PARAM_ERROR, INVALID_REQUEST, RULE_LIMIT and the rest: refused for this order.
	return mk(reconcile.KindPermanent, e.Message)
}

func (c *Client) badSignature(a answer, why string) error {
	c.log.Error().Str("event", "bad_signature").Int("status", a.status).Str("request_id", a.header.Get(HeaderRequestID)).
		Str("raw_digest", platformclient.Digest(a.raw)).Str("reason", why).
		Msg("wechatpay answer failed signature verification; not applied")
	return platformclient.BadSignature(reconcile.WechatPay, why)
}

func (c *Client) logFailure(op, outTradeNo string, err error) error {
	ev := c.log.Warn()
	if reconcile.PlatformErrorKindOf(err) == reconcile.KindConfig {
		ev = c.log.Error()
	}
	ev.Str("op", op).Str("out_trade_no", outTradeNo).Str("kind", reconcile.PlatformErrorKindOf(err).String()).
		Err(err).Msg("wechatpay call failed")
	return err
}

// hasSignatureHeaders reports whether an answer came signed.
func hasSignatureHeaders(h http.Header) bool {
	return h.Get(HeaderSignature) != "" || strings.TrimSpace(h.Get(HeaderSerial)) != ""
}
