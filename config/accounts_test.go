package config

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// accountsFixture writes key files and returns a function that writes an accounts file
// (with {{dir}} replaced by the key directory) and loads the configuration with it.
func accountsFixture(t *testing.T) (dir string, loadWith func(yaml string, env ...string) (Config, error)) {
	t.Helper()
	dir = t.TempDir()
	for name, body := range map[string]string{
		"app1.pem": "k", "alipay1.pem": "k", "app-cert.crt": "c", "alipay-cert.crt": "c", "root.crt": "c",
		"mch1.pem": "k", "pub1.pem": "k", "mch2.pem": "k",
		"v3.key": strings.Repeat("v", 32) + "\n", "short.key": "short",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir, func(doc string, env ...string) (Config, error) {
		path := filepath.Join(dir, "accounts.yaml")
		if err := os.WriteFile(path, []byte(strings.ReplaceAll(doc, "{{dir}}", dir)), 0o600); err != nil {
			t.Fatal(err)
		}
		m := map[string]string{"RECONCILER_DATABASE_URL": "postgres://u@h/db", "RECONCILER_ACCOUNTS_FILE": path}
		for i := 0; i+1 < len(env); i += 2 {
			m[env[i]] = env[i+1]
		}
		return load(GroupAll, nil, m)
	}
}

const goodAccounts = `
alipay:
  - app_id: "2021000000000001"
    private_key_file: {{dir}}/app1.pem
    public_key_file: {{dir}}/alipay1.pem
    qps: 50
  - app_id: "2021000000000002"
    gateway: https://openapi-sandbox.dl.alipaydev.com/gateway.do
    private_key_file: {{dir}}/app1.pem
    app_cert_file: {{dir}}/app-cert.crt
    alipay_cert_file: {{dir}}/alipay-cert.crt
    alipay_root_cert_file: {{dir}}/root.crt
    seller_id: "2088000000000001"
wechatpay:
  - mchid: "1900000001"
    appid: wx0000000000000001
    serial_no: 3775b6a45acd588826d15e583a95f5dd00000000
    private_key_file: {{dir}}/mch1.pem
    apiv3_key_file: {{dir}}/v3.key
    public_key_id: PUB_KEY_ID_0119000000000000000000000000
    public_key_file: {{dir}}/pub1.pem
    qps: 25.5
  - mchid: "1900000002"
    serial_no: ABCDEF
    private_key_file: {{dir}}/mch2.pem
    apiv3_key_file: {{dir}}/v3.key
`

func TestAccountsFile(t *testing.T) {
	dir, loadWith := accountsFixture(t)
	c, err := loadWith(goodAccounts)
	if err != nil {
		t.Fatal(err)
	}
	a, w := c.Accounts.Alipay, c.Accounts.WechatPay
	if len(a) != 2 || len(w) != 2 {
		t.Fatalf("accounts = %+v", c.Accounts)
	}
	checks := map[string]bool{
		"alipay qps":                a[0].QPS == 50 && a[1].QPS == DefaultAccountQPS,
		"alipay default gateway":    a[0].Gateway == DefaultAlipayGateway,
		"alipay own gateway":        a[1].Gateway == "https://openapi-sandbox.dl.alipaydev.com/gateway.do",
		"alipay modes":              a[0].Mode() == "public_key" && a[1].Mode() == "certificate",
		"alipay cert files":         a[1].AlipayRootCertFile == filepath.Join(dir, "root.crt"),
		"wechat qps":                w[0].QPS == 25.5 && w[1].QPS == DefaultAccountQPS,
		"wechat serial upper-cased": w[0].SerialNo == "3775B6A45ACD588826D15E583A95F5DD00000000",
		"wechat modes":              w[0].Mode() == "public_key" && w[1].Mode() == "certificate",
		"wechat default base":       w[1].BaseURL == DefaultWechatPayBaseURL,
	}
	for name, ok := range checks {
		if !ok {
			t.Errorf("%s: %+v", name, c.Accounts)
		}
	}
	red := c.Redacted()
	for _, want := range []string{`alipay:2021000000000002(certificate,qps=10,https://openapi-sandbox.dl.alipaydev.com/gateway.do)`,
		`wechatpay:1900000002(certificate,`, `wechatpay:1900000001(public_key,qps=25.5,`} {
		if !strings.Contains(red, want) {
			t.Errorf("redacted configuration lacks %s: %s", want, red)
		}
	}
	if strings.Contains(red, dir) {
		t.Errorf("redacted configuration lists key paths: %s", red)
	}

	// The single-account settings add one account each, beside the file's.
	c, err = loadWith(goodAccounts, "RECONCILER_WECHATPAY_MCHID", "1900000003", "RECONCILER_WECHATPAY_SERIAL_NO", "AB",
		"RECONCILER_WECHATPAY_PRIVATE_KEY_FILE", filepath.Join(dir, "mch1.pem"), "RECONCILER_WECHATPAY_APIV3_KEY_FILE", filepath.Join(dir, "v3.key"))
	if err != nil || len(c.Accounts.WechatPay) != 3 || c.Accounts.WechatPay[2].MchID != "1900000003" {
		t.Fatalf("file plus single settings: %v %+v", err, c.Accounts.WechatPay)
	}
}

func TestAccountsFileErrorsNameFileAccountAndField(t *testing.T) {
	dir, loadWith := accountsFixture(t)
	path := filepath.Join(dir, "accounts.yaml")
	replace := fixtureEdit(t, goodAccounts)
	cases := []struct {
		name string
		doc  string
		env  []string
		want []string
	}{
		{"does not parse", "alipay:\n  - app_id: [unclosed\n", nil, []string{path, "does not parse as YAML", "line"}},
		{"unknown field", replace("    qps: 50\n", "    qps: 50\n    app_key: oops\n"), nil,
			[]string{path, `alipay account "2021000000000001"`, "unknown field app_key"}},
		{"unknown top-level field", goodAccounts + "paypal: []\n", nil, []string{path, "unknown field paypal"}},
		{"wrong type", replace("qps: 25.5", "qps: fast"), nil, []string{path, `wechatpay account "1900000001"`, "fast"}},
		{"missing key file", replace("{{dir}}/mch2.pem", "{{dir}}/nope.pem"), nil,
			[]string{path, `wechatpay account "1900000002"`, "private_key_file", "nope.pem"}},
		{"missing certificate", replace("{{dir}}/root.crt", "{{dir}}/gone.crt"), nil,
			[]string{path, `alipay account "2021000000000002"`, "alipay_root_cert_file"}},
		{"both modes", replace("    seller_id:", "    public_key_file: {{dir}}/alipay1.pem\n    seller_id:"), nil,
			[]string{path, `alipay account "2021000000000002"`, "public_key_file", "not both"}},
		{"short api v3 key", replace("{{dir}}/v3.key", "{{dir}}/short.key"), nil,
			[]string{path, `wechatpay account "1900000001"`, "apiv3_key_file", "32-byte"}},
		{"public key without id", replace("    public_key_id: PUB_KEY_ID_0119000000000000000000000000\n", ""), nil,
			[]string{path, `wechatpay account "1900000001"`, "public_key_id"}},
		{"duplicate id", replace(`"2021000000000002"`, `"2021000000000001"`), nil,
			[]string{path, `alipay account "2021000000000001"`, "app_id", "configured twice"}},
		{"duplicate with single setting", goodAccounts, []string{"RECONCILER_ALIPAY_APP_ID", "2021000000000001",
			"RECONCILER_ALIPAY_PRIVATE_KEY_FILE", filepath.Join(dir, "app1.pem"), "RECONCILER_ALIPAY_PUBLIC_KEY_FILE", filepath.Join(dir, "alipay1.pem")},
			[]string{"RECONCILER_ALIPAY_APP_ID", "configured twice"}},
		{"plain http", replace("https://openapi-sandbox", "http://openapi-sandbox"), nil,
			[]string{path, `alipay account "2021000000000002"`, "gateway", "https://", "RECONCILER_ALLOW_INSECURE_PLATFORM"}},
		{"no account", "alipay: []\n", nil, []string{path, "lists no account"}},
		{"bad serial", replace("serial_no: ABCDEF", "serial_no: XYZ"), nil, []string{`wechatpay account "1900000002"`, "serial_no"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadWith(tc.doc, tc.env...)
			wantConfigError(t, err, tc.want...)
		})
	}
	t.Run("plain http allowed when asked", func(t *testing.T) {
		if _, err := loadWith(replace("https://openapi-sandbox", "http://openapi-sandbox"), "RECONCILER_ALLOW_INSECURE_PLATFORM", "true"); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("unreadable file", func(t *testing.T) {
		_, err := load(GroupAll, nil, map[string]string{"RECONCILER_DATABASE_URL": "postgres://u@h/db", "RECONCILER_ACCOUNTS_FILE": filepath.Join(dir, "missing.yaml")})
		if err == nil || !strings.Contains(err.Error(), "RECONCILER_ACCOUNTS_FILE") || !strings.Contains(err.Error(), "missing.yaml") {
			t.Fatalf("missing accounts file: %v", err)
		}
	})
}

// TestVerifyOnlyAccountsNeedNoPrivateKey: a command that only verifies callbacks loads
// accounts without their private keys (and WeChat Pay ones without the merchant serial),
// but a WeChat Pay account in certificate mode still needs its private key: downloading
// the certificates is a signed request. Without VerifyOnly the keys stay required.
func TestVerifyOnlyAccountsNeedNoPrivateKey(t *testing.T) {
	dir := t.TempDir()
	pub := filepath.Join(dir, "pub.pem")
	v3 := filepath.Join(dir, "v3.key")
	os.WriteFile(pub, []byte("test-only placeholder"), 0o600)           //nolint:errcheck
	os.WriteFile(v3, []byte("0123456789abcdef0123456789abcdef"), 0o600) //nolint:errcheck
	alipayEnv := map[string]string{"RECONCILER_DATABASE_URL": "postgres://u@h/db",
		"RECONCILER_ALIPAY_APP_ID": "2021", "RECONCILER_ALIPAY_PUBLIC_KEY_FILE": pub}
	wechatEnv := map[string]string{"RECONCILER_DATABASE_URL": "postgres://u@h/db",
		"RECONCILER_WECHATPAY_MCHID": "1900", "RECONCILER_WECHATPAY_APIV3_KEY_FILE": v3,
		"RECONCILER_WECHATPAY_PUBLIC_KEY_FILE": pub, "RECONCILER_WECHATPAY_PUBLIC_KEY_ID": "PUB_KEY_ID_1"}
	// The accounts file every pod shares names the private key; a callback pod does not mount it.
	accounts := filepath.Join(dir, "accounts.yaml")
	os.WriteFile(accounts, []byte("alipay:\n  - app_id: \"2021\"\n    private_key_file: "+filepath.Join(dir, "absent.pem")+ //nolint:errcheck
		"\n    public_key_file: "+pub+"\n"), 0o600)
	unmountedKey := map[string]string{"RECONCILER_DATABASE_URL": "postgres://u@h/db", "RECONCILER_ACCOUNTS_FILE": accounts}
	certMode := map[string]string{"RECONCILER_DATABASE_URL": "postgres://u@h/db",
		"RECONCILER_WECHATPAY_MCHID": "1900", "RECONCILER_WECHATPAY_APIV3_KEY_FILE": v3}
	cases := []struct {
		name       string
		env        map[string]string
		verifyOnly bool
		wantErr    string
	}{
		{"alipay, verifying", alipayEnv, true, ""},
		{"alipay file, verifying, private key named but not mounted", unmountedKey, true, ""},
		{"alipay file, signing, private key not mounted", unmountedKey, false, `alipay account "2021": private_key_file: cannot read key file`},
		{"alipay, signing", alipayEnv, false, "RECONCILER_ALIPAY_PRIVATE_KEY_FILE: is required"},
		{"wechat public key, verifying", wechatEnv, true, ""},
		{"wechat public key, signing", wechatEnv, false, "RECONCILER_WECHATPAY_SERIAL_NO: is required"},
		{"wechat certificates, verifying", certMode, true, "RECONCILER_WECHATPAY_PRIVATE_KEY_FILE: is required to download"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			l := Register(fs, GroupAll, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			l.VerifyOnly(func() bool { return tc.verifyOnly })
			if err := fs.Parse(nil); err != nil {
				t.Fatal(err)
			}
			c, err := l.Load()
			if tc.wantErr == "" {
				if err != nil || c.Accounts.Len() != 1 {
					t.Fatalf("got %v with %d accounts", err, c.Accounts.Len())
				}
				for _, a := range c.Accounts.Alipay {
					if a.PrivateKeyFile != "" {
						t.Errorf("a verify-only Alipay account keeps private_key_file %q: serve would read the key", a.PrivateKeyFile)
					}
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("got %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// fixtureEdit returns an edit of doc: old, which doc must hold, replaced once by new. Each bad
// file in a table is the good fixture with one thing wrong.
func fixtureEdit(t *testing.T, doc string) func(old, new string) string {
	return func(old, new string) string {
		t.Helper()
		if !strings.Contains(doc, old) {
			t.Fatalf("fixture lacks %q", old)
		}
		return strings.Replace(doc, old, new, 1)
	}
}

// wantConfigError holds err to a configuration error (exit 2) that says each of want.
func wantConfigError(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatal("accepted")
	}
	if !IsConfigError(err) {
		t.Fatalf("not a configuration error (exit 2): %T %v", err, err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
}
