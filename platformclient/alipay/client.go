package alipay

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/reconcile"
)

// Gateway methods payrecon calls.
const (
	MethodTradeQuery  = "alipay.trade.query"
	MethodTradeClose  = "alipay.trade.close"
	MethodRefundQuery = "alipay.trade.fastpay.refund.query"
)

// Client speaks to one Alipay app. It is safe for concurrent use; share one per process so
// its token bucket and circuit breaker see every call.
//
// A third-party app (a service provider's) also calls for the merchants that authorised it:
// ForSubMerchant gives a Client for one of them, which signs with the provider's keys, adds
// the merchant's app_auth_token to every call and shares the provider's policy.
type Client struct {
	cfg    Config
	policy *platformclient.Policy
	log    zerolog.Logger

	subMerchant  string    // the merchant's app id (auth_app_id) this view calls for; "" for the app itself
	appAuthToken authToken // sent with every call of a sub-merchant's view
	// subMerchants are the auth_app_ids whose notifications the app accepts beside its own
	// (AcceptSubMerchants); nil: its own only.
	subMerchants map[string]bool
}

// String names the app and the merchant it calls for, never a key or a token (fmt prints a
// struct's unexported fields without asking them how).
func (c Client) String() string {
	if c.subMerchant != "" {
		return fmt.Sprintf("alipay.Client{app_id:%s auth_app_id:%s app_auth_token:[REDACTED]}", c.cfg.AppID, c.subMerchant)
	}
	return fmt.Sprintf("alipay.Client{app_id:%s}", c.cfg.AppID)
}

// GoString keeps %#v as quiet as %v.
func (c Client) GoString() string { return c.String() }

// authToken is an app_auth_token: a credential, so it never prints.
type authToken string

func (authToken) String() string   { return "[REDACTED]" }
func (authToken) GoString() string { return "[REDACTED]" }

var _ reconcile.PlatformClient = (*Client)(nil)

// New validates cfg and builds a Client. Its errors name the settings to fix.
func New(cfg Config) (*Client, error) {
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("alipay client: %w", err)
	}
	log := cfg.Logger.With().Str("platform", string(reconcile.Alipay)).Str("app_id", cfg.AppID).Logger()
	return &Client{
		cfg: cfg,
		log: log,
		policy: platformclient.NewPolicy(platformclient.PolicyConfig{
			Platform:   reconcile.Alipay,
			QPS:        cfg.QPS,
			Timeout:    cfg.Timeout,
			MaxRetries: cfg.MaxRetries,
			Tuning:     cfg.Tuning,
			Logger:     log,
		}),
	}, nil
}

// Platform is reconcile.Alipay.
func (c *Client) Platform() reconcile.Platform { return reconcile.Alipay }

// MerchantID is the app_id, or for a sub-merchant's view the merchant's app id
// (auth_app_id): payment_orders.merchant_id either way.
func (c *Client) MerchantID() string {
	if c.subMerchant != "" {
		return c.subMerchant
	}
	return c.cfg.AppID
}

// ForSubMerchant is a Client that calls for a merchant who authorised this app (a service
// provider's third-party app): every call carries the merchant's app_auth_token and is
// signed with the app's keys; results name the merchant (authAppID). It shares the app's
// policy: its calls count against the app's budget and its circuit breaker, and, when own
// is not nil, against the merchant's own budget first (platformclient.Policy.Within).
func (c *Client) ForSubMerchant(authAppID, appAuthToken string, own platformclient.Budget) (*Client, error) {
	authAppID, appAuthToken = strings.TrimSpace(authAppID), strings.TrimSpace(appAuthToken)
	if authAppID == "" || appAuthToken == "" {
		return nil, fmt.Errorf("alipay client: a sub-merchant of app %s needs its auth_app_id and its app_auth_token", c.cfg.AppID)
	}
	view := *c
	view.subMerchant, view.appAuthToken, view.subMerchants = authAppID, authToken(appAuthToken), nil
	view.policy = c.policy.Within(own)
	view.log = c.log.With().Str("auth_app_id", authAppID).Logger()
	return &view, nil
}

// AcceptSubMerchants lets the app's notifications name these merchants (the auth_app_ids as
// keys) as well as the app itself; a notification for any other merchant is refused like a
// bad signature. Call it before the Client is shared; the set is not copied.
func (c *Client) AcceptSubMerchants(authAppIDs map[string]bool) { c.subMerchants = authAppIDs }

// BreakerState reports the circuit breaker's state ("closed", "half-open", "open").
func (c *Client) BreakerState() string { return c.policy.BreakerState() }

