package sandbox

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/platformclient/alipay"
)

// AlipayAccount is one Alipay app the sandbox plays, in public-key mode (Cert nil) or in
// certificate mode (公钥证书模式).
type AlipayAccount struct {
	AppID    string
	SellerID string
	// AppKey is the merchant's app private key: the client signs requests with it.
	AppKey *rsa.PrivateKey
	// PlatformKey is "Alipay's" key for this app: it signs answers and notifications. In
	// certificate mode it is the key of the Alipay certificate.
	PlatformKey *rsa.PrivateKey
	// Cert holds the certificate files of an app in certificate mode; nil: public-key mode.
	Cert *AlipayCertFiles
	// SubMerchants are the merchants (their app ids, auth_app_id) that authorised this app
	// as their third-party app: a service provider's. Their app_auth_tokens are
	// AlipayAppAuthToken's, so thousands cost nothing to generate.
	SubMerchants []string
}

// AlipayAppAuthToken is the app_auth_token the sandbox grants app for the merchant authAppID:
// derived, not stored, and different for every pair.
func AlipayAppAuthToken(appID, authAppID string) string {
	sum := sha256.Sum256([]byte("payrecon-sandbox-app-auth-token:" + appID + ":" + authAppID))
	return "202612BB" + hex.EncodeToString(sum[:12])
}

// AlipayCertFiles are an app's certificates as Alipay's console hands them out, plus the
// sandbox's own "Alipay CA" that issued them.
type AlipayCertFiles struct {
	// RootCertPEM is alipayRootCert.crt: an RSA root and an ECDSA root (which the root SN
	// skips, as with the real file's SM2 and ECDSA roots).
	RootCertPEM []byte
	// AppCertPEM is appCertPublicKey_<app_id>.crt: AppKey's certificate, issued by the CA.
	AppCertPEM []byte
	// AlipayCertPEM is alipayCertPublicKey_RSA2.crt: PlatformKey's certificate, followed by
	// the CA's, as the real file carries its issuer.
	AlipayCertPEM []byte
	// CACertPEM and CAKey are the "Alipay CA" (signed by the RSA root); the sandbox issues
	// a new Alipay certificate with them on RotateAlipayCert.
	CACertPEM []byte
	CAKey     *rsa.PrivateKey
}

// String never prints key material.
func (a AlipayAccount) String() string {
	mode := "public-key"
	if a.Cert != nil {
		mode = "certificate"
	}
	return fmt.Sprintf("sandbox.AlipayAccount{AppID:%s SellerID:%s Mode:%s [private keys REDACTED]}", a.AppID, a.SellerID, mode)
}

// GoString keeps %#v from dumping the keys too.
func (a AlipayAccount) GoString() string { return a.String() }

// MarshalJSON keeps an account that ends up in a JSON log field from carrying its keys
// (encoding/json would write D and the primes in decimal).
func (a AlipayAccount) MarshalJSON() ([]byte, error) { return json.Marshal(a.String()) }

// String never prints the CA key.
func (f *AlipayCertFiles) String() string {
	return "sandbox.AlipayCertFiles{root, app, Alipay and CA certificates [CA key REDACTED]}"
}

// GoString keeps %#v from dumping the CA key.
func (f *AlipayCertFiles) GoString() string { return f.String() }

// MarshalJSON keeps the CA key out of JSON.
func (f *AlipayCertFiles) MarshalJSON() ([]byte, error) { return json.Marshal(f.String()) }

