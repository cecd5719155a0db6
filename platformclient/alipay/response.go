package alipay

import (
	"bytes"
	"crypto/rsa"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/payrecon/payrecon/platformclient"
)

// errorNode is the node gateway-level failures come in instead of <method>_response.
const errorNode = "error_response"

// Envelope is a gateway answer split into the raw response node and its signature.
type Envelope struct {
	Name string          // the node's key: alipay_trade_query_response or error_response
	Node json.RawMessage // the node's value exactly as sent, from '{' to its matching '}'
	Sign string          // empty when the answer carried none
	// CertSN is alipay_cert_sn, beside sign in certificate mode: the SN of the Alipay
	// certificate whose key signed the node. Empty in public-key mode.
	CertSN string
}

// ResponseNodeName is the key of a method's response node: alipay.trade.query ->
// alipay_trade_query_response.
func ResponseNodeName(method string) string {
	return strings.ReplaceAll(method, ".", "_") + "_response"
}

// ExtractResponse splits an answer body into its raw response node and sign. The node is
// taken with json.RawMessage, which keeps the exact bytes; it is never re-serialised,
// because the signature covers the bytes as Alipay wrote them.
func ExtractResponse(body []byte, method string) (Envelope, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return Envelope{}, fmt.Errorf("answer is not a JSON object: %w", err)
	}
	env := Envelope{Name: ResponseNodeName(method)}
	node, ok := top[env.Name]
	if !ok {
		env.Name = errorNode
		if node, ok = top[errorNode]; !ok {
			return Envelope{}, errors.New("answer has no response node")
		}
	}
	if len(node) == 0 || node[0] != '{' {
		return Envelope{}, errors.New("response node is not a JSON object")
	}
	env.Node = node
	if raw, ok := top["sign"]; ok && !bytes.Equal(raw, []byte("null")) {
		if err := json.Unmarshal(raw, &env.Sign); err != nil {
			return Envelope{}, errors.New("sign is not a string")
		}
	}
	if raw, ok := top["alipay_cert_sn"]; ok && !bytes.Equal(raw, []byte("null")) {
		if err := json.Unmarshal(raw, &env.CertSN); err != nil {
			return Envelope{}, errors.New("alipay_cert_sn is not a string")
		}
	}
	return env, nil
}

// VerifyNode checks the sign over the raw node. Like the official SDKs it tries once more
// with every `\/` turned into `/`: Alipay may escape slashes on the wire while it signed the
// unescaped text.
func VerifyNode(pub *rsa.PublicKey, node []byte, sign string) error {
	if sign == "" {
		return platformclient.ErrSignature
	}
	if platformclient.VerifySHA256(pub, node, sign) == nil {
		return nil
	}
	if bytes.Contains(node, []byte(`\/`)) {
		unescaped := bytes.ReplaceAll(node, []byte(`\/`), []byte("/"))
		if platformclient.VerifySHA256(pub, unescaped, sign) == nil {
			return nil
		}
	}
	return platformclient.ErrSignature
}

// flexString accepts a JSON string or a bare scalar (Alipay documents some codes as
// numbers); either way the literal text is kept.
type flexString string

func (f *flexString) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if bytes.Equal(b, []byte("null")) {
		return nil
	}
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*f = flexString(s)
		return nil
	}
	if len(b) > 0 && (b[0] == '{' || b[0] == '[') {
		return errors.New("want a scalar")
	}
	*f = flexString(b)
	return nil
}

// commonNode holds the fields every response node has.
type commonNode struct {
	Code    flexString `json:"code"`
	Msg     string     `json:"msg"`
	SubCode string     `json:"sub_code"`
	SubMsg  string     `json:"sub_msg"`
}
