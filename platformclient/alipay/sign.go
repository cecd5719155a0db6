package alipay

import (
	"crypto/rsa"
	"net/url"
	"sort"
	"strings"

	"github.com/payrecon/payrecon/platformclient"
)

// SignContent is the string Alipay signs: every parameter whose key is not in exclude and
// whose value is not empty, sorted by key (byte order), joined raw as k=v with '&'.
// Requests exclude only "sign"; notifications exclude "sign" and "sign_type".
func SignContent(params url.Values, exclude ...string) string {
	keys := make([]string, 0, len(params))
	for k, vs := range params {
		if len(vs) == 0 || vs[0] == "" || contains(exclude, k) {
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte('&')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(params.Get(k))
	}
	return b.String()
}

// SignRequest adds sign to params, signed over SignContent(params, "sign").
func SignRequest(key *rsa.PrivateKey, params url.Values) error {
	params.Del("sign")
	sig, err := platformclient.SignSHA256(key, []byte(SignContent(params, "sign")))
	if err != nil {
		return err
	}
	params.Set("sign", sig)
	return nil
}

// VerifyRequest checks a request's sign the way the gateway does (the sandbox uses it).
func VerifyRequest(pub *rsa.PublicKey, params url.Values) error {
	return platformclient.VerifySHA256(pub, []byte(SignContent(params, "sign")), params.Get("sign"))
}

// SignNotify adds sign to a notification's params, over SignContent(params, "sign",
// "sign_type") (the sandbox uses it to send callbacks).
func SignNotify(key *rsa.PrivateKey, params url.Values) error {
	params.Del("sign")
	sig, err := platformclient.SignSHA256(key, []byte(SignContent(params, "sign", "sign_type")))
	if err != nil {
		return err
	}
	params.Set("sign", sig)
	return nil
}

// VerifyNotifyParams checks a notification's (or any rsaCheckV1-style parameter set's)
// sign: sign and sign_type dropped, empty values dropped, sorted, RSA2.
func VerifyNotifyParams(pub *rsa.PublicKey, params url.Values) error {
	sig := params.Get("sign")
	if sig == "" {
		return platformclient.ErrSignature
	}
	return platformclient.VerifySHA256(pub, []byte(SignContent(params, "sign", "sign_type")), sig)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
