package sandbox

import (
	"crypto/rand"
	"crypto/rsa"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/platformclient/wechatpay"
)

// Keys are both sides' key pairs: the merchant's (what a reconciler is configured with) and
// the platforms' (what the sandbox signs with).
type Keys struct {
	AlipayAppKey      *rsa.PrivateKey // the merchant app key: signs requests
	AlipayPlatformKey *rsa.PrivateKey // "Alipay's" key: signs answers and notifications
	WechatMerchantKey *rsa.PrivateKey // apiclient_key: signs requests
	WechatPlatformKey *rsa.PrivateKey // "WeChat Pay's" key: signs answers and callbacks
	// WechatMerchantSerial is the merchant certificate serial (40 upper-case hex digits).
	WechatMerchantSerial string
	// WechatPublicKeyID names the platform public key (PUB_KEY_ID_...).
	WechatPublicKeyID string
	// WechatAPIv3Key is the 32-byte callback encryption key.
	WechatAPIv3Key []byte
}

// String never prints key material.
func (k *Keys) String() string {
	return fmt.Sprintf("sandbox.Keys{WechatMerchantSerial:%s WechatPublicKeyID:%s [private keys REDACTED]}",
		k.WechatMerchantSerial, k.WechatPublicKeyID)
}

// GenerateKeys makes fresh key pairs (bits 2048 when zero), a merchant serial, a public key
// id and an API v3 key.
func GenerateKeys(bits int) (*Keys, error) {
	if bits == 0 {
		bits = 2048
	}
	var ks [4]*rsa.PrivateKey
	for i := range ks {
		k, err := rsa.GenerateKey(rand.Reader, bits)
		if err != nil {
			return nil, fmt.Errorf("generate sandbox key: %w", err)
		}
		ks[i] = k
	}
	serial := make([]byte, 20)
	_, _ = rand.Read(serial)
	keyID, _ := rand.Int(rand.Reader, new(big.Int).Exp(big.NewInt(10), big.NewInt(32), nil))
	return &Keys{
		AlipayAppKey:         ks[0],
		AlipayPlatformKey:    ks[1],
		WechatMerchantKey:    ks[2],
		WechatPlatformKey:    ks[3],
		WechatMerchantSerial: strings.ToUpper(hex.EncodeToString(serial)),
		WechatPublicKeyID:    fmt.Sprintf("PUB_KEY_ID_%032s", keyID.String()),
		WechatAPIv3Key:       []byte(randomAlnum(wechatpay.APIv3KeySize)),
	}, nil
}

// Identity is the accounts the sandbox plays: the Alipay app and seller, the WeChat Pay
// merchant and app. Zero fields take the defaults.
type Identity struct {
	AlipayAppID    string `json:"alipay_app_id"`
	AlipaySellerID string `json:"alipay_seller_id"`
	WechatMchID    string `json:"wechatpay_mchid"`
	WechatAppID    string `json:"wechatpay_appid"`
}

func (id Identity) withDefaults() Identity {
	if id.AlipayAppID == "" {
		id.AlipayAppID = "2021000122600001"
	}
	if id.AlipaySellerID == "" {
		id.AlipaySellerID = "2088621000000001"
	}
	if id.WechatMchID == "" {
		id.WechatMchID = "1900000001"
	}
	if id.WechatAppID == "" {
		id.WechatAppID = "wxd678efh567hg6787"
	}
	return id
}

// KeyFiles are the paths WriteKeyFiles wrote. The first five are what a reconciler is
// configured with; the rest let a restarted sandbox keep its identity.
type KeyFiles struct {
	Dir              string
	AlipayPrivateKey string // RECONCILER_ALIPAY_PRIVATE_KEY_FILE (the app private key)
	AlipayPublicKey  string // RECONCILER_ALIPAY_PUBLIC_KEY_FILE (Alipay's public key)
	WechatPrivateKey string // RECONCILER_WECHATPAY_PRIVATE_KEY_FILE (apiclient_key.pem)
	WechatPublicKey  string // RECONCILER_WECHATPAY_PUBLIC_KEY_FILE (WeChat Pay public key)
	WechatAPIv3Key   string // RECONCILER_WECHATPAY_APIV3_KEY_FILE (32 bytes, no newline)
	// The sandbox's own side.
	AlipayPlatformPrivateKey string
	WechatPlatformPrivateKey string
	State                    string // sandbox.json: identity, serial, public key id
}

const stateFile = "sandbox.json"

type keyState struct {
	Identity
	WechatMerchantSerial string `json:"wechatpay_serial_no"`
	WechatPublicKeyID    string `json:"wechatpay_public_key_id"`
}

