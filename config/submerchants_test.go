package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// providerAccounts is an Alipay third-party app and a WeChat Pay service provider, each
// with sub-merchants, beside a direct merchant on each platform.
const providerAccounts = `
alipay:
  - app_id: "2021000000000001"
    private_key_file: {{dir}}/app1.pem
    public_key_file: {{dir}}/alipay1.pem
  - app_id: "2021000000000009"
    private_key_file: {{dir}}/app1.pem
    public_key_file: {{dir}}/alipay1.pem
    qps: 200
    sub_merchants:
      - auth_app_id: "2021000000000101"
        app_auth_token_file: {{dir}}/t101.token
        qps: 20
      - auth_app_id: "2021000000000102"
        app_auth_token_file: {{dir}}/t102.token
wechatpay:
  - mchid: "1900000001"
    serial_no: 3775B6A45ACD588826D15E583A95F5DD00000000
    private_key_file: {{dir}}/mch1.pem
    apiv3_key_file: {{dir}}/v3.key
  - sp_mchid: "1900000109"
    serial_no: 3775B6A45ACD588826D15E583A95F5DD00000001
    private_key_file: {{dir}}/mch2.pem
    apiv3_key_file: {{dir}}/v3.key
    qps: 100
    sub_merchants:
      - sub_mchid: "1900000201"
        sub_appid: wx00000000000000a1
        qps: 20
      - sub_mchid: "1900000202"
`

