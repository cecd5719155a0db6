package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// AlipayAccount is one Alipay app. Field names in the accounts file are the single-account
// settings' names without their RECONCILER_ALIPAY_ prefix.
type AlipayAccount struct {
	AppID          string `yaml:"app_id"`
	Gateway        string `yaml:"gateway"`
	PrivateKeyFile string `yaml:"private_key_file"`
	// Public-key mode.
	PublicKeyFile string `yaml:"public_key_file"`
	// Certificate mode (公钥证书模式).
	AppCertFile        string  `yaml:"app_cert_file"`
	AlipayCertFile     string  `yaml:"alipay_cert_file"`
	AlipayRootCertFile string  `yaml:"alipay_root_cert_file"`
	SellerID           string  `yaml:"seller_id"`
	QPS                float64 `yaml:"qps"`
	// SubMerchants are the merchants this app calls for as their third-party app (service
	// provider): with each one's app_auth_token, within this app's QPS.
	SubMerchants []AlipaySubMerchant `yaml:"sub_merchants"`

	origin string // the accounts file it came from; "" for the RECONCILER_ALIPAY_* settings
}

// AlipaySubMerchant is a merchant that authorised an Alipay third-party app to call for it.
type AlipaySubMerchant struct {
	AuthAppID string `yaml:"auth_app_id"` // the merchant's app id: payment_orders.merchant_id
	// AppAuthTokenFile holds the app_auth_token the merchant granted the provider: a secret,
	// read from a file (a mounted Secret) and never logged.
	AppAuthTokenFile string  `yaml:"app_auth_token_file"`
	QPS              float64 `yaml:"qps"` // 0: no budget of its own, only its provider's
}

// Enabled reports whether the single-account settings name an Alipay app.
func (a AlipayAccount) Enabled() bool { return a.AppID != "" }

// CertMode reports whether the app signs in certificate mode.
func (a AlipayAccount) CertMode() bool {
	return a.AppCertFile != "" || a.AlipayCertFile != "" || a.AlipayRootCertFile != ""
}

// Mode names the credential mode for logs: public_key or certificate.
func (a AlipayAccount) Mode() string {
	if a.CertMode() {
		return "certificate"
	}
	return "public_key"
}

// FieldError is a bad value of one of the account's fields, named as the operator wrote
// it: the accounts file, the account and the field, or the single-account setting.
func (a AlipayAccount) FieldError(field, msg string) *Error {
	return fieldError(a.origin, "alipay", a.AppID, "RECONCILER_ALIPAY_", field, msg)
}

// WechatAccount is one WeChat Pay merchant (mchid). Field names in the accounts file are the
// single-account settings' names without their RECONCILER_WECHATPAY_ prefix.
type WechatAccount struct {
	MchID string `yaml:"mchid"`
	// SpMchID names a service provider (服务商) instead of a merchant: its keys sign the
	// partner APIs' calls for its SubMerchants, within its QPS.
	SpMchID        string `yaml:"sp_mchid"`
	AppID          string `yaml:"appid"`
	BaseURL        string `yaml:"base_url"`
	SerialNo       string `yaml:"serial_no"` // merchant certificate serial, upper-case hex
	PrivateKeyFile string `yaml:"private_key_file"`
	APIv3KeyFile   string `yaml:"apiv3_key_file"`
	// Public-key mode; without them the account verifies with platform certificates.
	PublicKeyID   string              `yaml:"public_key_id"`
	PublicKeyFile string              `yaml:"public_key_file"`
	QPS           float64             `yaml:"qps"`
	SubMerchants  []WechatSubMerchant `yaml:"sub_merchants"`

	origin string
}

// WechatSubMerchant is a merchant (特约商户) a WeChat Pay service provider calls for.
type WechatSubMerchant struct {
	SubMchID string  `yaml:"sub_mchid"` // payment_orders.merchant_id
	SubAppID string  `yaml:"sub_appid"` // optional: the sub-merchant's own app id
	QPS      float64 `yaml:"qps"`       // 0: no budget of its own, only its provider's
}

// ID is the account's merchant id: the mchid, or a service provider's sp_mchid.
func (w WechatAccount) ID() string {
	if w.SpMchID != "" {
		return w.SpMchID
	}
	return w.MchID
}

// SubMerchantCount is how many sub-merchants the accounts' service providers call for.
func (a Accounts) SubMerchantCount() int {
	n := 0
	for _, x := range a.Alipay {
		n += len(x.SubMerchants)
	}
	for _, x := range a.WechatPay {
		n += len(x.SubMerchants)
	}
	return n
}

