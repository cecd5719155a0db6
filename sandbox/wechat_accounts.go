package sandbox

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/platformclient/wechatpay"
)

// WechatMode is how WeChat Pay signs for a merchant.
type WechatMode string

const (
	// WechatModePublicKey: the WeChat Pay public key signs everything (merchants since 2024).
	WechatModePublicKey WechatMode = "public_key"
	// WechatModeCertificate: platform certificates sign everything (the older scheme).
	WechatModeCertificate WechatMode = "certificate"
	// WechatModeMigrating: a merchant moving from certificates to the public key. Answers
	// are signed with the public key only when the request names its id in
	// Wechatpay-Serial; callbacks are signed by either, a share each.
	WechatModeMigrating WechatMode = "migrating"
)

func (m WechatMode) hasPublicKey() bool { return m == WechatModePublicKey || m == WechatModeMigrating }
func (m WechatMode) hasCertificates() bool {
	return m == WechatModeCertificate || m == WechatModeMigrating
}

// WechatAccount is one WeChat Pay merchant (mchid) the sandbox plays: the merchant's side
// (what a reconciler is configured with) and WeChat Pay's (what the sandbox signs with).
type WechatAccount struct {
	MchID string
	AppID string
	// MerchantKey signs the merchant's requests; MerchantSerial is its certificate's serial.
	MerchantKey    *rsa.PrivateKey
	MerchantSerial string
	// APIv3Key (32 bytes) seals callbacks and the certificate list.
	APIv3Key []byte
	Mode     WechatMode
	// PublicKey is "WeChat Pay's" public-key-mode signing key and PublicKeyID its id
	// (public_key and migrating modes).
	PublicKey   *rsa.PrivateKey
	PublicKeyID string
	// Certificates are the platform certificates, oldest first; the last one signs
	// (certificate and migrating modes). RotateWechatCertificate appends.
	Certificates []WechatCertificate
	// CallbackPublicKeyShare is the share of callbacks a migrating merchant gets signed with
	// the public key, the rest with the certificate; zero means half (they alternate).
	CallbackPublicKeyShare float64
	// SubMerchants are the sub_mchids of a service provider (MchID is then its sp_mchid):
	// it calls the partner APIs for them with its own keys, and their callbacks are sealed
	// and signed as its own.
	SubMerchants []string
}

// String never prints key material.
func (a WechatAccount) String() string {
	serials := make([]string, len(a.Certificates))
	for i, c := range a.Certificates {
		serials[i] = c.Serial
	}
	return fmt.Sprintf("sandbox.WechatAccount{MchID:%s AppID:%s Mode:%s MerchantSerial:%s PublicKeyID:%s Certificates:%v [keys REDACTED]}",
		a.MchID, a.AppID, a.Mode, a.MerchantSerial, a.PublicKeyID, serials)
}

// GoString keeps %#v from dumping keys too.
func (a WechatAccount) GoString() string { return a.String() }

// WechatCertificate is a platform certificate and the key that signs with it.
type WechatCertificate struct {
	Serial      string // 40 upper-case hex digits, as WeChat Pay prints them
	Key         *rsa.PrivateKey
	Certificate *x509.Certificate
	PEM         []byte
}