func writeTokens(t *testing.T, dir string, names ...string) {
	t.Helper()
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), []byte("202611BB0000000000000000000000000000000\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

func TestServiceProviderAccounts(t *testing.T) {
	dir, loadWith := accountsFixture(t)
	writeTokens(t, dir, "t101.token", "t102.token")
	c, err := loadWith(providerAccounts)
	if err != nil {
		t.Fatal(err)
	}
	isv, sp := c.Accounts.Alipay[1], c.Accounts.WechatPay[1]
	if len(isv.SubMerchants) != 2 || isv.SubMerchants[0].AuthAppID != "2021000000000101" || isv.SubMerchants[0].QPS != 20 ||
		isv.SubMerchants[1].QPS != 0 {
		t.Errorf("alipay provider %+v", isv)
	}
	if sp.ID() != "1900000109" || sp.MchID != "" || len(sp.SubMerchants) != 2 || sp.SubMerchants[0].SubAppID != "wx00000000000000a1" {
		t.Errorf("wechatpay provider %+v", sp)
	}
	if n := c.Accounts.SubMerchantCount(); n != 4 {
		t.Errorf("%d sub-merchants, want 4", n)
	}
	red := c.Redacted()
	for _, want := range []string{"alipay:2021000000000009(public_key,qps=200,", ",sub_merchants=2)", "wechatpay:1900000109(certificate,qps=100,"} {
		if !strings.Contains(red, want) {
			t.Errorf("redacted configuration lacks %s: %s", want, red)
		}
	}
	if strings.Contains(red, "t101.token") || strings.Contains(red, "202611BB") {
		t.Errorf("redacted configuration names a token file or a token: %s", red)
	}
}

// TestServiceProviderAccountErrors: each mistake in a provider's sub-merchants is exit 2
// naming the file, the provider account, the sub-merchant and the field.
func TestServiceProviderAccountErrors(t *testing.T) {
	dir, loadWith := accountsFixture(t)
	writeTokens(t, dir, "t101.token", "t102.token")
	path := filepath.Join(dir, "accounts.yaml")
	replace := fixtureEdit(t, providerAccounts)
	isv, sp := `alipay account "2021000000000009"`, `wechatpay account "1900000109"`
	cases := []struct {
		name string
		doc  string
		want []string
	}{
		{"missing token file", replace("{{dir}}/t102.token", "{{dir}}/gone.token"),
			[]string{path, isv, `sub_merchants[1] (2021000000000102).app_auth_token_file`, "cannot read token file", "gone.token"}},
		{"no token file", replace("        app_auth_token_file: {{dir}}/t102.token\n", ""),
			[]string{path, isv, "sub_merchants[1] (2021000000000102).app_auth_token_file", "is required"}},
		{"no auth_app_id", replace(`      - auth_app_id: "2021000000000102"`, `      - auth_app_id: ""`),
			[]string{path, isv, "sub_merchants[1].auth_app_id", "is required"}},
		{"duplicate under one provider", replace(`"2021000000000102"`, `"2021000000000101"`),
			[]string{path, isv, "sub_merchants[1] (2021000000000101).auth_app_id", "configured twice", "already under 2021000000000009"}},
		{"a direct account too", replace(`"2021000000000102"`, `"2021000000000001"`),
			[]string{path, isv, "(2021000000000001).auth_app_id", "also configured as an account of its own"}},
		{"wechat duplicate", replace(`"1900000202"`, `"1900000201"`),
			[]string{path, sp, "sub_merchants[1] (1900000201).sub_mchid", "configured twice"}},
		{"wechat sub-merchant is a direct merchant", replace(`"1900000202"`, `"1900000001"`),
			[]string{path, sp, "(1900000001).sub_mchid", "also configured as an account of its own"}},
		{"qps above the provider's", replace("        qps: 20\n      - sub_mchid", "        qps: 150\n      - sub_mchid"),
			[]string{path, sp, "sub_merchants[0] (1900000201).qps", "150 is above its provider's qps 100"}},
		{"alipay qps above the provider's", replace("        qps: 20\n      - auth_app_id", "        qps: 201\n      - auth_app_id"),
			[]string{path, isv, "sub_merchants[0] (2021000000000101).qps", "above its provider's qps 200"}},
		{"negative qps", replace("        qps: 20\n      - sub_mchid", "        qps: -1\n      - sub_mchid"),
			[]string{path, sp, "qps", "positive"}},
		{"mchid and sp_mchid", replace(`  - sp_mchid: "1900000109"`, `  - sp_mchid: "1900000109"`+"\n    mchid: \"1900000108\""),
			[]string{path, sp, "sp_mchid", "not both"}},
		{"a merchant with sub-merchants", replace(`  - sp_mchid: "1900000109"`, `  - mchid: "1900000109"`),
			[]string{path, `wechatpay account "1900000109"`, "sub_merchants", "only a service provider", "sp_mchid"}},
		{"a provider without sub-merchants", strings.SplitAfter(providerAccounts, "    qps: 100\n")[0],
			[]string{path, sp, "sub_merchants", "lists the sub-merchants"}},
		{"unknown sub-merchant field", replace("        sub_appid:", "        sub_app_id:"),
			[]string{path, sp, "unknown field sub_app_id"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := loadWith(tc.doc)
			wantConfigError(t, err, tc.want...)
			if strings.Contains(err.Error(), "202611BB") {
				t.Errorf("error %q shows a token", err)
			}
		})
	}
}

// TestTenThousandSubMerchantsLoad: a provider with 10,000 sub-merchants per platform is an
// ordinary accounts file. It loads and is checked whole; the time is printed, not
// asserted (make bench has the figures): a loaded machine may take longer.
func TestTenThousandSubMerchantsLoad(t *testing.T) {
	dir, loadWith := accountsFixture(t)
	const n = 10000
	var b strings.Builder
	b.WriteString("alipay:\n  - app_id: \"2021000000000009\"\n    private_key_file: {{dir}}/app1.pem\n    public_key_file: {{dir}}/alipay1.pem\n    qps: 500\n    sub_merchants:\n")
	for i := range n {
		name := fmt.Sprintf("t%d.token", i)
		writeTokens(t, dir, name)
		fmt.Fprintf(&b, "      - auth_app_id: \"2021%012d\"\n        app_auth_token_file: {{dir}}/%s\n", 100000+i, name)
	}
	b.WriteString("wechatpay:\n  - sp_mchid: \"1900000109\"\n    serial_no: AB\n    private_key_file: {{dir}}/mch2.pem\n    apiv3_key_file: {{dir}}/v3.key\n    qps: 500\n    sub_merchants:\n")
	for i := range n {
		fmt.Fprintf(&b, "      - sub_mchid: \"19%08d\"\n", 10000000+i)
	}
	start := time.Now()
	c, err := loadWith(b.String())
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Accounts.SubMerchantCount(); got != 2*n {
		t.Fatalf("%d sub-merchants, want %d", got, 2*n)
	}
	t.Logf("loaded and checked %d sub-merchants in %v", 2*n, time.Since(start))
}