// GenerateAlipayAccount makes an app with fresh keys (bits 2048 when zero) and, in
// certificate mode, a fresh chain: an RSA root and an ECDSA root, an "Alipay CA" under the
// RSA root, and the app and Alipay certificates it issues.
func GenerateAlipayAccount(appID, sellerID string, certMode bool, bits int) (AlipayAccount, error) {
	if bits == 0 {
		bits = 2048
	}
	if appID == "" {
		return AlipayAccount{}, errors.New("alipay account: empty app id")
	}
	var keys [2]*rsa.PrivateKey
	for i := range keys {
		k, err := rsa.GenerateKey(rand.Reader, bits)
		if err != nil {
			return AlipayAccount{}, fmt.Errorf("generate alipay account key: %w", err)
		}
		keys[i] = k
	}
	acct := AlipayAccount{AppID: appID, SellerID: sellerID, AppKey: keys[0], PlatformKey: keys[1]}
	if !certMode {
		return acct, nil
	}
	certs, err := generateAlipayChain(acct, bits)
	if err != nil {
		return AlipayAccount{}, fmt.Errorf("alipay account %s: %w", appID, err)
	}
	acct.Cert = certs
	return acct, nil
}

// sandboxCAName is the issuer of the sandbox's certificates: several RDNs, like Alipay's.
func sandboxCAName(cn string) pkix.Name {
	return pkix.Name{Country: []string{"CN"}, Organization: []string{"Ant Financial (payrecon sandbox)"},
		OrganizationalUnit: []string{"Certification Authority"}, CommonName: cn}
}

func generateAlipayChain(acct AlipayAccount, bits int) (*AlipayCertFiles, error) {
	now := time.Now()
	caValidity := func(t *x509.Certificate) *x509.Certificate {
		t.NotBefore, t.NotAfter = now.Add(-time.Hour), now.AddDate(20, 0, 0)
		t.IsCA, t.BasicConstraintsValid = true, true
		t.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign
		return t
	}
	rootKey, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		return nil, err
	}
	rootTmpl := caValidity(&x509.Certificate{SerialNumber: randomSerial(), Subject: sandboxCAName("Ant Financial Certification Authority R1 (sandbox)")})
	rootPEM, root, err := issue(rootTmpl, nil, &rootKey.PublicKey, rootKey)
	if err != nil {
		return nil, err
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	ecTmpl := caValidity(&x509.Certificate{SerialNumber: randomSerial(), Subject: sandboxCAName("Ant Financial Certification Authority E1 (sandbox)")})
	ecRootPEM, _, err := issue(ecTmpl, nil, &ecKey.PublicKey, ecKey)
	if err != nil {
		return nil, err
	}
	caKey, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		return nil, err
	}
	caTmpl := caValidity(&x509.Certificate{SerialNumber: randomSerial(), Subject: sandboxCAName("Ant Financial Certification Authority Class 2 R1 (sandbox)")})
	caPEM, _, err := issue(caTmpl, root, &caKey.PublicKey, rootKey)
	if err != nil {
		return nil, err
	}
	files := &AlipayCertFiles{
		RootCertPEM: append(append(rootPEM, '\n'), ecRootPEM...),
		CACertPEM:   caPEM,
		CAKey:       caKey,
	}
	if files.AppCertPEM, err = files.issueLeaf(acct.SellerID+"-"+acct.AppID, &acct.AppKey.PublicKey); err != nil {
		return nil, err
	}
	if err := files.issueAlipayCert(acct.SellerID, &acct.PlatformKey.PublicKey); err != nil {
		return nil, err
	}
	return files, nil
}

// issueAlipayCert replaces AlipayCertPEM with a certificate for pub (a new serial, so a
// new SN), followed by the CA certificate.
func (f *AlipayCertFiles) issueAlipayCert(sellerID string, pub *rsa.PublicKey) error {
	leaf, err := f.issueLeaf("支付宝(中国)网络技术有限公司-"+sellerID, pub)
	if err != nil {
		return err
	}
	f.AlipayCertPEM = append(append(leaf, '\n'), f.CACertPEM...)
	return nil
}

