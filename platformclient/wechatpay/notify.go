package wechatpay

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/reconcile"
)

// Sentinels carried in the chain of every ParseNotify error (the same values as the
// platformclient ones).
var (
	ErrBadSignature = platformclient.ErrBadSignature
	ErrMalformed    = platformclient.ErrMalformed
)

// AlgorithmAESGCM is the only resource algorithm WeChat Pay uses for callbacks.
const AlgorithmAESGCM = "AEAD_AES_256_GCM"

// Notification is a callback's envelope.
type Notification struct {
	ID           string   `json:"id"`
	CreateTime   string   `json:"create_time"`
	ResourceType string   `json:"resource_type"`
	EventType    string   `json:"event_type"`
	Summary      string   `json:"summary"`
	Resource     Resource `json:"resource"`
}

// Resource is the encrypted payload of a callback.
type Resource struct {
	OriginalType   string `json:"original_type"`
	Algorithm      string `json:"algorithm"`
	Ciphertext     string `json:"ciphertext"`
	AssociatedData string `json:"associated_data"`
	Nonce          string `json:"nonce"`
}

// NotifyVerifier reads callbacks signed with the WeChat Pay public key: it needs no
// merchant private key, so a callback endpoint can hold only what it must. Callbacks signed
// with a platform certificate (certificate mode, or a merchant migrating) need the
// certificates downloaded, which takes the merchant key: use Client.ParseNotify for those.
type NotifyVerifier struct {
	verifier Verifier
	apiV3Key []byte
}

// NewNotifyVerifier builds a verifier. now defaults to time.Now.
func NewNotifyVerifier(pub *rsa.PublicKey, publicKeyID string, apiV3Key []byte, now func() time.Time) (*NotifyVerifier, error) {
	var errs []error
	if pub == nil {
		errs = append(errs, fmt.Errorf("%s is required", SettingPublicKey))
	}
	if publicKeyID == "" {
		errs = append(errs, fmt.Errorf("%s is required", SettingPublicKeyID))
	}
	if len(apiV3Key) != APIv3KeySize {
		errs = append(errs, fmt.Errorf("%s: the API v3 key must be %d bytes, got %d", SettingAPIv3Key, APIv3KeySize, len(apiV3Key)))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("wechatpay notify verifier: %w", err)
	}
	return &NotifyVerifier{
		verifier: Verifier{PublicKey: pub, PublicKeyID: publicKeyID, Now: now},
		apiV3Key: append([]byte(nil), apiV3Key...),
	}, nil
}

// Callback event types payrecon reads. Every other event type (a pay-score or a
// complaint event sent to the same URL) is verified, then acknowledged unread.
const (
	EventTransactionSuccess = "TRANSACTION.SUCCESS"
	EventRefundSuccess      = "REFUND.SUCCESS"
	EventRefundAbnormal     = "REFUND.ABNORMAL"
	EventRefundClosed       = "REFUND.CLOSED"
)

// Resource original types: what the decrypted object is.
const (
	OriginalTransaction = "transaction"
	OriginalRefund      = "refund"
)

// ParseNotify verifies a callback's signature headers FIRST, then routes on its event_type
// before reading the object: TRANSACTION.* decrypts to the transaction, a
// Notification.Payment; REFUND.SUCCESS, REFUND.ABNORMAL and REFUND.CLOSED decrypt to the
// refund, a Notification.Refund (AmountMinor is amount.refund); any other event type is a
// Notification.Ignored naming it, not decrypted. An envelope without event_type is routed
// on resource.original_type. Results have Source notify and the RawDigest of the raw body.
// Errors carry ErrBadSignature (answer 401) or ErrMalformed (answer 400: unreadable,
// undecryptable, or not the object its event announces).
func (v *NotifyVerifier) ParseNotify(h http.Header, body []byte) (reconcile.Notification, error) {
	n, err := v.envelope(h, body)
	if err != nil {
		return reconcile.Notification{}, err
	}
	switch eventKind(n) {
	case OriginalTransaction:
		res, err := v.payment(n, body)
		if err != nil {
			return reconcile.Notification{}, err
		}
		return reconcile.Notification{Payment: &res}, nil
	case OriginalRefund:
		res, err := v.refund(n, body)
		if err != nil {
			return reconcile.Notification{}, err
		}
		return reconcile.Notification{Refund: &res}, nil
	}
	if n.EventType == "" {
		return reconcile.Notification{}, platformclient.Malformed(reconcile.WechatPay,
			fmt.Sprintf("callback names no event_type and an unknown original_type %q", clipWord(n.Resource.OriginalType)))
	}
	return reconcile.Notification{Ignored: clipWord(n.EventType)}, nil
}