// Enabled reports whether the single-account settings name a WeChat Pay merchant.
func (w WechatAccount) Enabled() bool { return w.MchID != "" }

// Mode names the credential mode for logs: public_key (platform certificates are still
// accepted, for merchants migrating to the public key) or certificate.
func (w WechatAccount) Mode() string {
	if w.PublicKeyID != "" {
		return "public_key"
	}
	return "certificate"
}

// FieldError is a bad value of one of the account's fields (see AlipayAccount.FieldError).
func (w WechatAccount) FieldError(field, msg string) *Error {
	return fieldError(w.origin, "wechatpay", w.ID(), "RECONCILER_WECHATPAY_", field, msg)
}

// Accounts are every merchant account this process speaks for.
type Accounts struct {
	Alipay    []AlipayAccount `yaml:"alipay"`
	WechatPay []WechatAccount `yaml:"wechatpay"`
}

// Len is how many accounts there are on both platforms.
func (a Accounts) Len() int { return len(a.Alipay) + len(a.WechatPay) }

func fieldError(origin, platform, id, prefix, field, msg string) *Error {
	if origin == "" {
		return &Error{Setting: prefix + strings.ToUpper(field), Msg: msg}
	}
	return &Error{Setting: "RECONCILER_ACCOUNTS_FILE", Msg: fmt.Sprintf("%s: %s account %q: %s: %s", origin, platform, id, field, msg)}
}

// Defaults every account takes for a field it leaves empty.
const (
	DefaultAlipayGateway    = "https://openapi.alipay.com/gateway.do"
	DefaultWechatPayBaseURL = "https://api.mch.weixin.qq.com"
	DefaultAccountQPS       = 10
)

// LoadAccountsFile reads the accounts YAML strictly: an unknown field, a value of the wrong
// type or a document that does not parse is an error naming the file, the account (where the
// error sits inside one) and the line.
func LoadAccountsFile(path string) (Accounts, error) {
	fail := func(msg string) error { return &Error{Setting: "RECONCILER_ACCOUNTS_FILE", Msg: path + ": " + msg} }
	raw, err := os.ReadFile(path)
	if err != nil {
		return Accounts{}, fail(fmt.Sprintf("cannot read: %v", errors.Unwrap(err)))
	}
	var tree yaml.Node
	if err := yaml.Unmarshal(raw, &tree); err != nil {
		return Accounts{}, fail("does not parse as YAML: " + strings.TrimPrefix(err.Error(), "yaml: "))
	}
	var out Accounts
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&out); err != nil && !errors.Is(err, io.EOF) {
		return Accounts{}, fail(describeYAMLError(err, &tree))
	}
	for i := range out.Alipay {
		out.Alipay[i].origin = path
	}
	for i := range out.WechatPay {
		out.WechatPay[i].origin = path
	}
	if out.Len() == 0 {
		return Accounts{}, fail("lists no account (want an alipay: or wechatpay: list)")
	}
	return out, nil
}

var (
	yamlLine         = regexp.MustCompile(`line (\d+): `)
	yamlUnknownField = regexp.MustCompile(`field (\S+) not found in type \S+`)
)

// describeYAMLError rewrites the decoder's errors so each names the account it sits in:
// "line 7: field app_key not found in type config.AlipayAccount" becomes
// `alipay account "2021...": line 7: unknown field app_key`.
func describeYAMLError(err error, tree *yaml.Node) string {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return strings.TrimPrefix(err.Error(), "yaml: ")
	}
	msgs := make([]string, 0, len(te.Errors))
	for _, e := range te.Errors {
		msg := e
		if m := yamlUnknownField.FindStringSubmatch(e); m != nil {
			msg = strings.Replace(e, m[0], "unknown field "+m[1], 1)
		}
		if m := yamlLine.FindStringSubmatch(e); m != nil {
			line, _ := strconv.Atoi(m[1])
			if where := accountAt(tree, line); where != "" {
				msg = where + ": " + msg
			}
		}
		msgs = append(msgs, msg)
	}
	return strings.Join(msgs, "; ")
}