// GenerateWechatAccount makes a merchant with fresh keys (bits 2048 when zero) in mode.
func GenerateWechatAccount(mchID, appID string, mode WechatMode, bits int) (WechatAccount, error) {
	if bits == 0 {
		bits = 2048
	}
	if !mode.hasPublicKey() && !mode.hasCertificates() {
		return WechatAccount{}, fmt.Errorf("sandbox: unknown WeChat Pay mode %q", mode)
	}
	merchantKey, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		return WechatAccount{}, fmt.Errorf("generate merchant key: %w", err)
	}
	a := WechatAccount{MchID: mchID, AppID: appID, MerchantKey: merchantKey, MerchantSerial: strings.ToUpper(newCertificateSerial().Text(16)),
		APIv3Key: []byte(randomAlnum(wechatpay.APIv3KeySize)), Mode: mode}
	if mode.hasPublicKey() {
		if a.PublicKey, err = rsa.GenerateKey(rand.Reader, bits); err != nil {
			return WechatAccount{}, fmt.Errorf("generate public key: %w", err)
		}
		id, _ := rand.Int(rand.Reader, new(big.Int).Exp(big.NewInt(10), big.NewInt(32), nil))
		a.PublicKeyID = fmt.Sprintf("PUB_KEY_ID_%032s", id.String())
	}
	if mode.hasCertificates() {
		cert, err := NewWechatCertificate(bits, time.Now().Add(-time.Hour))
		if err != nil {
			return WechatAccount{}, err
		}
		a.Certificates = []WechatCertificate{cert}
	}
	return a, nil
}

