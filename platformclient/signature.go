package platformclient

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
)

// ErrSignature is returned when a signature does not verify. It says nothing more on
// purpose: which step failed is no business of whoever forged the message.
var ErrSignature = errors.New("signature does not verify")

// SignSHA256 signs msg with SHA256withRSA (PKCS#1 v1.5), the scheme both Alipay RSA2 and
// WeChat Pay API v3 use, and returns the standard base64 of the signature.
func SignSHA256(key *rsa.PrivateKey, msg []byte) (string, error) {
	if key == nil {
		return "", errors.New("sign: no private key configured")
	}
	sum := sha256.Sum256(msg)
	sig, err := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("sign: %w", err)
	}
	return base64.StdEncoding.EncodeToString(sig), nil
}

// VerifySHA256 checks a standard-base64 SHA256withRSA signature over msg.
func VerifySHA256(pub *rsa.PublicKey, msg []byte, sigB64 string) error {
	if pub == nil {
		return errors.New("verify: no public key configured")
	}
	sig, err := base64.StdEncoding.DecodeString(sigB64)
	if err != nil || len(sig) == 0 {
		return ErrSignature
	}
	sum := sha256.Sum256(msg)
	if rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig) != nil {
		return ErrSignature
	}
	return nil
}

// Digest is the hex SHA-256 of a raw body: Result.RawDigest.
func Digest(raw []byte) string {
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:])
}