func (f *AlipayCertFiles) issueLeaf(cn string, pub *rsa.PublicKey) ([]byte, error) {
	if f.CAKey == nil {
		return nil, errors.New("no CA key to issue certificates with")
	}
	ca, err := alipay.ParseCertificate(f.CACertPEM)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      pkix.Name{Country: []string{"CN"}, Organization: []string{"payrecon sandbox"}, OrganizationalUnit: []string{"Alipay"}, CommonName: cn},
		NotBefore:    now.Add(-time.Hour), NotAfter: now.AddDate(5, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageContentCommitment | x509.KeyUsageKeyEncipherment | x509.KeyUsageDataEncipherment,
	}
	out, _, err := issue(tmpl, ca, pub, f.CAKey)
	return out, err
}

func issue(tmpl, parent *x509.Certificate, pub any, signer any) ([]byte, *x509.Certificate, error) {
	if parent == nil {
		parent = tmpl
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, nil, fmt.Errorf("issue certificate %q: %w", tmpl.Subject.CommonName, err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), c, nil
}

// randomSerial is a positive 128-bit serial like Alipay's (2019...-style decimal SNs).
func randomSerial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n.Add(n, big.NewInt(1))
}

// alipayApp is an account as the gateway plays it, with its SNs worked out once.
type alipayApp struct {
	AlipayAccount
	isDefault bool
	certMode  *alipay.CertMode // nil: public-key mode
}

// alipayCertSN is what answers carry beside sign: empty in public-key mode.
func (a *alipayApp) alipayCertSN() string {
	if a.certMode == nil {
		return ""
	}
	return a.certMode.AlipayCertSN
}

// alipayApps are the apps the gateway plays, by app_id. Rotation replaces an app, so the
// gateway takes a snapshot per request.
type alipayApps struct {
	mu        sync.RWMutex
	byID      map[string]*alipayApp
	order     []string // default first, then as configured
	defaultID string
	// providerOf maps a sub-merchant (auth_app_id) to the third-party app that calls for it;
	// subByToken an app_auth_token to its sub-merchant.
	providerOf, subByToken map[string]string
}

// initAlipayApps registers the default app (public-key mode, Keys and Identity) and the
// extra accounts.
func (s *Sandbox) initAlipayApps(extra []AlipayAccount) error {
	s.alipay = &alipayApps{byID: map[string]*alipayApp{}, defaultID: s.id.AlipayAppID,
		providerOf: map[string]string{}, subByToken: map[string]string{}}
	def := AlipayAccount{AppID: s.id.AlipayAppID, SellerID: s.id.AlipaySellerID, AppKey: s.keys.AlipayAppKey, PlatformKey: s.keys.AlipayPlatformKey}
	if err := s.alipay.add(def, true); err != nil {
		return err
	}
	for _, a := range extra {
		if err := s.alipay.add(a, false); err != nil {
			return fmt.Errorf("sandbox: %w", err)
		}
	}
	return nil
}

func (r *alipayApps) add(a AlipayAccount, isDefault bool) error {
	if a.AppID == "" {
		return errors.New("alipay account without an app id")
	}
	if _, dup := r.byID[a.AppID]; dup {
		return fmt.Errorf("alipay account %s configured twice", a.AppID)
	}
	app, err := newAlipayApp(a)
	if err != nil {
		return err
	}
	app.isDefault = isDefault
	for _, sub := range a.SubMerchants {
		if _, dup := r.byID[sub]; dup || r.providerOf[sub] != "" || sub == a.AppID {
			return fmt.Errorf("alipay account %s: sub-merchant %s played twice", a.AppID, sub)
		}
		r.providerOf[sub] = a.AppID
		r.subByToken[AlipayAppAuthToken(a.AppID, sub)] = sub
	}
	r.byID[a.AppID] = app
	r.order = append(r.order, a.AppID)
	return nil
}

// subMerchant is the merchant a call of appID with token is for: the sub-merchant whose
// app_auth_token it is, or "" (no such grant).
func (r *alipayApps) subMerchant(appID, token string) string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if sub := r.subByToken[token]; sub != "" && r.providerOf[sub] == appID {
		return sub
	}
	return ""
}

