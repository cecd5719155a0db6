package wechatpay

import (
	"bytes"
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

// ProductionBaseURL is WeChat Pay's API host, the default BaseURL.
const ProductionBaseURL = "https://api.mch.weixin.qq.com"

// Settings named in configuration error messages so an operator knows what to fix.
const (
	SettingBaseURL     = "RECONCILER_WECHATPAY_BASE_URL"
	SettingMchID       = "RECONCILER_WECHATPAY_MCHID"
	SettingSerialNo    = "RECONCILER_WECHATPAY_SERIAL_NO"
	SettingPrivateKey  = "RECONCILER_WECHATPAY_PRIVATE_KEY_FILE"
	SettingPublicKey   = "RECONCILER_WECHATPAY_PUBLIC_KEY_FILE"
	SettingPublicKeyID = "RECONCILER_WECHATPAY_PUBLIC_KEY_ID"
	SettingAPIv3Key    = "RECONCILER_WECHATPAY_APIV3_KEY_FILE"
)

// Platform certificate refresh defaults (Config.CertificateRefresh, CertificateRefreshMin).
const (
	DefaultCertificateRefresh    = 12 * time.Hour
	DefaultCertificateRefreshMin = time.Minute
)

// APIv3KeySize is the length of the API v3 key: it is the AES-256-GCM key of callbacks.
const APIv3KeySize = 32

// Config is everything a Client needs; keys are parsed already.
type Config struct {
	BaseURL string // default ProductionBaseURL
	MchID   string // the merchant id; also Result.MerchantID
	// SerialNo is the merchant API certificate's serial (hex), sent in Authorization.
	SerialNo   string
	PrivateKey *rsa.PrivateKey // the merchant API private key (apiclient_key.pem)
	// PlatformPublicKey is the WeChat Pay public key that signs answers and callbacks, and
	// PublicKeyID its id (PUB_KEY_ID_...), which answers name in Wechatpay-Serial and every
	// request names too. Both or neither: without them the client verifies with platform
	// certificates only (the older mode), which needs APIv3Key.
	PlatformPublicKey *rsa.PublicKey
	PublicKeyID       string
	// APIv3Key decrypts callbacks and downloaded platform certificates (32 bytes). With it,
	// answers and callbacks signed by a platform certificate verify too (a merchant in
	// certificate mode, or migrating to the public key). Optional for a public-key client
	// that only queries.
	APIv3Key []byte
	// CertificateRefresh is how old the downloaded platform certificates may get before the
	// next verification that needs one downloads them again; default 12h.
	CertificateRefresh time.Duration
	// CertificateRefreshMin is the least time between two certificate downloads, so a
	// stream of unknown serials (or a failing download) costs one call per interval, not one
	// per message; default 1 minute.
	CertificateRefreshMin time.Duration
	// AppID, when set, is the appid callbacks and answers are expected to name (not enforced
	// here: the apply path compares Result.SellerID).
	AppID      string
	QPS        float64       // calls per second across every goroutine; zero: no cap
	Timeout    time.Duration // per HTTP attempt; default 10s
	MaxRetries int           // zero means the default (2), negative disables
	HTTPClient *http.Client
	Logger     zerolog.Logger
	Now        func() time.Time
	Tuning     platformclient.Tuning
	// DownloadTimeout bounds one bill download attempt; default
	// platformclient.DefaultDownloadTimeout.
	DownloadTimeout time.Duration
}

// String never prints key material.
func (c Config) String() string {
	return fmt.Sprintf("wechatpay.Config{BaseURL:%s MchID:%s SerialNo:%s PublicKeyID:%s AppID:%s QPS:%g Timeout:%s PrivateKey:%s APIv3Key:%s}",
		c.BaseURL, c.MchID, c.SerialNo, c.PublicKeyID, c.AppID, c.QPS, c.Timeout,
		redacted(c.PrivateKey != nil), redacted(len(c.APIv3Key) > 0))
}

// GoString keeps %#v from dumping secrets too.
func (c Config) GoString() string { return c.String() }

func redacted(set bool) string {
	if set {
		return "[REDACTED]"
	}
	return "<none>"
}

// ParseAPIv3Key reads an API v3 key file's contents: the 32-byte key, a trailing newline
// ignored. The error never quotes the file.
func ParseAPIv3Key(data []byte) ([]byte, error) {
	k := bytes.TrimRight(data, "\r\n")
	if len(k) != APIv3KeySize {
		return nil, fmt.Errorf("%s: the API v3 key must be %d bytes, the file holds %d", SettingAPIv3Key, APIv3KeySize, len(k))
	}
	return append([]byte(nil), k...), nil
}

func (c *Config) validate() error {
	var errs []error
	if c.BaseURL == "" {
		c.BaseURL = ProductionBaseURL
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	if !strings.HasPrefix(c.BaseURL, "https://") && !strings.HasPrefix(c.BaseURL, "http://") {
		errs = append(errs, fmt.Errorf("%s must be an http(s) URL", SettingBaseURL))
	}
	if strings.TrimSpace(c.MchID) == "" {
		errs = append(errs, fmt.Errorf("%s is required", SettingMchID))
	}
	// Serials are hex in any case in configuration; WeChat Pay prints them upper-case.
	c.SerialNo = strings.ToUpper(strings.TrimSpace(c.SerialNo))
	if c.SerialNo == "" {
		errs = append(errs, fmt.Errorf("%s is required (the merchant API certificate serial)", SettingSerialNo))
	}
	if c.PrivateKey == nil {
		errs = append(errs, fmt.Errorf("%s is required (the merchant API private key)", SettingPrivateKey))
	}
	c.PublicKeyID = strings.TrimSpace(c.PublicKeyID)
	switch {
	case c.PlatformPublicKey != nil && c.PublicKeyID == "":
		errs = append(errs, fmt.Errorf("%s is required with %s (PUB_KEY_ID_...)", SettingPublicKeyID, SettingPublicKey))
	case c.PlatformPublicKey == nil && c.PublicKeyID != "":
		errs = append(errs, fmt.Errorf("%s is required with %s (the WeChat Pay public key)", SettingPublicKey, SettingPublicKeyID))
	case c.PlatformPublicKey == nil && len(c.APIv3Key) == 0:
		errs = append(errs, fmt.Errorf("%s and %s are required, or %s to verify with platform certificates",
			SettingPublicKey, SettingPublicKeyID, SettingAPIv3Key))
	}
	if len(c.APIv3Key) != 0 && len(c.APIv3Key) != APIv3KeySize {
		errs = append(errs, fmt.Errorf("%s: the API v3 key must be %d bytes, got %d", SettingAPIv3Key, APIv3KeySize, len(c.APIv3Key)))
	}
	if c.CertificateRefresh <= 0 {
		c.CertificateRefresh = DefaultCertificateRefresh
	}
	if c.CertificateRefreshMin <= 0 {
		c.CertificateRefreshMin = DefaultCertificateRefreshMin
	}
	if c.QPS < 0 {
		errs = append(errs, errors.New("RECONCILER_WECHATPAY_QPS must not be negative"))
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