// eventKind is the object a verified envelope carries: OriginalTransaction,
// OriginalRefund, or "" for an event payrecon does not read.
func eventKind(n Notification) string {
	switch {
	case strings.HasPrefix(n.EventType, "TRANSACTION."):
		return OriginalTransaction
	case n.EventType == EventRefundSuccess || n.EventType == EventRefundAbnormal || n.EventType == EventRefundClosed:
		return OriginalRefund
	case n.EventType == "" && (n.Resource.OriginalType == OriginalTransaction || n.Resource.OriginalType == OriginalRefund):
		return n.Resource.OriginalType
	}
	return ""
}

// payment decrypts and reads a transaction callback.
func (v *NotifyVerifier) payment(n Notification, body []byte) (reconcile.Result, error) {
	plain, err := v.decrypt(n)
	if err != nil {
		return reconcile.Result{}, err
	}
	var t Transaction
	if err := json.Unmarshal(plain, &t); err != nil {
		return reconcile.Result{}, platformclient.Malformed(reconcile.WechatPay, "decrypted resource is not a transaction")
	}
	res, err := t.toResult()
	if err != nil {
		return reconcile.Result{}, platformclient.Malformed(reconcile.WechatPay, err.Error())
	}
	res.Source = reconcile.SourceNotify
	res.RawDigest = platformclient.Digest(body)
	return res, nil
}

// refund decrypts and reads a refund callback. The object's refund_status decides the
// state; the event type stands in only when the object names none.
func (v *NotifyVerifier) refund(n Notification, body []byte) (reconcile.RefundResult, error) {
	plain, err := v.decrypt(n)
	if err != nil {
		return reconcile.RefundResult{}, err
	}
	var r Refund
	if err := json.Unmarshal(plain, &r); err != nil {
		return reconcile.RefundResult{}, platformclient.Malformed(reconcile.WechatPay, "decrypted resource is not a refund")
	}
	if r.RefundStatus == "" && r.Status == "" {
		r.RefundStatus = strings.TrimPrefix(n.EventType, "REFUND.")
	}
	res, err := r.toRefundResult()
	if err != nil {
		return reconcile.RefundResult{}, platformclient.Malformed(reconcile.WechatPay, err.Error())
	}
	if res.MerchantID == "" || res.OutTradeNo == "" {
		return reconcile.RefundResult{}, platformclient.Malformed(reconcile.WechatPay, "refund callback lacks mchid or out_trade_no")
	}
	res.Source = reconcile.SourceNotify
	res.RawDigest = platformclient.Digest(body)
	return res, nil
}

// open verifies and decrypts a callback, returning the plaintext and the envelope.
func (v *NotifyVerifier) open(h http.Header, body []byte) ([]byte, Notification, error) {
	n, err := v.envelope(h, body)
	if err != nil {
		return nil, Notification{}, err
	}
	plain, err := v.decrypt(n)
	if err != nil {
		return nil, Notification{}, err
	}
	return plain, n, nil
}

// envelope verifies a callback's signature and reads its envelope, decrypting nothing.
func (v *NotifyVerifier) envelope(h http.Header, body []byte) (Notification, error) {
	if err := v.verifier.Verify(h, body); err != nil {
		return Notification{}, platformclient.BadSignature(reconcile.WechatPay, "callback: "+err.Error())
	}
	var n Notification
	if err := json.Unmarshal(body, &n); err != nil {
		return Notification{}, platformclient.Malformed(reconcile.WechatPay, "callback body is not JSON")
	}
	return n, nil
}

// decrypt opens a verified envelope's resource with the API v3 key.
func (v *NotifyVerifier) decrypt(n Notification) ([]byte, error) {
	if n.Resource.Algorithm != AlgorithmAESGCM {
		return nil, platformclient.Malformed(reconcile.WechatPay, fmt.Sprintf("callback algorithm %q, want %s", clipWord(n.Resource.Algorithm), AlgorithmAESGCM))
	}
	plain, err := DecryptResource(v.apiV3Key, n.Resource.AssociatedData, n.Resource.Nonce, n.Resource.Ciphertext)
	if err != nil {
		return nil, platformclient.Malformed(reconcile.WechatPay, "callback: "+err.Error())
	}
	return plain, nil
}

// clipWord bounds what a verified but unexpected envelope field puts in an error or a log
// line.
func clipWord(s string) string {
	const limit = 64
	if len(s) > limit {
		return s[:limit] + "..."
	}
	return s
}

// NotifyTimeout bounds how long ParseNotify may spend, a certificate download included:
// WeChat Pay wants its answer within 5 s.
const NotifyTimeout = 4 * time.Second