// signer is the app that answers and notifies for merchant: the merchant's own app, or the
// third-party app that calls for it (nil: neither is played).
func (r *alipayApps) signer(merchant string) *alipayApp {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if app := r.byID[merchant]; app != nil {
		return app
	}
	return r.byID[r.providerOf[merchant]]
}

// newAlipayApp checks an account's material hangs together: the certificates carry the
// keys they claim to, so a test failure means the client, not the fixture.
func newAlipayApp(a AlipayAccount) (*alipayApp, error) {
	if a.AppKey == nil || a.PlatformKey == nil {
		return nil, fmt.Errorf("alipay account %s: AppKey and PlatformKey are required", a.AppID)
	}
	app := &alipayApp{AlipayAccount: a}
	if a.Cert == nil {
		return app, nil
	}
	m, err := alipay.NewCertMode(a.Cert.AppCertPEM, a.Cert.AlipayCertPEM, a.Cert.RootCertPEM)
	if err != nil {
		return nil, fmt.Errorf("alipay account %s: %w", a.AppID, err)
	}
	for _, c := range []struct {
		pemData []byte
		key     *rsa.PrivateKey
		what    string
	}{{a.Cert.AppCertPEM, a.AppKey, "app certificate is not AppKey's"}, {a.Cert.AlipayCertPEM, a.PlatformKey, "Alipay certificate is not PlatformKey's"}} {
		cert, _ := alipay.ParseCertificate(c.pemData) // NewCertMode parsed it already
		if pub, ok := cert.PublicKey.(*rsa.PublicKey); !ok || !pub.Equal(&c.key.PublicKey) {
			return nil, fmt.Errorf("alipay account %s: %s", a.AppID, c.what)
		}
	}
	app.certMode = m
	return app, nil
}

// get returns a snapshot of an app, or nil.
func (r *alipayApps) get(appID string) *alipayApp {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.byID[appID]
}

// owner is the app an order belongs to: its Scenario.MerchantID, else the default app.
func (r *alipayApps) owner(sc Scenario) string {
	if sc.MerchantID != "" {
		return sc.MerchantID
	}
	return r.defaultID
}

// AlipayAccount returns one app the sandbox plays (the default one included).
func (s *Sandbox) AlipayAccount(appID string) (AlipayAccount, bool) {
	app := s.alipay.get(appID)
	if app == nil {
		return AlipayAccount{}, false
	}
	return app.AlipayAccount, true
}

// AlipayAccounts lists every app the sandbox plays, the default one first.
func (s *Sandbox) AlipayAccounts() []AlipayAccount {
	s.alipay.mu.RLock()
	defer s.alipay.mu.RUnlock()
	out := make([]AlipayAccount, 0, len(s.alipay.order))
	for _, id := range s.alipay.order {
		out = append(out, s.alipay.byID[id].AlipayAccount)
	}
	return out
}

// RotateAlipayCert plays Alipay renewing its certificate for an app in certificate mode: a
// new key and a new certificate (new SN) sign every answer and notification from now on.
// A client still holding the old certificate fails with a configuration error naming the
// new SN until it is given the new alipayCertPublicKey_RSA2.crt.
func (s *Sandbox) RotateAlipayCert(appID string) error {
	s.alipay.mu.Lock()
	defer s.alipay.mu.Unlock()
	app := s.alipay.byID[appID]
	switch {
	case app == nil:
		return fmt.Errorf("rotate alipay certificate: no app %s", appID)
	case app.Cert == nil:
		return fmt.Errorf("rotate alipay certificate: app %s is in public-key mode", appID)
	}
	key, err := rsa.GenerateKey(rand.Reader, app.PlatformKey.N.BitLen())
	if err != nil {
		return fmt.Errorf("rotate alipay certificate: %w", err)
	}
	next := app.AlipayAccount
	files := *app.Cert
	if err := files.issueAlipayCert(next.SellerID, &key.PublicKey); err != nil {
		return fmt.Errorf("rotate alipay certificate of %s: %w", appID, err)
	}
	next.Cert, next.PlatformKey = &files, key
	rotated, err := newAlipayApp(next)
	if err != nil {
		return err
	}
	rotated.isDefault = app.isDefault
	s.alipay.byID[appID] = rotated
	return nil
}

