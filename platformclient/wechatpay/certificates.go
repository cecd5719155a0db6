package wechatpay

import (
	"context"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/reconcile"
)

// CertificatesPath lists the merchant's platform certificates, each encrypted with the API
// v3 key.
const CertificatesPath = "/v3/certificates"

// CertificateAssociatedData is the associated_data WeChat Pay seals certificates with.
const CertificateAssociatedData = "certificate"

// MaxPlatformCertificates is how many certificates a client keeps, newest first: WeChat
// Pay lists the one in use and, around a rotation, its successor.
const MaxPlatformCertificates = 3

// CertificateList is the answer of GET /v3/certificates.
type CertificateList struct {
	Data []CertificateEntry `json:"data"`
}

// CertificateEntry is one listed platform certificate; the PEM is in EncryptCertificate.
type CertificateEntry struct {
	SerialNo           string   `json:"serial_no"`
	EffectiveTime      string   `json:"effective_time"`
	ExpireTime         string   `json:"expire_time"`
	EncryptCertificate Resource `json:"encrypt_certificate"`
}

// platformCert is a decrypted, parsed platform certificate.
type platformCert struct {
	serial    string
	key       *rsa.PublicKey
	notBefore time.Time
}

// certificateSet is one account's platform certificates and the state of their download.
type certificateSet struct {
	mu        sync.Mutex
	bySerial  map[string]platformCert
	fetchedAt time.Time     // the last download that succeeded
	triedAt   time.Time     // the last download started, whatever came of it
	inflight  chan struct{} // closed when the running download ends; nil when none runs
	// unanswered: the last download got no list from WeChat Pay (no answer, 5xx, a
	// throttle), so a serial the set lacks may be one the platform would have listed.
	unanswered bool
}

// known looks a serial up without downloading anything.
func (s *certificateSet) known(serial string) (*rsa.PublicKey, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cert, ok := s.bySerial[serial]
	return cert.key, ok
}

// KnowsSerial reports whether serial names a key that signs for this account: its public
// key id, or one of its platform certificates. An unknown serial makes the client download
// the certificates once (within the limit of Config.CertificateRefreshMin), so the callback
// endpoint can find the account a callback belongs to by the Wechatpay-Serial that signed it.
func (c *Client) KnowsSerial(ctx context.Context, serial string) bool {
	serial = strings.TrimSpace(serial)
	if serial == "" {
		return false
	}
	if c.cfg.PublicKeyID != "" && strings.EqualFold(serial, c.cfg.PublicKeyID) {
		return true
	}
	if len(c.cfg.APIv3Key) == 0 {
		return false
	}
	_, ok := c.certificateKey(ctx, NormalizeSerial(serial))
	return ok
}

// cannotTell reports whether a failed verification of what serial signed says nothing
// about the signature: serial is neither the public key id nor a certificate the set holds,
// and the last download of the set got no answer from WeChat Pay. Refusing it as a bad
// signature would blame the platform for our own missing list.
func (c *Client) cannotTell(serial string) bool {
	if strings.TrimSpace(serial) == "" || c.HoldsSerial(serial) {
		return false // unsigned, or signed by a key we hold: the verdict stands
	}
	c.certs.mu.Lock()
	defer c.certs.mu.Unlock()
	return c.certs.unanswered
}

// HoldsSerial is KnowsSerial without a download: whether serial is this account's public key
// id or a platform certificate it already holds. A callback endpoint serving several
// merchants asks every merchant this first, so one merchant's callback never makes the
// others download their certificates.
func (c *Client) HoldsSerial(serial string) bool {
	serial = strings.TrimSpace(serial)
	if serial == "" {
		return false
	}
	if c.cfg.PublicKeyID != "" && strings.EqualFold(serial, c.cfg.PublicKeyID) {
		return true
	}
	_, ok := c.certs.known(NormalizeSerial(serial))
	return ok
}

// verifier verifies answers and callbacks for this account. With an API v3 key, a serial
// that is not the public key id is looked up among the platform certificates, which are
// downloaded when missing or old.
func (c *Client) verifier(ctx context.Context) Verifier {
	v := Verifier{PublicKey: c.cfg.PlatformPublicKey, PublicKeyID: c.cfg.PublicKeyID, Now: c.cfg.Now}
	if len(c.cfg.APIv3Key) != 0 {
		v.Certificate = func(serial string) (*rsa.PublicKey, bool) { return c.certificateKey(ctx, serial) }
	}
	return v
}