// NewWechatCertificate makes a self-signed platform certificate valid for five years from
// notBefore, with a fresh key and a 40-hex-digit serial.
func NewWechatCertificate(bits int, notBefore time.Time) (WechatCertificate, error) {
	key, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		return WechatCertificate{}, fmt.Errorf("generate certificate key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: newCertificateSerial(),
		Subject: pkix.Name{CommonName: "Tenpay.com", Organization: []string{"Tenpay.com"},
			OrganizationalUnit: []string{"Tenpay.com CA Center (payrecon sandbox)"}, Country: []string{"CN"}},
		NotBefore: notBefore.Truncate(time.Second),
		NotAfter:  notBefore.AddDate(5, 0, 0),
		KeyUsage:  x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return WechatCertificate{}, fmt.Errorf("create platform certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return WechatCertificate{}, fmt.Errorf("parse platform certificate: %w", err)
	}
	return WechatCertificate{Serial: wechatpay.CertificateSerial(cert), Key: key, Certificate: cert,
		PEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// newCertificateSerial is 20 random bytes whose first is 0x10..0x7f: positive, and always
// 40 hex digits.
func newCertificateSerial() *big.Int {
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	b[0] = 0x10 + b[0]%0x70
	return new(big.Int).SetBytes(b)
}

// wechatMerchant is a merchant being played.
type wechatMerchant struct {
	mu        sync.Mutex
	acct      WechatAccount
	callbacks int // callbacks signed so far: the migrating share counts them
	downloads int // GET /v3/certificates calls
}

// wechatMerchants are every merchant the sandbox plays, the default one first.
type wechatMerchants struct {
	byMchID map[string]*wechatMerchant
	order   []*wechatMerchant
	// providerOf maps a sub-merchant (sub_mchid) to its service provider.
	providerOf map[string]*wechatMerchant
}

func newWechatMerchants(keys *Keys, id Identity, extra []WechatAccount) (*wechatMerchants, error) {
	def := WechatAccount{MchID: id.WechatMchID, AppID: id.WechatAppID, MerchantKey: keys.WechatMerchantKey,
		MerchantSerial: keys.WechatMerchantSerial, APIv3Key: keys.WechatAPIv3Key, Mode: WechatModePublicKey,
		PublicKey: keys.WechatPlatformKey, PublicKeyID: keys.WechatPublicKeyID}
	ms := &wechatMerchants{byMchID: map[string]*wechatMerchant{}, providerOf: map[string]*wechatMerchant{}}
	var errs []error
	for i, a := range append([]WechatAccount{def}, extra...) {
		if err := a.validate(); err != nil {
			errs = append(errs, fmt.Errorf("sandbox: WeChat Pay account %d (%s): %w", i, a.MchID, err))
			continue
		}
		if _, dup := ms.byMchID[a.MchID]; dup {
			errs = append(errs, fmt.Errorf("sandbox: WeChat Pay account %d: mchid %s played twice", i, a.MchID))
			continue
		}
		a.Certificates = append([]WechatCertificate(nil), a.Certificates...)
		m := &wechatMerchant{acct: a}
		ms.byMchID[a.MchID] = m
		ms.order = append(ms.order, m)
	}
	for _, m := range ms.order {
		for _, sub := range m.acct.SubMerchants {
			if ms.byMchID[sub] != nil || ms.providerOf[sub] != nil {
				errs = append(errs, fmt.Errorf("sandbox: WeChat Pay sub-merchant %s played twice", sub))
				continue
			}
			ms.providerOf[sub] = m
		}
	}
	return ms, errors.Join(errs...)
}

func (a WechatAccount) validate() error {
	var errs []error
	if a.MchID == "" {
		errs = append(errs, errors.New("MchID is required"))
	}
	if a.MerchantKey == nil || a.MerchantSerial == "" {
		errs = append(errs, errors.New("MerchantKey and MerchantSerial are required"))
	}
	if len(a.APIv3Key) != wechatpay.APIv3KeySize {
		errs = append(errs, fmt.Errorf("APIv3Key must be %d bytes", wechatpay.APIv3KeySize))
	}
	if !a.Mode.hasPublicKey() && !a.Mode.hasCertificates() {
		errs = append(errs, fmt.Errorf("unknown mode %q", a.Mode))
	}
	if a.Mode.hasPublicKey() && (a.PublicKey == nil || a.PublicKeyID == "") {
		errs = append(errs, fmt.Errorf("mode %s needs PublicKey and PublicKeyID", a.Mode))
	}
	if a.Mode.hasCertificates() && len(a.Certificates) == 0 {
		errs = append(errs, fmt.Errorf("mode %s needs a platform certificate", a.Mode))
	}
	return errors.Join(errs...)
}

func (ms *wechatMerchants) byID(mchID string) *wechatMerchant { return ms.byMchID[mchID] }

// defaultMerchant is the one Keys and Identity describe.
func (ms *wechatMerchants) defaultMerchant() *wechatMerchant { return ms.order[0] }

// owner is the merchant whose keys serve an order (Scenario.MerchantID, empty: the default;
// a sub-merchant's: its service provider).
func (ms *wechatMerchants) owner(sc Scenario) *wechatMerchant {
	if sc.MerchantID == "" {
		return ms.defaultMerchant()
	}
	if m := ms.byID(sc.MerchantID); m != nil {
		return m
	}
	return ms.providerOf[sc.MerchantID]
}

// subOf is the sub-merchant an order belongs to, "" for a merchant's own order.
func (ms *wechatMerchants) subOf(sc Scenario) string {
	if ms.providerOf[sc.MerchantID] != nil {
		return sc.MerchantID
	}
	return ""
}

func (ms *wechatMerchants) resetCounts() {
	for _, m := range ms.order {
		m.mu.Lock()
		m.downloads, m.callbacks = 0, 0
		m.mu.Unlock()
	}
}

func (m *wechatMerchant) account() WechatAccount {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := m.acct
	a.Certificates = append([]WechatCertificate(nil), a.Certificates...)
	return a
}

func (m *wechatMerchant) countDownload() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.downloads++
}

// knowsSerial reports whether a request's Wechatpay-Serial names one of this merchant's
// verifying keys, and whether it is the public key id.
func (m *wechatMerchant) knowsSerial(serial string) (known, publicKey bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.acct.Mode.hasPublicKey() && strings.EqualFold(serial, m.acct.PublicKeyID) {
		return true, true
	}
	for _, c := range m.acct.Certificates {
		if strings.EqualFold(serial, c.Serial) {
			return true, false
		}
	}
	return false, false
}

// answerSigner is who signs an answer: the public key in public-key mode, or in migrating
// mode when the request named it; the newest platform certificate otherwise.
func (m *wechatMerchant) answerSigner(requestNamedPublicKey bool) (*rsa.PrivateKey, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.acct.Mode == WechatModePublicKey || (m.acct.Mode == WechatModeMigrating && requestNamedPublicKey) {
		return m.acct.PublicKey, m.acct.PublicKeyID
	}
	return m.currentCertificateLocked()
}

// callbackSigner is who signs the next callback; a migrating merchant spreads them over
// both signers by CallbackPublicKeyShare.
func (m *wechatMerchant) callbackSigner() (*rsa.PrivateKey, string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	switch m.acct.Mode {
	case WechatModePublicKey:
		return m.acct.PublicKey, m.acct.PublicKeyID
	case WechatModeCertificate:
		return m.currentCertificateLocked()
	}
	share := m.acct.CallbackPublicKeyShare
	if share <= 0 {
		share = 0.5
	}
	n := float64(m.callbacks)
	m.callbacks++
	if math.Floor((n+1)*share) > math.Floor(n*share) {
		return m.acct.PublicKey, m.acct.PublicKeyID
	}
	return m.currentCertificateLocked()
}

func (m *wechatMerchant) currentCertificateLocked() (*rsa.PrivateKey, string) {
	c := m.acct.Certificates[len(m.acct.Certificates)-1]
	return c.Key, c.Serial
}

// certificateList is the GET /v3/certificates answer: every certificate, each sealed with
// the API v3 key. A public-key merchant has none.
func (m *wechatMerchant) certificateList() ([]byte, error) {
	a := m.account()
	entries := make([]json.RawMessage, 0, len(a.Certificates))
	for _, c := range a.Certificates {
		nonce := randomAlnum(12)
		ct, err := wechatpay.EncryptResource(a.APIv3Key, wechatpay.CertificateAssociatedData, nonce, c.PEM)
		if err != nil {
			return nil, err
		}
		china := func(t time.Time) string { return t.In(platformclient.ChinaTime).Format(time.RFC3339) }
		entries = append(entries, jsonRaw(object(
			field{"effective_time", china(c.Certificate.NotBefore)},
			field{"encrypt_certificate", jsonRaw(object(
				field{"algorithm", wechatpay.AlgorithmAESGCM}, field{"associated_data", wechatpay.CertificateAssociatedData},
				field{"ciphertext", ct}, field{"nonce", nonce}))},
			field{"expire_time", china(c.Certificate.NotAfter)},
			field{"serial_no", c.Serial},
		)))
	}
	return object(field{"data", entries}), nil
}

// CertificateDownloads is how many GET /v3/certificates requests a merchant sent.
func (s *Sandbox) CertificateDownloads(mchID string) int {
	m := s.wechat.byID(mchID)
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.downloads
}

// RotateWechatCertificate gives a merchant a new platform certificate, which signs from now
// on; the old ones stay listed.
func (s *Sandbox) RotateWechatCertificate(mchID string) error {
	m := s.wechat.byID(mchID)
	if m == nil {
		return fmt.Errorf("sandbox: no WeChat Pay merchant %s", mchID)
	}
	m.mu.Lock()
	if !m.acct.Mode.hasCertificates() {
		m.mu.Unlock()
		return fmt.Errorf("sandbox: WeChat Pay merchant %s is in %s mode: it has no platform certificate", mchID, m.acct.Mode)
	}
	last := m.acct.Certificates[len(m.acct.Certificates)-1]
	m.mu.Unlock()
	// The newest certificate is the one issued last: never earlier than the current one.
	notBefore := s.now()
	if floor := last.Certificate.NotBefore.Add(time.Second); notBefore.Before(floor) {
		notBefore = floor
	}
	cert, err := NewWechatCertificate(last.Key.N.BitLen(), notBefore)
	if err != nil {
		return err
	}
	m.mu.Lock()
	m.acct.Certificates = append(m.acct.Certificates, cert)
	m.mu.Unlock()
	return nil
}

// WechatAccountConfig is a ready client configuration for one merchant at baseURL: the
// public key in public_key mode, the API v3 key alone (certificates) in certificate mode,
// both while migrating.
func (s *Sandbox) WechatAccountConfig(mchID, baseURL string) (wechatpay.Config, error) {
	m := s.wechat.byID(mchID)
	if m == nil {
		return wechatpay.Config{}, fmt.Errorf("sandbox: no WeChat Pay merchant %s", mchID)
	}
	a := m.account()
	cfg := wechatpay.Config{
		BaseURL:    strings.TrimRight(baseURL, "/"),
		MchID:      a.MchID,
		AppID:      a.AppID,
		SerialNo:   a.MerchantSerial,
		PrivateKey: a.MerchantKey,
		APIv3Key:   append([]byte(nil), a.APIv3Key...),
	}
	if a.Mode.hasPublicKey() {
		cfg.PlatformPublicKey, cfg.PublicKeyID = &a.PublicKey.PublicKey, a.PublicKeyID
	}
	return cfg, nil
}

// WriteWechatAccountFiles writes the key files of every merchant into dir (created 0700;
// private keys and API v3 keys 0600) and returns one accounts-file entry each, the default
// merchant first, with the accounts file's field names.
func (s *Sandbox) WriteWechatAccountFiles(dir, baseURL string) ([]map[string]any, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox accounts dir: %w", err)
	}
	var entries []map[string]any
	for _, m := range s.wechat.order {
		a := m.account()
		prefix := filepath.Join(dir, "wechatpay_"+a.MchID)
		priv, err := platformclient.EncodePrivateKeyPEM(a.MerchantKey)
		if err != nil {
			return nil, err
		}
		e := map[string]any{
			"mchid":            a.MchID,
			"base_url":         strings.TrimRight(baseURL, "/"),
			"serial_no":        a.MerchantSerial,
			"private_key_file": prefix + "_apiclient_key.pem",
			"apiv3_key_file":   prefix + "_apiv3.key",
		}
		if a.AppID != "" {
			e["appid"] = a.AppID
		}
		files := []accountFile{{"private_key_file", prefix + "_apiclient_key.pem", priv, 0o600}, {"apiv3_key_file", prefix + "_apiv3.key", a.APIv3Key, 0o600}}
		if a.Mode.hasPublicKey() {
			pub, err := platformclient.EncodePublicKeyPEM(&a.PublicKey.PublicKey)
			if err != nil {
				return nil, err
			}
			e["public_key_id"] = a.PublicKeyID
			files = append(files, accountFile{"public_key_file", prefix + "_pub_key.pem", pub, 0o644})
		}
		if err := writeAccountFiles(e, files); err != nil {
			return nil, err
		}
		if len(a.SubMerchants) > 0 {
			// A service provider: named by sp_mchid, its sub-merchants listed.
			e["sp_mchid"] = e["mchid"]
			delete(e, "mchid")
			subs := make([]map[string]any, len(a.SubMerchants))
			for i, sub := range a.SubMerchants {
				subs[i] = map[string]any{"sub_mchid": sub}
			}
			e["sub_merchants"] = subs
		}
		entries = append(entries, e)
	}
	return entries, nil
}

// wechatMerchantOf is the merchant whose Authorization a request carries, if any.
func (s *Sandbox) wechatMerchantOf(authorization string) (*wechatMerchant, string) {
	a, err := wechatpay.ParseAuthorization(authorization)
	if err != nil {
		return nil, ""
	}
	return s.wechat.byID(a.MchID), a.MchID
}

// wechatMerchantInfo describes every merchant for the control API: ids, mode and serials,
// never a key.
func (s *Sandbox) wechatMerchantInfo() []map[string]any {
	out := make([]map[string]any, 0, len(s.wechat.order))
	for _, m := range s.wechat.order {
		a := m.account()
		serials := make([]string, len(a.Certificates))
		for i, c := range a.Certificates {
			serials[i] = c.Serial
		}
		out = append(out, map[string]any{"mchid": a.MchID, "appid": a.AppID, "mode": a.Mode, "serial_no": a.MerchantSerial,
			"public_key_id": a.PublicKeyID, "certificate_serials": serials})
	}
	return out
}