// AlipayAccountConfig is a ready client configuration for one app at baseURL, in the app's
// mode; certificate mode is read from the certificate files as a reconciler reads them.
func (s *Sandbox) AlipayAccountConfig(appID, baseURL string) (alipay.Config, error) {
	app := s.alipay.get(appID)
	if app == nil {
		return alipay.Config{}, fmt.Errorf("sandbox: no alipay app %s", appID)
	}
	cfg := alipay.Config{
		Gateway:    strings.TrimRight(baseURL, "/") + "/gateway.do",
		AppID:      app.AppID,
		PrivateKey: app.AppKey,
		SellerID:   app.SellerID,
	}
	if app.Cert == nil {
		cfg.AlipayPublicKey = &app.PlatformKey.PublicKey
		return cfg, nil
	}
	m, err := alipay.NewCertMode(app.Cert.AppCertPEM, app.Cert.AlipayCertPEM, app.Cert.RootCertPEM)
	if err != nil {
		return alipay.Config{}, err
	}
	cfg.Cert = m
	return cfg, nil
}

// WriteAlipayAccountFiles writes every app's key and certificate files into dir (created
// 0700; private keys 0600) and returns one accounts-file entry per app, the default app
// first, with the field names of the accounts file's alipay list; a third-party app's entry
// lists its sub_merchants, each with its app_auth_token in a file of its own (0600).
func (s *Sandbox) WriteAlipayAccountFiles(dir, baseURL string) ([]map[string]any, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("alipay account files: %w", err)
	}
	var entries []map[string]any
	for _, a := range s.AlipayAccounts() {
		prefix := filepath.Join(dir, "alipay-"+a.AppID)
		privPEM, err := platformclient.EncodePrivateKeyPEM(a.AppKey)
		if err != nil {
			return nil, err
		}
		files := []accountFile{{"private_key_file", prefix + "-app-private-key.pem", privPEM, 0o600}}
		if a.Cert == nil {
			pubPEM, err := platformclient.EncodePublicKeyPEM(&a.PlatformKey.PublicKey)
			if err != nil {
				return nil, err
			}
			files = append(files, accountFile{"public_key_file", prefix + "-alipay-public-key.pem", pubPEM, 0o644})
		} else {
			files = append(files,
				accountFile{"app_cert_file", filepath.Join(dir, "appCertPublicKey_"+a.AppID+".crt"), a.Cert.AppCertPEM, 0o644},
				accountFile{"alipay_cert_file", prefix + "-alipayCertPublicKey_RSA2.crt", a.Cert.AlipayCertPEM, 0o644},
				accountFile{"alipay_root_cert_file", prefix + "-alipayRootCert.crt", a.Cert.RootCertPEM, 0o644})
		}
		entry := map[string]any{"app_id": a.AppID, "gateway": strings.TrimRight(baseURL, "/") + "/gateway.do"}
		if a.SellerID != "" {
			entry["seller_id"] = a.SellerID
		}
		if err := writeAccountFiles(entry, files); err != nil {
			return nil, err
		}
		if len(a.SubMerchants) > 0 {
			subs := make([]map[string]any, 0, len(a.SubMerchants))
			for _, sub := range a.SubMerchants {
				path := prefix + "-" + sub + ".token"
				if err := writeFileMode(path, []byte(AlipayAppAuthToken(a.AppID, sub)+"\n"), 0o600); err != nil {
					return nil, err
				}
				subs = append(subs, map[string]any{"auth_app_id": sub, "app_auth_token_file": path})
			}
			entry["sub_merchants"] = subs
		}
		entries = append(entries, entry)
	}
	return entries, nil
}