// accountAt names the account whose entry holds the given line, e.g. `wechatpay account "1900000001"`.
func accountAt(tree *yaml.Node, line int) string {
	if tree == nil || len(tree.Content) == 0 || tree.Content[0].Kind != yaml.MappingNode {
		return ""
	}
	top := tree.Content[0]
	for i := 0; i+1 < len(top.Content); i += 2 {
		platform, list := top.Content[i].Value, top.Content[i+1]
		if list.Kind != yaml.SequenceNode {
			continue
		}
		idFields := map[string][]string{"alipay": {"app_id"}, "wechatpay": {"mchid", "sp_mchid"}}[platform]
		for n, entry := range list.Content {
			end := nextLine(list.Content, n, top.Content, i)
			if line < entry.Line || (end > 0 && line >= end) {
				continue
			}
			id := fmt.Sprintf("#%d", n+1)
			for k := 0; k+1 < len(entry.Content); k += 2 {
				if slices.Contains(idFields, entry.Content[k].Value) {
					id = strconv.Quote(entry.Content[k+1].Value)
				}
			}
			return platform + " account " + id
		}
	}
	return ""
}

// nextLine is the line where the entry after list[n] begins (0: none follows).
func nextLine(list []*yaml.Node, n int, top []*yaml.Node, i int) int {
	if n+1 < len(list) {
		return list[n+1].Line
	}
	if i+2 < len(top) {
		return top[i+2].Line
	}
	return 0
}

// resolveAccounts builds the account list: the file's accounts, then one account for each
// platform whose single-account settings are set. Defaults are filled and each account is
// validated; the first problem is returned as an *Error that names where it is.
// signing says whether the command signs platform requests (and so needs every account's
// private key); a callback-only serve only verifies.
func resolveAccounts(c *Config, signing bool) error {
	var accts Accounts
	if c.AccountsFile != "" {
		var err error
		if accts, err = LoadAccountsFile(c.AccountsFile); err != nil {
			return err
		}
	}
	if c.Alipay.Enabled() {
		accts.Alipay = append(accts.Alipay, c.Alipay)
	}
	if c.WechatPay.Enabled() {
		accts.WechatPay = append(accts.WechatPay, c.WechatPay)
	}
	seen := map[string]bool{}
	for i := range accts.Alipay {
		a := &accts.Alipay[i]
		if err := a.check(c.AllowInsecurePlatform, signing); err != nil {
			return err
		}
		if seen["alipay/"+a.AppID] {
			return a.FieldError("app_id", fmt.Sprintf("app %s is configured twice", a.AppID))
		}
		seen["alipay/"+a.AppID] = true
	}
	for i := range accts.WechatPay {
		w := &accts.WechatPay[i]
		if err := w.check(c.AllowInsecurePlatform, signing); err != nil {
			return err
		}
		if seen["wechatpay/"+w.ID()] {
			return w.FieldError(w.idField(), fmt.Sprintf("merchant %s is configured twice", w.ID()))
		}
		seen["wechatpay/"+w.ID()] = true
	}
	if err := checkSubMerchants(accts, seen, true); err != nil {
		return err
	}
	c.Accounts = accts
	return nil
}

// LoadAccountsStructure reads the accounts file for a process that holds none of the
// accounts' secrets and needs only who is who: which service provider calls for which
// sub-merchant. The review console is one: its pod mounts the file's ConfigMap but not the
// key Secret, so the file must load there without a key, certificate, API v3 key or
// app_auth_token file, and none is opened: their paths are kept as written, unchecked. What
// the structure needs is checked as the workers check it: the file parses strictly, every
// account and sub-merchant names its id, a WeChat Pay provider is named by sp_mchid, and no
// sub-merchant is listed twice or also as an account of its own. URLs and budgets are the
// callers' concern and are not checked (nor defaulted) here.
func LoadAccountsStructure(path string) (Accounts, error) {
	accts, err := LoadAccountsFile(path)
	if err != nil {
		return Accounts{}, err
	}
	seen := map[string]bool{}
	for _, a := range accts.Alipay {
		if strings.TrimSpace(a.AppID) == "" {
			return Accounts{}, a.FieldError("app_id", "is required")
		}
		seen["alipay/"+a.AppID] = true
	}
	for i := range accts.WechatPay {
		w := &accts.WechatPay[i]
		if err := w.checkRole(); err != nil {
			return Accounts{}, err
		}
		seen["wechatpay/"+w.ID()] = true
	}
	if err := checkSubMerchants(accts, seen, false); err != nil {
		return Accounts{}, err
	}
	return accts, nil
}

