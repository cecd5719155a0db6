package platformclient

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	testKeyOnce sync.Once
	testKey     *rsa.PrivateKey
)

// sharedKey generates one 2048-bit key per test binary: key generation is the slow part.
func sharedKey(t testing.TB) *rsa.PrivateKey {
	t.Helper()
	testKeyOnce.Do(func() {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		testKey = k
	})
	return testKey
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func pemBody(p []byte) string {
	block, _ := pem.Decode(p)
	return base64.StdEncoding.EncodeToString(block.Bytes)
}

func TestLoadPrivateKeyFormats(t *testing.T) {
	key := sharedKey(t)
	pkcs1 := pemBlock("RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(key))
	pkcs8der, _ := x509.MarshalPKCS8PrivateKey(key)
	pkcs8 := pemBlock("PRIVATE KEY", pkcs8der)
	wrapped := pemBody(pkcs8) // the bare body, as Alipay's console shows it
	inputs := map[string][]byte{
		"pkcs1 pem":            pkcs1,
		"pkcs8 pem":            pkcs8,
		"pkcs8 pem crlf":       bytes.ReplaceAll(pkcs8, []byte("\n"), []byte("\r\n")),
		"pkcs8 bare":           []byte(wrapped),
		"pkcs1 bare":           []byte(pemBody(pkcs1)),
		"bare with newlines":   []byte(wrapLines(pemBody(pkcs8), 64) + "\n"),
		"bare without padding": []byte(strings.TrimRight(pemBody(pkcs1), "=")),
	}
	for name, in := range inputs {
		got, err := LoadPrivateKey(in)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !got.Equal(key) {
			t.Errorf("%s: loaded a different key", name)
		}
	}
}

func TestLoadPrivateKeyRejects(t *testing.T) {
	key := sharedKey(t)
	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	ecDER, _ := x509.MarshalPKCS8PrivateKey(ec)
	pubDER, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	encrypted := []byte("-----BEGIN RSA PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\nDEK-Info: AES-128-CBC,00000000000000000000000000000000\n\n" +
		wrapLines(base64.StdEncoding.EncodeToString(x509.MarshalPKCS1PrivateKey(key)), 64) + "\n-----END RSA PRIVATE KEY-----\n")
	for name, in := range map[string][]byte{
		"empty":     nil,
		"garbage":   []byte("not a key at all!"),
		"ec pkcs8":  pemBlock("PRIVATE KEY", ecDER),
		"public":    pemBlock("PUBLIC KEY", pubDER),
		"encrypted": encrypted,
		"bad pem":   []byte("-----BEGIN PRIVATE KEY-----\nAAAA"),
	} {
		_, err := LoadPrivateKey(in)
		if err == nil {
			t.Errorf("%s: want an error", name)
			continue
		}
		if body := base64.StdEncoding.EncodeToString(x509.MarshalPKCS1PrivateKey(key)); strings.Contains(err.Error(), body[40:80]) {
			t.Errorf("%s: error quotes key bytes", name)
		}
	}
}

func TestLoadPublicKeyFormats(t *testing.T) {
	key := sharedKey(t)
	pkix, _ := x509.MarshalPKIXPublicKey(&key.PublicKey)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(42), Subject: pkix0("payrecon test"),
		NotBefore: time.Unix(0, 0), NotAfter: time.Now().Add(time.Hour)}
	certDER, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	for name, in := range map[string][]byte{
		"spki pem":   pemBlock("PUBLIC KEY", pkix),
		"pkcs1 pem":  pemBlock("RSA PUBLIC KEY", x509.MarshalPKCS1PublicKey(&key.PublicKey)),
		"cert pem":   pemBlock("CERTIFICATE", certDER),
		"spki bare":  []byte(base64.StdEncoding.EncodeToString(pkix)),
		"pkcs1 bare": []byte(base64.StdEncoding.EncodeToString(x509.MarshalPKCS1PublicKey(&key.PublicKey))),
		"cert bare":  []byte(wrapLines(base64.StdEncoding.EncodeToString(certDER), 76)),
	} {
		got, err := LoadPublicKey(in)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if !got.Equal(&key.PublicKey) {
			t.Errorf("%s: loaded a different key", name)
		}
	}
	if _, err := LoadPublicKey([]byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")); err == nil {
		t.Error("a private key PEM must not load as a public key")
	}
	if _, err := LoadPublicKey([]byte("%%%")); err == nil {
		t.Error("garbage must not load")
	}
}

func TestEncodeRoundTrip(t *testing.T) {
	key := sharedKey(t)
	priv, err := EncodePrivateKeyPEM(key)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := EncodePublicKeyPEM(&key.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := LoadPrivateKey(priv)
	if err != nil || !k2.Equal(key) {
		t.Fatalf("private round trip: %v", err)
	}
	p2, err := LoadPublicKey(pub)
	if err != nil || !p2.Equal(&key.PublicKey) {
		t.Fatalf("public round trip: %v", err)
	}
}

func wrapLines(s string, n int) string {
	var b strings.Builder
	for len(s) > n {
		b.WriteString(s[:n])
		b.WriteByte('\n')
		s = s[n:]
	}
	b.WriteString(s)
	return b.String()
}

func pkix0(cn string) pkix.Name { return pkix.Name{CommonName: cn} }