// certificateKey returns the key of the platform certificate with this serial. When the
// set does not hold the serial, or is older than CertificateRefresh, it is downloaded
// first: one download at a time (concurrent callers wait for the running one), none within
// CertificateRefreshMin of the last. A download that fails keeps the last good set.
func (c *Client) certificateKey(ctx context.Context, serial string) (*rsa.PublicKey, bool) {
	s := c.certs
	for waited := false; ; waited = true {
		s.mu.Lock()
		cert, known := s.bySerial[serial]
		now := c.cfg.Now()
		fresh := !s.fetchedAt.IsZero() && now.Sub(s.fetchedAt) < c.cfg.CertificateRefresh
		if (known && fresh) || waited {
			s.mu.Unlock()
			return cert.key, known
		}
		done := s.inflight
		if done == nil {
			if !s.triedAt.IsZero() && now.Sub(s.triedAt) < c.cfg.CertificateRefreshMin {
				s.mu.Unlock()
				return cert.key, known
			}
			done = c.startDownloadLocked(ctx)
		}
		s.mu.Unlock()
		select {
		case <-done:
		case <-ctx.Done():
			return cert.key, known
		}
	}
}

// startDownloadLocked starts a download of the certificates; the channel closes when it
// ended and the set is updated. Called with c.certs.mu held.
func (c *Client) startDownloadLocked(ctx context.Context) chan struct{} {
	s := c.certs
	done := make(chan struct{})
	s.inflight, s.triedAt = done, c.cfg.Now()
	// Every caller waiting shares this download, so the one that started it giving up must
	// not cancel it; its own deadline bounds the goroutine.
	dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*c.policy.Timeout())
	go func() {
		defer close(done)
		defer cancel()
		set, err := c.downloadCertificates(dctx)
		s.mu.Lock()
		s.inflight = nil
		if err == nil {
			s.bySerial, s.fetchedAt = set, c.cfg.Now()
		}
		switch reconcile.PlatformErrorKindOf(err) {
		case reconcile.KindRetryable, reconcile.KindUnavailable, reconcile.KindRateLimited:
			s.unanswered = true
		default: // a list, or an answer that says something (a bad signature, our key refused)
			s.unanswered = false
		}
		s.mu.Unlock()
		if err != nil {
			c.log.Warn().Str("op", "certificates").Str("kind", reconcile.PlatformErrorKindOf(err).String()).Err(err).
				Msg("wechatpay platform certificate download failed; keeping the certificates already known")
			return
		}
		c.log.Info().Int("certificates", len(set)).Msg("wechatpay platform certificates downloaded")
	}()
	return done
}

// downloadCertificates asks GET /v3/certificates under the call policy, so the download
// spends the account's rate budget like any call, and returns the certificates it lists.
func (c *Client) downloadCertificates(ctx context.Context) (map[string]platformCert, error) {
	var set map[string]platformCert
	err := c.policy.Do(ctx, "certificates", func(ctx context.Context) error {
		a, err := c.send(ctx, http.MethodGet, CertificatesPath, nil)
		if err != nil {
			return err
		}
		if a.status/100 != 2 {
			return classify(a.status, a.apiErr)
		}
		set, err = c.readCertificates(a)
		return err
	})
	return set, err
}

