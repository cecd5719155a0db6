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
	"github.com/payrecon/payrecon/reconcile"
)

// ProductionGateway is Alipay's production gateway, the default Gateway.
const ProductionGateway = "https://openapi.alipay.com/gateway.do"

// Settings named in configuration error messages so an operator knows what to fix.
const (
	SettingGateway    = "RECONCILER_ALIPAY_GATEWAY"
	SettingAppID      = "RECONCILER_ALIPAY_APP_ID"
	SettingPrivateKey = "RECONCILER_ALIPAY_PRIVATE_KEY_FILE"
	SettingPublicKey  = "RECONCILER_ALIPAY_PUBLIC_KEY_FILE"
	// Certificate mode (公钥证书模式): the accounts file's app_cert_file, alipay_cert_file
	// and alipay_root_cert_file.
	SettingAppCert    = "RECONCILER_ALIPAY_APP_CERT_FILE"
	SettingAlipayCert = "RECONCILER_ALIPAY_ALIPAY_CERT_FILE"
	SettingRootCert   = "RECONCILER_ALIPAY_ALIPAY_ROOT_CERT_FILE"
)

// Config is everything a Client needs. Keys are parsed already (platformclient.LoadPrivateKey
// and LoadPublicKey read the files' contents).
type Config struct {
	Gateway         string          // default ProductionGateway
	AppID           string          // the merchant's app_id; also Result.MerchantID
	PrivateKey      *rsa.PrivateKey // the app private key that signs requests
	AlipayPublicKey *rsa.PublicKey  // Alipay's public key that signs answers and notifications
	// Cert switches the app to certificate mode: every request carries app_cert_sn and
	// alipay_root_cert_sn, and answers are verified with the Alipay certificate their
	// alipay_cert_sn names (AlipayPublicKey is then not needed). Nil: public-key mode.
	Cert *CertMode
	// SellerID is the merchant's Alipay account (2088...). Not sent; kept for callers that
	// check a notification's seller_id.
	SellerID string
	// QPS caps calls per second for this app across every goroutine using the Client;
	// zero: no cap.
	QPS float64
	// Timeout bounds each HTTP attempt; default 10s.
	Timeout time.Duration
	// DownloadTimeout bounds one bill download attempt; default
	// platformclient.DefaultDownloadTimeout.
	DownloadTimeout time.Duration
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
	return fmt.Sprintf("alipay.Config{Gateway:%s AppID:%s SellerID:%s QPS:%g Timeout:%s Mode:%s PrivateKey:%s AlipayPublicKey:%s}",
		c.Gateway, c.AppID, c.SellerID, c.QPS, c.Timeout, c.Cert.mode(), redacted(c.PrivateKey != nil), present(c.AlipayPublicKey != nil))
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
	if c.Cert != nil {
		if err := c.Cert.validate(); err != nil {
			errs = append(errs, err)
		}
	} else if c.AlipayPublicKey == nil {
		errs = append(errs, fmt.Errorf("%s is required (Alipay's public key, not the app's), or certificate mode", SettingPublicKey))
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

// CertMode is an app's certificate mode (公钥证书模式): the SNs every request carries and the
// Alipay certificates' keys, by SN, that answers may be signed with.
type CertMode struct {
	AppCertSN  string // app_cert_sn: of appCertPublicKey_<app_id>.crt
	RootCertSN string // alipay_root_cert_sn: of alipayRootCert.crt
	// AlipayCertSN names the configured alipayCertPublicKey_RSA2.crt: it verifies answers
	// that carry no alipay_cert_sn, and notifications. May be empty when AlipayCerts holds
	// exactly one certificate.
	AlipayCertSN string
	// AlipayCerts are the keys of Alipay's certificates by SN. An answer naming an SN not
	// here means Alipay rotated its certificate: a configuration error.
	AlipayCerts map[string]*rsa.PublicKey
}

// NewCertMode reads an app's three certificate files (their contents). Its errors begin
// with the accounts-file field that failed (app_cert_file, alipay_cert_file,
// alipay_root_cert_file) and never quote the files.
func NewCertMode(appCertPEM, alipayCertPEM, rootCertPEM []byte) (*CertMode, error) {
	appCert, err := ParseCertificate(appCertPEM)
	if err != nil {
		return nil, fmt.Errorf("app_cert_file: %w", err)
	}
	alipayCert, err := ParseCertificate(alipayCertPEM)
	if err != nil {
		return nil, fmt.Errorf("alipay_cert_file: %w", err)
	}
	alipayKey, err := certPublicKey(alipayCert)
	if err != nil {
		return nil, fmt.Errorf("alipay_cert_file: %w", err)
	}
	rootSN, err := RootCertSN(rootCertPEM)
	if err != nil {
		return nil, fmt.Errorf("alipay_root_cert_file: %w", err)
	}
	alipaySN := CertSN(alipayCert)
	return &CertMode{
		AppCertSN:    CertSN(appCert),
		RootCertSN:   rootSN,
		AlipayCertSN: alipaySN,
		AlipayCerts:  map[string]*rsa.PublicKey{alipaySN: alipayKey},
	}, nil
}

// mode names the credential mode for Config.String; SNs are public, keys never printed.
func (m *CertMode) mode() string {
	if m == nil {
		return "public-key"
	}
	return fmt.Sprintf("certificate(app_cert_sn=%s alipay_root_cert_sn=%s alipay_cert_sn=%s)", m.AppCertSN, m.RootCertSN, m.defaultSN())
}

// defaultSN is the SN of the certificate that verifies what names none.
func (m *CertMode) defaultSN() string {
	if m.AlipayCertSN != "" {
		return m.AlipayCertSN
	}
	for sn := range m.AlipayCerts {
		return sn // validate allows this only with exactly one certificate
	}
	return ""
}

func (m *CertMode) validate() error {
	var errs []error
	if m.AppCertSN == "" {
		errs = append(errs, fmt.Errorf("%s is required in certificate mode (app_cert_sn)", SettingAppCert))
	}
	if m.RootCertSN == "" {
		errs = append(errs, fmt.Errorf("%s is required in certificate mode (alipay_root_cert_sn)", SettingRootCert))
	}
	switch {
	case len(m.AlipayCerts) == 0:
		errs = append(errs, fmt.Errorf("%s is required in certificate mode (Alipay's certificate, not the app's)", SettingAlipayCert))
	case m.AlipayCertSN == "" && len(m.AlipayCerts) > 1:
		errs = append(errs, fmt.Errorf("%s: several Alipay certificates and no AlipayCertSN to say which is current", SettingAlipayCert))
	case m.AlipayCertSN != "" && m.AlipayCerts[m.AlipayCertSN] == nil:
		errs = append(errs, fmt.Errorf("%s: AlipayCertSN %s has no certificate key", SettingAlipayCert, m.AlipayCertSN))
	}
	for sn, k := range m.AlipayCerts {
		if k == nil {
			errs = append(errs, fmt.Errorf("%s: certificate %s has no key", SettingAlipayCert, sn))
		}
	}
	return errors.Join(errs...)
}

// answerKey picks the key that verifies a signed answer: by its alipay_cert_sn in
// certificate mode, else the configured one. An SN we do not hold is a configuration error
// that names it, so an operator sees that Alipay rotated its certificate.
func (c *Config) answerKey(certSN string) (*rsa.PublicKey, string, error) {
	if c.Cert == nil {
		return c.AlipayPublicKey, SettingPublicKey, nil
	}
	if certSN == "" {
		certSN = c.Cert.defaultSN()
	}
	if k := c.Cert.AlipayCerts[certSN]; k != nil {
		return k, fmt.Sprintf("%s (alipay_cert_sn %s)", SettingAlipayCert, certSN), nil
	}
	return nil, "", platformclient.NewError(reconcile.Alipay, reconcile.KindConfig, "UNKNOWN_ALIPAY_CERT_SN",
		fmt.Sprintf("answer signed with Alipay certificate SN %s, which is not configured (have %s): Alipay rotated its certificate; "+
			"download the new alipayCertPublicKey_RSA2.crt from Alipay's console and point %s at it", certSN, c.Cert.defaultSN(), SettingAlipayCert), nil)
}
