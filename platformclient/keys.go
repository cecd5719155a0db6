package platformclient

import (
	"bytes"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
)

// ErrKey is wrapped by every key loading failure. Its messages name the format problem,
// never any byte of the key.
var ErrKey = errors.New("invalid key")

// LoadPrivateKey reads an RSA private key as the platforms' consoles hand it out: PKCS#1
// ("RSA PRIVATE KEY") or PKCS#8 ("PRIVATE KEY") PEM, or the bare base64 body Alipay's
// console shows (either encoding).
func LoadPrivateKey(data []byte) (*rsa.PrivateKey, error) {
	der, kind, err := keyDER(data, "RSA PRIVATE KEY", "PRIVATE KEY")
	if err != nil {
		return nil, err
	}
	switch kind {
	case "RSA PRIVATE KEY":
		return parsePKCS1Private(der)
	case "PRIVATE KEY":
		return parsePKCS8Private(der)
	}
	// Bare base64: try both encodings.
	if k, err := parsePKCS8Private(der); err == nil {
		return k, nil
	}
	if k, err := parsePKCS1Private(der); err == nil {
		return k, nil
	}
	return nil, fmt.Errorf("%w: private key is neither PKCS#8 nor PKCS#1 RSA", ErrKey)
}

// LoadPublicKey reads an RSA public key: SubjectPublicKeyInfo ("PUBLIC KEY") or PKCS#1
// ("RSA PUBLIC KEY") PEM, an X.509 certificate PEM (its key is used; the chain is not
// checked: the key file is configuration, trusted like the private key), or a bare base64
// body of any of those.
func LoadPublicKey(data []byte) (*rsa.PublicKey, error) {
	der, kind, err := keyDER(data, "PUBLIC KEY", "RSA PUBLIC KEY", "CERTIFICATE")
	if err != nil {
		return nil, err
	}
	switch kind {
	case "PUBLIC KEY":
		return parsePKIXPublic(der)
	case "RSA PUBLIC KEY":
		return parsePKCS1Public(der)
	case "CERTIFICATE":
		return parseCertPublic(der)
	}
	for _, parse := range []func([]byte) (*rsa.PublicKey, error){parsePKIXPublic, parsePKCS1Public, parseCertPublic} {
		if k, err := parse(der); err == nil {
			return k, nil
		}
	}
	return nil, fmt.Errorf("%w: public key is neither SubjectPublicKeyInfo, PKCS#1 nor a certificate", ErrKey)
}

// EncodePrivateKeyPEM writes key as PKCS#8 PEM ("PRIVATE KEY"), the form WeChat Pay's
// apiclient_key.pem uses and both platforms accept.
func EncodePrivateKeyPEM(key *rsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("encode private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// EncodePublicKeyPEM writes pub as SubjectPublicKeyInfo PEM ("PUBLIC KEY").
func EncodePublicKeyPEM(pub *rsa.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return nil, fmt.Errorf("encode public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// keyDER returns the DER bytes and the PEM type (empty for a bare base64 body).
func keyDER(data []byte, accepted ...string) ([]byte, string, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, "", fmt.Errorf("%w: empty", ErrKey)
	}
	if bytes.HasPrefix(data, []byte("-----BEGIN")) {
		block, _ := pem.Decode(data)
		if block == nil {
			return nil, "", fmt.Errorf("%w: malformed PEM", ErrKey)
		}
		if _, encrypted := block.Headers["Proc-Type"]; encrypted {
			return nil, "", fmt.Errorf("%w: encrypted PEM is not supported", ErrKey)
		}
		for _, t := range accepted {
			if block.Type == t {
				return block.Bytes, t, nil
			}
		}
		return nil, "", fmt.Errorf("%w: unexpected PEM type %q", ErrKey, block.Type)
	}
	compact := make([]byte, 0, len(data))
	for _, c := range data {
		if c != '\n' && c != '\r' && c != ' ' && c != '\t' {
			compact = append(compact, c)
		}
	}
	der, err := base64.StdEncoding.DecodeString(string(compact))
	if err != nil {
		der, err = base64.RawStdEncoding.DecodeString(string(compact))
	}
	if err != nil {
		return nil, "", fmt.Errorf("%w: neither PEM nor base64", ErrKey)
	}
	return der, "", nil
}

// The parse helpers drop the underlying error text on purpose: asn1 errors can quote the
// bytes they choked on.

func parsePKCS1Private(der []byte) (*rsa.PrivateKey, error) {
	k, err := x509.ParsePKCS1PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("%w: not a PKCS#1 RSA private key", ErrKey)
	}
	return k, nil
}

func parsePKCS8Private(der []byte) (*rsa.PrivateKey, error) {
	k, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil {
		return nil, fmt.Errorf("%w: not a PKCS#8 private key", ErrKey)
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%w: PKCS#8 key is %T, want RSA", ErrKey, k)
	}
	return rk, nil
}

func parsePKIXPublic(der []byte) (*rsa.PublicKey, error) {
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("%w: not a SubjectPublicKeyInfo public key", ErrKey)
	}
	rk, ok := k.(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%w: public key is %T, want RSA", ErrKey, k)
	}
	return rk, nil
}

func parsePKCS1Public(der []byte) (*rsa.PublicKey, error) {
	k, err := x509.ParsePKCS1PublicKey(der)
	if err != nil {
		return nil, fmt.Errorf("%w: not a PKCS#1 RSA public key", ErrKey)
	}
	return k, nil
}

func parseCertPublic(der []byte) (*rsa.PublicKey, error) {
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("%w: not an X.509 certificate", ErrKey)
	}
	rk, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		return nil, fmt.Errorf("%w: certificate key is %T, want RSA", ErrKey, cert.PublicKey)
	}
	return rk, nil
}
