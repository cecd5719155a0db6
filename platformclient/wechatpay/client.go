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
type Client struct {
	cfg    Config
	policy *platformclient.Policy
	certs  certificateSet
	log    zerolog.Logger
}

var _ reconcile.PlatformClient = (*Client)(nil)

// New validates cfg and builds a Client. Its errors name the settings to fix.
func New(cfg Config) (*Client, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("wechatpay client: %w", err)
	}
	log := cfg.Logger.With().Str("platform", string(reconcile.WechatPay)).Str("mchid", cfg.MchID).Logger()
	return &Client{
		cfg: cfg,
		log: log,
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

// MerchantID is the mchid.
func (c *Client) MerchantID() string { return c.cfg.MchID }

// BreakerState reports the circuit breaker's state ("closed", "half-open", "open").
func (c *Client) BreakerState() string { return c.policy.BreakerState() }

// Query asks GET /v3/pay/transactions/out-trade-no/{out_trade_no}?mchid=.
func (c *Client) Query(ctx context.Context, outTradeNo string) (reconcile.Result, error) {
	if outTradeNo == "" {
		return reconcile.Result{}, platformclient.NewError(reconcile.WechatPay, reconcile.KindPermanent, "", "empty out_trade_no", nil)
	}
	return c.query(ctx, "/v3/pay/transactions/out-trade-no/"+url.PathEscape(outTradeNo), outTradeNo)
}

// QueryByTransactionID asks GET /v3/pay/transactions/id/{transaction_id}?mchid=.
func (c *Client) QueryByTransactionID(ctx context.Context, transactionID string) (reconcile.Result, error) {
	if transactionID == "" {
		return reconcile.Result{}, platformclient.NewError(reconcile.WechatPay, reconcile.KindPermanent, "", "empty transaction_id", nil)
	}
	return c.query(ctx, "/v3/pay/transactions/id/"+url.PathEscape(transactionID), "")
}

func (c *Client) query(ctx context.Context, path, wantOutTradeNo string) (reconcile.Result, error) {
	path += "?mchid=" + url.QueryEscape(c.cfg.MchID)
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
// certificates were being downloaded has learnt nothing about the signature: that is a
// retryable failure, not a bad signature.
func (c *Client) verify(ctx context.Context, a answer) error {
	err := c.verifier(ctx).Verify(a.header, a.raw)
	switch {
	case err == nil:
		return nil
	case ctx.Err() != nil:
		return platformclient.NewError(reconcile.WechatPay, reconcile.KindRetryable, "TIMEOUT",
			"gave up waiting for the platform certificates that verify the answer", ctx.Err())
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
