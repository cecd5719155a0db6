package platformclient

import (
	cryptorand "crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// Messages of both schemes: an RSA2 sign content and a WeChat Pay request message.
var crossCheckMessages = map[string]string{
	"alipay rsa2": `app_id=2014072300007148&biz_content={"out_trade_no":"X1"}&charset=utf-8&format=JSON&method=alipay.trade.query&sign_type=RSA2&timestamp=2024-01-01 12:00:00&version=1.0`,
	"wechat v3":   "GET\n/v3/pay/transactions/out-trade-no/X1?mchid=1900000001\n1554208460\n593BEC0C930BF1AFEB40B4A08C8FB242\n\n",
	"utf-8":       "app_id=2019090366875133&extra=中文测试&method=koubei.marketing.data.indicator.query",
}

// TestSignaturesCrossCheckWithOpenSSL proves our SHA256withRSA is the standard one: what we
// sign verifies with `openssl dgst -sha256 -verify`, and what openssl signs verifies here.
func TestSignaturesCrossCheckWithOpenSSL(t *testing.T) {
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		// The cross-check is the point of the test: no openssl, no proof (apt-get install openssl).
		t.Fatal("openssl not on PATH: install it (apt-get install openssl) to cross-check signatures")
	}
	key := sharedKey(t)
	dir := t.TempDir()
	keyPEM, _ := EncodePrivateKeyPEM(key)
	pubPEM, _ := EncodePublicKeyPEM(&key.PublicKey)
	keyFile, pubFile := filepath.Join(dir, "key.pem"), filepath.Join(dir, "pub.pem")
	must(t, os.WriteFile(keyFile, keyPEM, 0o600))
	must(t, os.WriteFile(pubFile, pubPEM, 0o644))

	for name, msg := range crossCheckMessages {
		msgFile := filepath.Join(dir, "msg.bin")
		must(t, os.WriteFile(msgFile, []byte(msg), 0o644))

		// ours -> openssl
		sig, err := SignSHA256(key, []byte(msg))
		must(t, err)
		raw, _ := base64.StdEncoding.DecodeString(sig)
		sigFile := filepath.Join(dir, "ours.bin")
		must(t, os.WriteFile(sigFile, raw, 0o644))
		out, err := exec.Command(openssl, "dgst", "-sha256", "-verify", pubFile, "-signature", sigFile, msgFile).CombinedOutput()
		if err != nil {
			t.Errorf("%s: openssl rejects our signature: %v %s", name, err, out)
		}

		// openssl -> ours
		theirs := filepath.Join(dir, "theirs.bin")
		out, err = exec.Command(openssl, "dgst", "-sha256", "-sign", keyFile, "-out", theirs, msgFile).CombinedOutput()
		if err != nil {
			t.Fatalf("openssl sign: %v %s", err, out)
		}
		b, _ := os.ReadFile(theirs)
		if err := VerifySHA256(&key.PublicKey, []byte(msg), base64.StdEncoding.EncodeToString(b)); err != nil {
			t.Errorf("%s: we reject openssl's signature: %v", name, err)
		}
		// And the check is real: one changed byte fails.
		if err := VerifySHA256(&key.PublicKey, []byte(msg+" "), base64.StdEncoding.EncodeToString(b)); err == nil {
			t.Errorf("%s: a tampered message verified", name)
		}
	}
}

func TestVerifyRejectsOtherKeyAndGarbage(t *testing.T) {
	key := sharedKey(t)
	other, err := rsa.GenerateKey(cryptorand.Reader, 1024)
	if err != nil {
		t.Fatalf("cannot make a second key: %v", err)
	}
	sig, _ := SignSHA256(other, []byte("m"))
	if VerifySHA256(&key.PublicKey, []byte("m"), sig) == nil {
		t.Error("a signature by another key verified")
	}
	for _, s := range []string{"", "!!!", "WECHATPAY/SIGNTEST/abc", base64.StdEncoding.EncodeToString([]byte("short"))} {
		if VerifySHA256(&key.PublicKey, []byte("m"), s) == nil {
			t.Errorf("signature %q verified", s)
		}
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