// Query asks alipay.trade.query about out_trade_no.
func (c *Client) Query(ctx context.Context, outTradeNo string) (reconcile.Result, error) {
	if outTradeNo == "" {
		return reconcile.Result{}, platformclient.NewError(reconcile.Alipay, reconcile.KindPermanent, "", "empty out_trade_no", nil)
	}
	return c.query(ctx, map[string]string{"out_trade_no": outTradeNo}, outTradeNo)
}

// QueryByTradeNo asks alipay.trade.query about Alipay's trade_no.
func (c *Client) QueryByTradeNo(ctx context.Context, tradeNo string) (reconcile.Result, error) {
	if tradeNo == "" {
		return reconcile.Result{}, platformclient.NewError(reconcile.Alipay, reconcile.KindPermanent, "", "empty trade_no", nil)
	}
	return c.query(ctx, map[string]string{"trade_no": tradeNo}, "")
}

func (c *Client) query(ctx context.Context, biz map[string]string, wantOutTradeNo string) (reconcile.Result, error) {
	var res reconcile.Result
	err := c.policy.Do(ctx, MethodTradeQuery, func(ctx context.Context) error {
		a, err := c.call(ctx, MethodTradeQuery, biz)
		if err != nil {
			return err
		}
		res, err = c.queryResult(a, wantOutTradeNo)
		return err
	})
	if err != nil {
		return reconcile.Result{}, c.logFailure(MethodTradeQuery, biz, err)
	}
	return res, nil
}

// Close asks alipay.trade.close to close an unpaid trade. A trade Alipay never saw is not
// an error; a trade paid meanwhile (ACQ.TRADE_STATUS_ERROR) is KindAlreadyPaid.
func (c *Client) Close(ctx context.Context, outTradeNo string) error {
	if outTradeNo == "" {
		return platformclient.NewError(reconcile.Alipay, reconcile.KindPermanent, "", "empty out_trade_no", nil)
	}
	biz := map[string]string{"out_trade_no": outTradeNo}
	err := c.policy.Do(ctx, MethodTradeClose, func(ctx context.Context) error {
		a, err := c.call(ctx, MethodTradeClose, biz)
		if err != nil {
			return err
		}
		return c.closeOutcome(a)
	})
	if err != nil {
		return c.logFailure(MethodTradeClose, biz, err)
	}
	return nil
}

// answer is one gateway answer with its signature state.
type answer struct {
	raw      []byte
	env      Envelope
	common   commonNode
	verified bool // the node's sign checked out
}

