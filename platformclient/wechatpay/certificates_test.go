package wechatpay

import (
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestConfigKeyModes(t *testing.T) {
	key := platformKey(t)
	base := func() Config {
		return Config{MchID: "1900000001", SerialNo: "ab12", PrivateKey: key}
	}
	cases := map[string]struct {
		mod     func(*Config)
		wantErr string // a setting the error must name; empty: valid
	}{
		"public key":        {func(c *Config) { c.PlatformPublicKey, c.PublicKeyID = &key.PublicKey, testKeyID }, ""},
		"certificates only": {func(c *Config) { c.APIv3Key = []byte(testV3Key) }, ""},
		"migrating (both)": {func(c *Config) {
			c.PlatformPublicKey, c.PublicKeyID, c.APIv3Key = &key.PublicKey, testKeyID, []byte(testV3Key)
		}, ""},
		"key without id":          {func(c *Config) { c.PlatformPublicKey, c.APIv3Key = &key.PublicKey, []byte(testV3Key) }, SettingPublicKeyID},
		"id without key":          {func(c *Config) { c.PublicKeyID, c.APIv3Key = testKeyID, []byte(testV3Key) }, SettingPublicKey},
		"neither, no API v3 key":  {func(c *Config) {}, SettingAPIv3Key},
		"certificates, short key": {func(c *Config) { c.APIv3Key = []byte("0123456789abcdef") }, SettingAPIv3Key},
		"whitespace id is no id":  {func(c *Config) { c.PlatformPublicKey, c.PublicKeyID = &key.PublicKey, "  " }, SettingPublicKeyID},
	}
	for name, tc := range cases {
		cfg := base()
		tc.mod(&cfg)
		_, err := New(cfg)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("%s: %v", name, err)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("%s: %v, want an error naming %s", name, err, tc.wantErr)
		}
	}
	c, err := New(Config{MchID: "1", SerialNo: "ab", PrivateKey: key, APIv3Key: []byte(testV3Key)})
	if err != nil {
		t.Fatal(err)
	}
	if c.cfg.CertificateRefresh != DefaultCertificateRefresh || c.cfg.CertificateRefreshMin != DefaultCertificateRefreshMin {
		t.Errorf("refresh defaults %s, %s", c.cfg.CertificateRefresh, c.cfg.CertificateRefreshMin)
	}
}