// readCertificates verifies a certificate list and returns its newest certificates.
//
// The answer is signed like any other. When its Wechatpay-Serial is the public key id or a
// certificate already known, that key verifies it. Otherwise (the first download, or the
// signer rotated) it must verify with a certificate it lists itself: those come sealed with
// the API v3 key, which only WeChat Pay and the merchant hold, so they are WeChat Pay's.
// wechatpay-go trusts its first download on the strength of that seal and verifies later
// ones with the certificates it has; this checks the signature of the first one too.
func (c *Client) readCertificates(a answer) (map[string]platformCert, error) {
	serial := NormalizeSerial(a.header.Get(HeaderSerial))
	already := Verifier{PublicKey: c.cfg.PlatformPublicKey, PublicKeyID: c.cfg.PublicKeyID, Now: c.cfg.Now, Certificate: c.certs.known}
	_, _, unknownSigner := already.keyFor(serial)
	if unknownSigner == nil {
		if err := already.Verify(a.header, a.raw); err != nil {
			return nil, c.badSignature(a, "certificate list: "+err.Error())
		}
	}
	var list CertificateList
	if err := json.Unmarshal(a.raw, &list); err != nil {
		if unknownSigner != nil {
			return nil, c.badSignature(a, "certificate list is not JSON and its signer is unknown")
		}
		return nil, platformclient.NewError(reconcile.WechatPay, reconcile.KindPermanent, "UNREADABLE", "signed certificate list is not JSON", err)
	}
	listed := make(map[string]platformCert, len(list.Data))
	for _, e := range list.Data {
		cert, err := c.openCertificate(e)
		if err != nil {
			return nil, err
		}
		listed[cert.serial] = cert
	}
	if unknownSigner != nil {
		self := Verifier{Now: c.cfg.Now, Certificate: func(s string) (*rsa.PublicKey, bool) {
			cert, ok := listed[s]
			return cert.key, ok && cert.key != nil
		}}
		if err := self.Verify(a.header, a.raw); err != nil {
			return nil, c.badSignature(a, "certificate list: "+err.Error())
		}
	}
	newest := newestCertificates(listed, MaxPlatformCertificates)
	if len(newest) == 0 {
		return nil, platformclient.NewError(reconcile.WechatPay, reconcile.KindPermanent, "NO_CERTIFICATE",
			"WeChat Pay lists no platform certificate for this merchant: configure its public key", nil)
	}
	return newest, nil
}

// openCertificate decrypts and parses one listed certificate; it is keyed by its own
// serial, which must be the one listed. The errors never quote the API v3 key or the PEM.
func (c *Client) openCertificate(e CertificateEntry) (platformCert, error) {
	fail := func(kind reconcile.PlatformErrorKind, msg string) (platformCert, error) {
		return platformCert{}, platformclient.NewError(reconcile.WechatPay, kind, "CERTIFICATE",
			fmt.Sprintf("platform certificate %q: %s", quoteSerial(e.SerialNo), msg), nil)
	}
	r := e.EncryptCertificate
	if r.Algorithm != AlgorithmAESGCM {
		return fail(reconcile.KindPermanent, fmt.Sprintf("algorithm %q, want %s", r.Algorithm, AlgorithmAESGCM))
	}
	plain, err := DecryptResource(c.cfg.APIv3Key, r.AssociatedData, r.Nonce, r.Ciphertext)
	if err != nil {
		return fail(reconcile.KindConfig, err.Error()+": check "+SettingAPIv3Key)
	}
	block, _ := pem.Decode(plain)
	if block == nil || block.Type != "CERTIFICATE" {
		return fail(reconcile.KindPermanent, "decrypted content is not a PEM certificate")
	}
	x, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fail(reconcile.KindPermanent, "decrypted content is not an X.509 certificate")
	}
	key, ok := x.PublicKey.(*rsa.PublicKey)
	if !ok {
		return fail(reconcile.KindPermanent, "certificate key is not RSA")
	}
	serial := CertificateSerial(x)
	if serial != NormalizeSerial(e.SerialNo) {
		return fail(reconcile.KindPermanent, "the certificate's own serial is "+serial)
	}
	if !x.NotAfter.After(c.cfg.Now()) {
		// Expired: WeChat Pay no longer signs with it. Kept out rather than refused, so the
		// rest of the list still counts.
		return platformCert{serial: serial, notBefore: x.NotBefore}, nil
	}
	return platformCert{serial: serial, key: key, notBefore: x.NotBefore}, nil
}

// newestCertificates keeps the n newest usable certificates.
func newestCertificates(listed map[string]platformCert, n int) map[string]platformCert {
	all := make([]platformCert, 0, len(listed))
	for _, cert := range listed {
		if cert.key != nil {
			all = append(all, cert)
		}
	}
	slices.SortFunc(all, func(a, b platformCert) int {
		if c := b.notBefore.Compare(a.notBefore); c != 0 {
			return c
		}
		return strings.Compare(b.serial, a.serial)
	})
	out := make(map[string]platformCert, min(n, len(all)))
	for _, cert := range all[:min(n, len(all))] {
		out[cert.serial] = cert
	}
	return out
}

// CertificateSerial is a certificate's serial as WeChat Pay prints it: upper-case hex.
func CertificateSerial(cert *x509.Certificate) string {
	return fmt.Sprintf("%X", cert.SerialNumber.Bytes())
}