// WriteKeyFiles writes every key file into dir (created 0700; private keys 0600) and
// returns their paths.
func WriteKeyFiles(dir string, keys *Keys, id Identity) (KeyFiles, error) {
	id = id.withDefaults()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return KeyFiles{}, fmt.Errorf("sandbox keys dir: %w", err)
	}
	f := keyFilesIn(dir)
	writes := []struct {
		path string
		data func() ([]byte, error)
		mode os.FileMode
	}{
		{f.AlipayPrivateKey, func() ([]byte, error) { return platformclient.EncodePrivateKeyPEM(keys.AlipayAppKey) }, 0o600},
		{f.AlipayPublicKey, func() ([]byte, error) { return platformclient.EncodePublicKeyPEM(&keys.AlipayPlatformKey.PublicKey) }, 0o644},
		{f.WechatPrivateKey, func() ([]byte, error) { return platformclient.EncodePrivateKeyPEM(keys.WechatMerchantKey) }, 0o600},
		{f.WechatPublicKey, func() ([]byte, error) { return platformclient.EncodePublicKeyPEM(&keys.WechatPlatformKey.PublicKey) }, 0o644},
		{f.WechatAPIv3Key, func() ([]byte, error) { return append([]byte(nil), keys.WechatAPIv3Key...), nil }, 0o600},
		{f.AlipayPlatformPrivateKey, func() ([]byte, error) { return platformclient.EncodePrivateKeyPEM(keys.AlipayPlatformKey) }, 0o600},
		{f.WechatPlatformPrivateKey, func() ([]byte, error) { return platformclient.EncodePrivateKeyPEM(keys.WechatPlatformKey) }, 0o600},
		{f.State, func() ([]byte, error) {
			return json.MarshalIndent(keyState{Identity: id, WechatMerchantSerial: keys.WechatMerchantSerial, WechatPublicKeyID: keys.WechatPublicKeyID}, "", "  ")
		}, 0o644},
	}
	for _, w := range writes {
		b, err := w.data()
		if err != nil {
			return KeyFiles{}, err
		}
		if err := os.WriteFile(w.path, b, w.mode); err != nil {
			return KeyFiles{}, fmt.Errorf("write %s: %w", filepath.Base(w.path), err)
		}
		if err := os.Chmod(w.path, w.mode); err != nil {
			return KeyFiles{}, fmt.Errorf("chmod %s: %w", filepath.Base(w.path), err)
		}
	}
	return f, nil
}

// ErrNoKeys means the directory holds no sandbox key set yet.
var ErrNoKeys = errors.New("no sandbox keys in directory")

// keyFilesIn names the files of a key set in dir: one place, so what WriteKeyFiles writes
// is what LoadKeyFiles reads.
func keyFilesIn(dir string) KeyFiles {
	return KeyFiles{
		Dir:                      dir,
		AlipayPrivateKey:         filepath.Join(dir, "alipay_app_private_key.pem"),
		AlipayPublicKey:          filepath.Join(dir, "alipay_public_key.pem"),
		WechatPrivateKey:         filepath.Join(dir, "wechatpay_apiclient_key.pem"),
		WechatPublicKey:          filepath.Join(dir, "wechatpay_public_key.pem"),
		WechatAPIv3Key:           filepath.Join(dir, "wechatpay_apiv3_key"),
		AlipayPlatformPrivateKey: filepath.Join(dir, "sandbox_alipay_platform_private_key.pem"),
		WechatPlatformPrivateKey: filepath.Join(dir, "sandbox_wechatpay_platform_private_key.pem"),
		State:                    filepath.Join(dir, stateFile),
	}
}

// LoadKeyFiles reads a key set WriteKeyFiles wrote. A directory without sandbox.json
// returns ErrNoKeys.
func LoadKeyFiles(dir string) (*Keys, Identity, KeyFiles, error) {
	files := keyFilesIn(dir)
	raw, err := os.ReadFile(files.State)
	if errors.Is(err, os.ErrNotExist) {
		return nil, Identity{}, KeyFiles{}, ErrNoKeys
	}
	if err != nil {
		return nil, Identity{}, KeyFiles{}, fmt.Errorf("read %s: %w", stateFile, err)
	}
	var st keyState
	if err := json.Unmarshal(raw, &st); err != nil {
		return nil, Identity{}, KeyFiles{}, fmt.Errorf("read %s: %w", stateFile, err)
	}
	keys := &Keys{WechatMerchantSerial: st.WechatMerchantSerial, WechatPublicKeyID: st.WechatPublicKeyID}
	for _, l := range []struct {
		path string
		dst  **rsa.PrivateKey
	}{
		{files.AlipayPrivateKey, &keys.AlipayAppKey},
		{files.AlipayPlatformPrivateKey, &keys.AlipayPlatformKey},
		{files.WechatPrivateKey, &keys.WechatMerchantKey},
		{files.WechatPlatformPrivateKey, &keys.WechatPlatformKey},
	} {
		b, err := os.ReadFile(l.path)
		if err != nil {
			return nil, Identity{}, KeyFiles{}, fmt.Errorf("read %s: %w", filepath.Base(l.path), err)
		}
		if *l.dst, err = platformclient.LoadPrivateKey(b); err != nil {
			return nil, Identity{}, KeyFiles{}, fmt.Errorf("%s: %w", filepath.Base(l.path), err)
		}
	}
	b, err := os.ReadFile(files.WechatAPIv3Key)
	if err != nil {
		return nil, Identity{}, KeyFiles{}, fmt.Errorf("read %s: %w", filepath.Base(files.WechatAPIv3Key), err)
	}
	if keys.WechatAPIv3Key, err = wechatpay.ParseAPIv3Key(b); err != nil {
		return nil, Identity{}, KeyFiles{}, err
	}
	return keys, st.Identity.withDefaults(), files, nil
}

const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"

func randomAlnum(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alnum[int(b[i])%len(alnum)]
	}
	return string(b)
}