// ParseNotify reads a callback with the client's keys, in every mode: a callback signed
// with the public key or with a platform certificate verifies (downloading the
// certificates when the serial is new, as answers do), and is routed as
// NotifyVerifier.ParseNotify routes it. It is ParseNotifyContext bounded by NotifyTimeout.
func (c *Client) ParseNotify(h http.Header, body []byte) (reconcile.Notification, error) {
	ctx, cancel := context.WithTimeout(context.Background(), NotifyTimeout)
	defer cancel()
	return c.ParseNotifyContext(ctx, h, body)
}

// ParseNotifyContext is ParseNotify; ctx bounds a certificate download it waits for. Its
// errors carry ErrBadSignature (answer 401) or ErrMalformed (answer 400), or are
// KindRetryable when ctx ended while the certificates were downloading (answer 5xx:
// WeChat Pay sends the callback again).
func (c *Client) ParseNotifyContext(ctx context.Context, h http.Header, body []byte) (reconcile.Notification, error) {
	if len(c.cfg.APIv3Key) != APIv3KeySize {
		return reconcile.Notification{}, platformclient.NewError(reconcile.WechatPay, reconcile.KindConfig, "",
			fmt.Sprintf("%s is required to read callbacks", SettingAPIv3Key), nil)
	}
	nv := &NotifyVerifier{verifier: c.verifier(ctx), apiV3Key: c.cfg.APIv3Key}
	res, err := nv.ParseNotify(h, body)
	if err == nil {
		if err = platformclient.CheckNotifyMerchant(reconcile.WechatPay, res, c.cfg.MchID, c.subMerchants); err != nil {
			res = reconcile.Notification{}
		}
	}
	if err != nil && ctx.Err() != nil && errors.Is(err, ErrBadSignature) {
		// Cut short while the certificates were downloading: WeChat Pay will send it again.
		return reconcile.Notification{}, platformclient.NewError(reconcile.WechatPay, reconcile.KindRetryable, "TIMEOUT",
			"gave up waiting for the platform certificates that verify the callback", ctx.Err())
	}
	if err != nil && errors.Is(err, ErrBadSignature) && c.cannotTell(h.Get(HeaderSerial)) {
		// The download got no answer: the serial may be one the list would have named.
		return reconcile.Notification{}, platformclient.NewError(reconcile.WechatPay, reconcile.KindRetryable, "CERTIFICATES_UNAVAILABLE",
			"the platform certificates that verify the callback could not be downloaded", nil)
	}
	// Debug only: the HTTP handler logs the refusal as the security event, once and
	// sampled under a flood (anyone can post junk to a notify URL).
	if err != nil && reconcile.PlatformErrorKindOf(err) == reconcile.KindBadSignature {
		c.log.Debug().Str("event", "bad_signature").Str("raw_digest", platformclient.Digest(body)).
			Str("serial", quoteSerial(h.Get(HeaderSerial))).Err(err).
			Msg("wechatpay callback failed signature verification; refused")
	}
	return res, err
}

// DecryptResource opens an AEAD_AES_256_GCM resource: key is the API v3 key, the IV is the
// nonce string's bytes, AAD the associated_data, ciphertext standard base64 with the 16-byte
// tag appended. Errors never quote the key.
func DecryptResource(key []byte, associatedData, nonce, ciphertextB64 string) ([]byte, error) {
	ct, err := base64.StdEncoding.DecodeString(ciphertextB64)
	if err != nil {
		return nil, errors.New("ciphertext is not base64")
	}
	aead, err := newGCM(key, len(nonce))
	if err != nil {
		return nil, err
	}
	if len(ct) < aead.Overhead() {
		return nil, errors.New("ciphertext shorter than the GCM tag")
	}
	plain, err := aead.Open(nil, []byte(nonce), ct, []byte(associatedData))
	if err != nil {
		return nil, errors.New("ciphertext does not decrypt with the API v3 key (wrong key or tampered)")
	}
	return plain, nil
}

// EncryptResource seals plaintext the way WeChat Pay does (the sandbox uses it).
func EncryptResource(key []byte, associatedData, nonce string, plaintext []byte) (string, error) {
	aead, err := newGCM(key, len(nonce))
	if err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(aead.Seal(nil, []byte(nonce), plaintext, []byte(associatedData))), nil
}

// newGCM builds AES-GCM for the key length given (32 bytes in production: AES-256; the
// published wechatpay-go vectors use 16-byte keys) and the nonce length used (12 bytes).
func newGCM(key []byte, nonceLen int) (cipher.AEAD, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("the API v3 key must be %d bytes, got %d", APIv3KeySize, len(key))
	}
	if nonceLen == 0 {
		return nil, errors.New("resource nonce is empty")
	}
	aead, err := cipher.NewGCMWithNonceSize(block, nonceLen)
	if err != nil {
		return nil, errors.New("resource nonce has an unusable length")
	}
	return aead, nil
}
