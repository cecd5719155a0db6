package alipay

import (
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/platformclient"
)

// ProductionGateway is Alipay's production gateway, the default Gateway.
const ProductionGateway = "https://openapi.alipay.com/gateway.do"

// Settings named in configuration error messages so an operator knows what to fix.
const (
	SettingGateway    = "RECONCILER_ALIPAY_GATEWAY"
	SettingAppID      = "RECONCILER_ALIPAY_APP_ID"
	SettingPrivateKey = "RECONCILER_ALIPAY_PRIVATE_KEY_FILE"
	SettingPublicKey  = "RECONCILER_ALIPAY_PUBLIC_KEY_FILE"
)

// Config is everything a Client needs. Keys are parsed already (platformclient.LoadPrivateKey
// and LoadPublicKey read the files' contents).
type Config struct {
	Gateway         string          // default ProductionGateway
	AppID           string          // the merchant's app_id; also Result.MerchantID
	PrivateKey      *rsa.PrivateKey // the app private key that signs requests
	AlipayPublicKey *rsa.PublicKey  // Alipay's public key that signs answers and notifications
	// SellerID is the merchant's Alipay account (2088...). Not sent; kept for callers that
	// check a notification's seller_id.
	SellerID string
	// QPS caps calls per second for this app across every goroutine using the Client;
	// zero: no cap.
	QPS float64
	// Timeout bounds each HTTP attempt; default 10s.
	Timeout time.Duration
	// MaxRetries for retryable failures; zero means the default (2), negative disables.
	MaxRetries int
	HTTPClient *http.Client // default: a client with connection reuse sized for workers
	Logger     zerolog.Logger
	Now        func() time.Time // default time.Now
	// Tuning holds backoff, breaker and burst knobs; zero values are the defaults.
	Tuning platformclient.Tuning
}

// String never prints key material.
func (c Config) String() string {
	return fmt.Sprintf("alipay.Config{Gateway:%s AppID:%s SellerID:%s QPS:%g Timeout:%s PrivateKey:%s AlipayPublicKey:%s}",
		c.Gateway, c.AppID, c.SellerID, c.QPS, c.Timeout, redacted(c.PrivateKey != nil), present(c.AlipayPublicKey != nil))
}

// GoString keeps %#v from dumping the private key too.
func (c Config) GoString() string { return c.String() }

func redacted(set bool) string {
	if set {
		return "[REDACTED]"
	}
	return "<none>"
}

func present(set bool) string {
	if set {
		return "[set]"
	}
	return "<none>"
}

func (c *Config) validate() error {
	var errs []error
	if c.Gateway == "" {
		c.Gateway = ProductionGateway
	}
	if !strings.HasPrefix(c.Gateway, "https://") && !strings.HasPrefix(c.Gateway, "http://") {
		errs = append(errs, fmt.Errorf("%s must be an http(s) URL", SettingGateway))
	}
	if strings.TrimSpace(c.AppID) == "" {
		errs = append(errs, fmt.Errorf("%s is required", SettingAppID))
	}
	if c.PrivateKey == nil {
		errs = append(errs, fmt.Errorf("%s is required (the app private key)", SettingPrivateKey))
	}
	if c.AlipayPublicKey == nil {
		errs = append(errs, fmt.Errorf("%s is required (Alipay's public key, not the app's)", SettingPublicKey))
	}
	if c.QPS < 0 {
		errs = append(errs, errors.New("RECONCILER_ALIPAY_QPS must not be negative"))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.HTTPClient == nil {
		c.HTTPClient = platformclient.NewHTTPClient()
	}
	return errors.Join(errs...)
}

// MarshalJSON keeps a Config that ends up in a JSON log field from carrying its keys.
func (c Config) MarshalJSON() ([]byte, error) { return json.Marshal(c.String()) }