// call sends one signed request and reads, splits and verifies the answer. Transport and
// HTTP failures come back classified; business codes are left to the caller. biz is
// encoded as biz_content: a map of strings, or a struct where a field is not a string.
func (c *Client) call(ctx context.Context, method string, biz any) (answer, error) {
	form, err := c.requestParams(method, biz)
	if err != nil {
		return answer{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.cfg.Gateway, strings.NewReader(form.Encode()))
	if err != nil {
		return answer{}, platformclient.NewError(reconcile.Alipay, reconcile.KindConfig, "",
			fmt.Sprintf("cannot build request: check %s", SettingGateway), err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded;charset=utf-8")
	req.Header.Set("Accept", "application/json")
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return answer{}, transportError(ctx, err)
	}
	defer resp.Body.Close()
	raw, err := platformclient.ReadBody(resp.Body)
	if err != nil {
		return answer{}, platformclient.NewError(reconcile.Alipay, reconcile.KindRetryable, "TRUNCATED", "answer body cut short", err)
	}
	if herr := httpStatusError(resp.StatusCode); herr != nil {
		return answer{}, herr
	}
	env, err := ExtractResponse(raw, method)
	if err != nil {
		// A cut or garbled body from a gateway in trouble: ask again later.
		return answer{}, platformclient.NewError(reconcile.Alipay, reconcile.KindRetryable, "UNPARSEABLE", "unreadable answer", err)
	}
	a := answer{raw: raw, env: env}
	if err := json.Unmarshal(env.Node, &a.common); err != nil {
		return answer{}, platformclient.NewError(reconcile.Alipay, reconcile.KindRetryable, "UNPARSEABLE", "unreadable response node", err)
	}
	if env.Sign != "" {
		key, keyName, err := c.cfg.answerKey(env.CertSN)
		if err != nil {
			return answer{}, err
		}
		if err := VerifyNode(key, env.Node, env.Sign); err != nil {
			return answer{}, c.badSignature(method, a, "answer signature does not verify with "+keyName)
		}
		a.verified = true
	}
	return a, nil
}

// requestParams builds and signs the form for one call.
func (c *Client) requestParams(method string, biz any) (url.Values, error) {
	bizJSON, err := marshalNoEscape(biz)
	if err != nil {
		return nil, platformclient.NewError(reconcile.Alipay, reconcile.KindPermanent, "", "cannot encode biz_content", err)
	}
	p := url.Values{}
	p.Set("app_id", c.cfg.AppID)
	p.Set("method", method)
	p.Set("format", "JSON")
	p.Set("charset", "utf-8")
	p.Set("sign_type", "RSA2")
	p.Set("timestamp", c.cfg.Now().In(platformclient.ChinaTime).Format(platformclient.ChinaTimeLayout))
	p.Set("version", "1.0")
	p.Set("biz_content", bizJSON)
	if c.appAuthToken != "" {
		// A common parameter, signed with the others: the provider calls as the merchant.
		p.Set("app_auth_token", string(c.appAuthToken))
	}
	if c.cfg.Cert != nil {
		// Signed like every other parameter: the gateway checks both against the app.
		p.Set("app_cert_sn", c.cfg.Cert.AppCertSN)
		p.Set("alipay_root_cert_sn", c.cfg.Cert.RootCertSN)
	}
	if err := SignRequest(c.cfg.PrivateKey, p); err != nil {
		return nil, platformclient.NewError(reconcile.Alipay, reconcile.KindConfig, "",
			fmt.Sprintf("cannot sign the request: check %s", SettingPrivateKey), nil)
	}
	return p, nil
}

// closeOutcome reads an alipay.trade.close answer.
func (c *Client) closeOutcome(a answer) error {
	code, sub := string(a.common.Code), normSubCode(a.common.SubCode)
	if code == codeSuccess {
		if !a.verified {
			return c.badSignature(MethodTradeClose, a, "success answer without a valid sign")
		}
		return nil
	}
	if code == codeBusinessFailed {
		switch sub {
		case subTradeNotExist:
			return nil // Alipay never saw the trade: nothing to close.
		case subTradeStatusError:
			return platformclient.NewError(reconcile.Alipay, reconcile.KindAlreadyPaid, code+"/"+a.common.SubCode,
				strings.TrimSpace(a.common.Msg+" "+a.common.SubMsg), nil)
		}
	}
	return classify(a.common)
}

// badSignature logs the security event (digest only, no body, no key) and builds the error.
func (c *Client) badSignature(method string, a answer, msg string) error {
	c.log.Error().Str("event", "bad_signature").Str("method", method).
		Str("raw_digest", platformclient.Digest(a.raw)).Msg("alipay answer failed signature verification; not applied")
	return platformclient.BadSignature(reconcile.Alipay, msg)
}

func (c *Client) logFailure(method string, biz map[string]string, err error) error {
	ev := c.log.Warn()
	if reconcile.PlatformErrorKindOf(err) == reconcile.KindConfig {
		ev = c.log.Error()
	}
	ev = ev.Str("method", method).Str("out_trade_no", biz["out_trade_no"]).Str("trade_no", biz["trade_no"])
	if no := biz["out_request_no"]; no != "" {
		ev = ev.Str("out_request_no", no)
	}
	ev.Str("kind", reconcile.PlatformErrorKindOf(err).String()).Err(err).Msg("alipay call failed")
	return err
}

// transportError classifies a failed round trip: always retryable, named TIMEOUT when the
// attempt's deadline passed.
func transportError(ctx context.Context, err error) error {
	code := "TRANSPORT"
	if errors.Is(err, context.DeadlineExceeded) || ctx.Err() != nil {
		code = "TIMEOUT"
	}
	return platformclient.NewError(reconcile.Alipay, reconcile.KindRetryable, code, "no answer from the gateway", err)
}

// httpStatusError classifies a non-200 HTTP status. The gateway answers business failures
// with 200, so anything else comes from the infrastructure in front of it.
func httpStatusError(status int) error {
	switch {
	case status >= 200 && status < 300:
		return nil
	case status == http.StatusTooManyRequests:
		return platformclient.NewError(reconcile.Alipay, reconcile.KindRateLimited, fmt.Sprintf("HTTP %d", status), "throttled", nil)
	case status >= 500 || status == http.StatusRequestTimeout:
		return platformclient.NewError(reconcile.Alipay, reconcile.KindRetryable, fmt.Sprintf("HTTP %d", status), "gateway error", nil)
	}
	return platformclient.NewError(reconcile.Alipay, reconcile.KindConfig, fmt.Sprintf("HTTP %d", status),
		fmt.Sprintf("unexpected HTTP status from the gateway: check %s", SettingGateway), nil)
}

// marshalNoEscape encodes v without Go's HTML escaping, so biz_content reads as written.
func marshalNoEscape(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", err
	}
	return strings.TrimRight(b.String(), "\n"), nil
}