func (a *AlipayAccount) check(allowInsecure, signing bool) error {
	if err := checkIdentity(a.FieldError, "app_id", a.AppID, "gateway", &a.Gateway, DefaultAlipayGateway, &a.QPS, allowInsecure); err != nil {
		return err
	}
	// Verifying an Alipay notification needs only Alipay's key or certificates, so a
	// callback-only process forgets the app's private key even where the shared accounts
	// file names it: the key file need not be mounted there, and is never read.
	if !signing {
		a.PrivateKeyFile = ""
	}
	var files []struct{ field, path string }
	if signing {
		files = append(files, struct{ field, path string }{"private_key_file", a.PrivateKeyFile})
	}
	if a.CertMode() {
		if a.PublicKeyFile != "" {
			return a.FieldError("public_key_file", "give either public_key_file (public-key mode) or the three certificate files (certificate mode), not both")
		}
		files = append(files, struct{ field, path string }{"app_cert_file", a.AppCertFile},
			struct{ field, path string }{"alipay_cert_file", a.AlipayCertFile},
			struct{ field, path string }{"alipay_root_cert_file", a.AlipayRootCertFile})
	} else {
		files = append(files, struct{ field, path string }{"public_key_file", a.PublicKeyFile})
	}
	for _, f := range files {
		if err := checkReadable(f.path); err != nil {
			return a.FieldError(f.field, err.Error())
		}
	}
	return nil
}

func (w *WechatAccount) idField() string {
	if w.SpMchID != "" {
		return "sp_mchid"
	}
	return "mchid"
}

// checkRole holds the account to one role: a merchant (mchid), or a service provider
// (sp_mchid) with the sub-merchants it calls for, named by its id.
func (w *WechatAccount) checkRole() error {
	switch {
	case w.MchID != "" && w.SpMchID != "":
		return w.FieldError("sp_mchid", "give mchid (a merchant) or sp_mchid (a service provider), not both")
	case strings.TrimSpace(w.ID()) == "":
		return w.FieldError(w.idField(), "is required")
	case w.SpMchID != "" && len(w.SubMerchants) == 0:
		return w.FieldError("sub_merchants", "a service provider (sp_mchid) lists the sub-merchants it calls for")
	case w.SpMchID == "" && len(w.SubMerchants) > 0:
		return w.FieldError("sub_merchants", "only a service provider has sub-merchants: name it by sp_mchid, not mchid")
	}
	return nil
}

func (w *WechatAccount) check(allowInsecure, signing bool) error {
	if err := w.checkRole(); err != nil {
		return err
	}
	if err := checkIdentity(w.FieldError, w.idField(), w.ID(), "base_url", &w.BaseURL, DefaultWechatPayBaseURL, &w.QPS, allowInsecure); err != nil {
		return err
	}
	// Verifying callbacks without the private key needs the public key: downloading
	// platform certificates is a signed request.
	verifyOnly := !signing && w.PrivateKeyFile == ""
	if verifyOnly && w.PublicKeyFile == "" {
		return w.FieldError("private_key_file", "is required to download the platform certificates that verify callbacks (or give public_key_file and public_key_id)")
	}
	if w.SerialNo == "" && !verifyOnly {
		return w.FieldError("serial_no", "is required (the merchant API certificate's serial)")
	}
	if w.SerialNo != "" && !hexSerial.MatchString(w.SerialNo) {
		return w.FieldError("serial_no", fmt.Sprintf("must be a hexadecimal certificate serial, got %q", w.SerialNo))
	}
	w.SerialNo = strings.ToUpper(w.SerialNo)
	if (w.PublicKeyID == "") != (w.PublicKeyFile == "") {
		if w.PublicKeyID == "" {
			return w.FieldError("public_key_id", "is required with public_key_file (PUB_KEY_ID_...)")
		}
		return w.FieldError("public_key_file", "is required with public_key_id")
	}
	for _, f := range []struct{ field, path string }{
		{"private_key_file", w.PrivateKeyFile}, {"apiv3_key_file", w.APIv3KeyFile}, {"public_key_file", w.PublicKeyFile},
	} {
		if f.path == "" && f.field == "public_key_file" {
			continue // certificate mode
		}
		if f.path == "" && f.field == "private_key_file" && verifyOnly {
			continue
		}
		if err := checkReadable(f.path); err != nil {
			return w.FieldError(f.field, err.Error())
		}
	}
	if _, err := ReadAPIv3Key(w.APIv3KeyFile); err != nil {
		return w.FieldError("apiv3_key_file", err.Error())
	}
	return nil
}