// The wechatpay-go notification vector is signed by a platform certificate: it verifies
// when its serial is looked up among certificates, keyed by the certificate's own serial.
func TestKnownAnswerNotificationByCertificate(t *testing.T) {
	block, _ := pem.Decode(loadFixture(t, "wechatpay-go_notify_cert.pem"))
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if got := CertificateSerial(cert); got != "D7CE59D1F522D701" {
		t.Fatalf("certificate serial %s", got)
	}
	var asked []string
	v := Verifier{
		Now: func() time.Time { return time.Unix(1624523846, 0) },
		Certificate: func(serial string) (*rsa.PublicKey, bool) {
			asked = append(asked, serial)
			if serial == CertificateSerial(cert) {
				return cert.PublicKey.(*rsa.PublicKey), true
			}
			return nil, false
		},
	}
	body := `{"id":"3119dfba-e649-5eec-ab1e-3412bc4d2e17","create_time":"2021-06-24T16:37:26+08:00","resource_type":"encrypt-resource","event_type":"PAYSCORE.USER_OPEN_SERVICE","summary":"签约成功","resource":{"original_type":"payscore","algorithm":"AEAD_AES_256_GCM","ciphertext":"YDS3lKPaC4Y52Gf3uhft5qUBlIa8b428AWTtTauHQfQrRw+X1WpiuHIDy0vo1Vd6VEq67aVyqPdDYMkRVSDaZL3iZttevRMOoPKMifozg6XPWjIZumks/GpT48lI4NizyeaqLBokNebthah3o1H76qSlO9NkDjp9bzmKLEYYH9TEklFUpsvPqOTOcgSLgh21YJXYR7dEBXFgRLiNIKRgO5JdXh1hccRUAlyVWxE54PXpnQ==","associated_data":"payscore","nonce":"Kj7QIyUiYx1q"}}`
	h := http.Header{}
	h.Set(HeaderNonce, "EcZ9Cmy4Xyx1i6RlJQzLcCyEqDa26NBz")
	h.Set(HeaderTimestamp, "1624523846")
	h.Set(HeaderSerial, "d7ce59d1f522d701") // serials compare in any case
	h.Set(HeaderSignature, "tJHIiIS9eB2hAYstmAmbbD3ZE5LiIm/Ug5tuL4fC0YOFRWIHV39UFIZXC0e9Wl6lBu6sKvkqDkzpqzBsVHyXFlbYZTOQrVdG4b6LfTnK4mikv9++ixJMd3vTf2yCqvBkh98zs3Ds5zsYQakzbcwhmw4fMJs4nPLws28H0UW9FjDR//rxELLwXvV1VEA1IBLX70xptjL8hrfUjEE8kkry6yNJTHZRU8CAc7qHli2Ng1V1qb9ARbK8A3ThmFmPQvRGrapI/jS2laKKgYUmfdEdkNO6B2Cke5e8VTxY406ArAmQ90GAihDwIcb16TQMnzCMBoutnwZKNiKRACrFmtxw2Q==")
	if err := v.Verify(h, []byte(body)); err != nil {
		t.Fatalf("published notification rejected: %v", err)
	}
	if err := v.Verify(h, []byte(body+" ")); err == nil {
		t.Fatal("tampered body verified")
	}
	other := h.Clone()
	other.Set(HeaderSerial, "5157F09EFDC096DE15EBE81A47057A7232F1B8E1")
	if err := v.Verify(other, []byte(body)); err == nil || !strings.Contains(err.Error(), "5157F09EFDC096DE15EBE81A47057A7232F1B8E1") {
		t.Fatalf("unknown serial: %v, want a refusal naming the serial", err)
	}
	// A probe or a stale message is refused before any certificate is looked up, so it
	// cannot make a client download anything.
	asked = nil
	probe := h.Clone()
	probe.Set(HeaderSignature, SignTestPrefix+"x")
	stale := v
	stale.Now = func() time.Time { return time.Unix(1624523846, 0).Add(MaxClockSkew) }
	if v.Verify(probe, []byte(body)) == nil || stale.Verify(h, []byte(body)) == nil || len(asked) != 0 {
		t.Fatalf("probe or stale message verified, or looked up %v", asked)
	}
}

func TestNewestCertificates(t *testing.T) {
	key := &platformKey(t).PublicKey
	at := func(h int) time.Time { return time.Date(2024, 1, 1, h, 0, 0, 0, time.UTC) }
	listed := map[string]platformCert{
		"A": {serial: "A", key: key, notBefore: at(1)},
		"B": {serial: "B", key: key, notBefore: at(4)},
		"C": {serial: "C", key: key, notBefore: at(2)},
		"D": {serial: "D", key: key, notBefore: at(3)},
		"X": {serial: "X", notBefore: at(9)}, // expired: no key
	}
	got := newestCertificates(listed, 3)
	for _, want := range []string{"B", "D", "C"} {
		if _, ok := got[want]; !ok {
			t.Errorf("newest three %v lack %s", got, want)
		}
	}
	if len(got) != 3 {
		t.Errorf("kept %d", len(got))
	}
}

func TestVerifierWithoutCertificatesNamesTheSetting(t *testing.T) {
	v := Verifier{PublicKey: &platformKey(t).PublicKey, PublicKeyID: testKeyID, Now: func() time.Time { return testNow }}
	h, body := callback(t, platformKey(t), paidTransaction, testNow)
	h.Set(HeaderSerial, "5157F09EFDC096DE15EBE81A47057A7232F1B8E1")
	err := v.Verify(h, body)
	if err == nil || !strings.Contains(err.Error(), SettingPublicKeyID) {
		t.Fatalf("%v", err)
	}
}