// checkIdentity checks what every account has: its id, its platform URL (defaulted, https
// unless allowed otherwise) and its call budget (defaulted, positive).
func checkIdentity(fail func(field, msg string) *Error, idField, id, urlField string, url *string, defaultURL string, qps *float64, allowInsecure bool) error {
	if strings.TrimSpace(id) == "" {
		return fail(idField, "is required")
	}
	if *url == "" {
		*url = defaultURL
	}
	if err := checkPlatformURL(*url, allowInsecure); err != nil {
		return fail(urlField, err.Error())
	}
	if *qps == 0 {
		*qps = DefaultAccountQPS
	}
	if *qps < 0 {
		return fail("qps", fmt.Sprintf("must be a positive number of calls per second, got %g", *qps))
	}
	return nil
}

func checkReadable(path string) error {
	if path == "" {
		return errors.New("is required")
	}
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("cannot read key file: %w", err)
	}
	return f.Close()
}

// checkPlatformURL allows plain http only where the operator said so (tests, the sandbox,
// staging): a production deployment must never send signed requests in the clear.
func checkPlatformURL(raw string, allowInsecure bool) error {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return fmt.Errorf("is not a valid URL: %s", RedactURL(raw))
	}
	switch {
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && allowInsecure:
		return nil
	case u.Scheme == "http":
		return fmt.Errorf("must be an https:// URL, got %s (set RECONCILER_ALLOW_INSECURE_PLATFORM=true only for tests, the sandbox or staging)", RedactURL(raw))
	}
	return fmt.Errorf("URL scheme must be https, got %q", u.Scheme)
}

// checkSubMerchants holds the service providers' sub-merchants to the file's other accounts:
// each is configured once in the whole file (under one provider, never also as a direct
// account: two budgets and two sets of credentials for one merchant's orders) and names its
// id. calls says the process calls for them: then each asks for no more calls a second than
// its provider has and an Alipay one's token file is readable; a process that only names
// them (LoadAccountsStructure) opens no token file. seen holds the direct accounts.
func checkSubMerchants(accts Accounts, seen map[string]bool, calls bool) error {
	under := map[string]string{} // platform/sub-merchant -> its provider
	claim := func(platform, provider, id string) string {
		key := platform + "/" + id
		switch {
		case seen[key]:
			return fmt.Sprintf("%s is also configured as an account of its own: list it once, under its provider or on its own", id)
		case under[key] != "":
			return fmt.Sprintf("%s is configured twice (already under %s)", id, under[key])
		}
		under[key] = provider
		return ""
	}
	for _, p := range accts.Alipay {
		for i, s := range p.SubMerchants {
			fail := func(field, msg string) *Error { return p.FieldError(SubMerchantField(i, s.AuthAppID, field), msg) }
			if strings.TrimSpace(s.AuthAppID) == "" {
				return fail("auth_app_id", "is required (the merchant's app id, as payment_orders.merchant_id holds it)")
			}
			if msg := claim("alipay", p.AppID, s.AuthAppID); msg != "" {
				return fail("auth_app_id", msg)
			}
			if !calls {
				continue
			}
			if err := checkReadable(s.AppAuthTokenFile); err != nil {
				return fail("app_auth_token_file", strings.Replace(err.Error(), "key file", "token file", 1))
			}
			if err := checkSubQPS(s.QPS, p.QPS); err != "" {
				return fail("qps", err)
			}
		}
	}
	for _, p := range accts.WechatPay {
		for i, s := range p.SubMerchants {
			fail := func(field, msg string) *Error { return p.FieldError(SubMerchantField(i, s.SubMchID, field), msg) }
			if strings.TrimSpace(s.SubMchID) == "" {
				return fail("sub_mchid", "is required (the sub-merchant's mchid, as payment_orders.merchant_id holds it)")
			}
			if msg := claim("wechatpay", p.SpMchID, s.SubMchID); msg != "" {
				return fail("sub_mchid", msg)
			}
			if !calls {
				continue
			}
			if err := checkSubQPS(s.QPS, p.QPS); err != "" {
				return fail("qps", err)
			}
		}
	}
	return nil
}

// SubMerchantField names a sub-merchant's field in an error: its place in the list and its id.
func SubMerchantField(i int, id, field string) string {
	if id == "" {
		return fmt.Sprintf("sub_merchants[%d].%s", i, field)
	}
	return fmt.Sprintf("sub_merchants[%d] (%s).%s", i, id, field)
}

// checkSubQPS is "" for a sub-merchant budget that fits within its provider's (0: none of
// its own), else what is wrong with it.
func checkSubQPS(qps, provider float64) string {
	switch {
	case qps < 0:
		return fmt.Sprintf("must be a positive number of calls per second, got %g", qps)
	case qps > provider:
		return fmt.Sprintf("%g is above its provider's qps %g: a sub-merchant's calls are part of its provider's", qps, provider)
	}
	return ""
}
