package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// consoleGroups are `reconciler console`'s settings (cmd/reconciler/console.go): no
// platform setting, but the accounts file for its structure.
const consoleGroups = GroupDatabase | GroupLog | GroupTime | GroupAdmin | GroupConsole

// loadForConsole writes doc (with {{dir}} standing for dir) as an accounts file and loads
// the console's settings over it.
func loadForConsole(t *testing.T, dir, doc string) (Config, string, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "accounts.yaml")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(doc, "{{dir}}", dir)), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := load(consoleGroups, nil, map[string]string{"RECONCILER_DATABASE_URL": "postgres://u@h/db", "RECONCILER_ACCOUNTS_FILE": path})
	return c, path, err
}

// TestConsoleReadsTheAccountsStructureOnly: the console's pod mounts the accounts file but
// no key Secret, so a file whose every key, certificate, API v3 key and token path is absent
// loads for the console, whole, while the same file stops a worker; the console gets the
// structure and speaks for no account.
func TestConsoleReadsTheAccountsStructureOnly(t *testing.T) {
	absent := filepath.Join(t.TempDir(), "not-mounted")
	c, _, err := loadForConsole(t, absent, providerAccounts)
	if err != nil {
		t.Fatalf("the console refused an accounts file whose key files are not mounted: %v", err)
	}
	got := c.Console.Accounts
	if len(got.Alipay) != 2 || len(got.WechatPay) != 2 || got.SubMerchantCount() != 4 {
		t.Fatalf("console accounts %+v, want 2 + 2 accounts and 4 sub-merchants", got)
	}
	if got.WechatPay[1].ID() != "1900000109" || got.WechatPay[1].SubMerchants[1].SubMchID != "1900000202" ||
		got.Alipay[1].SubMerchants[0].AuthAppID != "2021000000000101" {
		t.Errorf("providers and sub-merchants not as written: %+v", got)
	}
	if c.Accounts.Len() != 0 {
		t.Errorf("the console speaks for %d accounts, want none", c.Accounts.Len())
	}
	// The paths really are absent: a worker given the same file stops on the first key.
	path := filepath.Join(t.TempDir(), "accounts.yaml")
	if err := os.WriteFile(path, []byte(strings.ReplaceAll(providerAccounts, "{{dir}}", absent)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := load(GroupAll, nil, map[string]string{"RECONCILER_DATABASE_URL": "postgres://u@h/db", "RECONCILER_ACCOUNTS_FILE": path}); err == nil ||
		!strings.Contains(err.Error(), "cannot read key file") {
		t.Errorf("a worker loaded the file without its key files: %v", err)
	}
	// Without the file the console runs as before, knowing no provider.
	c, err = load(consoleGroups, nil, map[string]string{"RECONCILER_DATABASE_URL": "postgres://u@h/db"})
	if err != nil || c.Console.Accounts.Len() != 0 {
		t.Errorf("without an accounts file: %v, %d accounts", err, c.Console.Accounts.Len())
	}
}

// TestConsoleAccountsFileErrors: a file the console cannot read as who is whose provider is
// exit 2 naming RECONCILER_ACCOUNTS_FILE, the file and what is wrong; a budget the workers
// would refuse is theirs to refuse.
func TestConsoleAccountsFileErrors(t *testing.T) {
	absent := filepath.Join(t.TempDir(), "not-mounted")
	replace := fixtureEdit(t, providerAccounts)
	cases := []struct {
		name string
		doc  string
		want []string // "" for a file the console accepts
	}{
		{"does not parse", "alipay: [", []string{"does not parse as YAML"}},
		{"lists no account", "alipay: []\n", []string{"lists no account"}},
		{"unknown field", replace("        sub_appid:", "        sub_app_id:"), []string{`wechatpay account "1900000109"`, "unknown field sub_app_id"}},
		{"a sub-merchant under two providers", replace(`"1900000202"`, `"1900000201"`), []string{"(1900000201).sub_mchid", "configured twice"}},
		{"a sub-merchant that is a direct account", replace(`"2021000000000102"`, `"2021000000000001"`), []string{"also configured as an account of its own"}},
		{"no auth_app_id", replace(`      - auth_app_id: "2021000000000102"`, `      - auth_app_id: ""`), []string{"sub_merchants[1].auth_app_id", "is required"}},
		{"a merchant with sub-merchants", replace(`  - sp_mchid: "1900000109"`, `  - mchid: "1900000109"`), []string{"only a service provider"}},
		{"no app_id", replace(`  - app_id: "2021000000000009"`, `  - app_id: ""`), []string{"app_id: is required"}},
		{"a budget above the provider's", replace("        qps: 20\n      - sub_mchid", "        qps: 150\n      - sub_mchid"), nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, path, err := loadForConsole(t, absent, tc.doc)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("the console refused it: %v", err)
				}
				return
			}
			wantConfigError(t, err, append([]string{"RECONCILER_ACCOUNTS_FILE", path}, tc.want...)...)
		})
	}
	t.Run("missing file", func(t *testing.T) {
		_, err := load(consoleGroups, nil, map[string]string{"RECONCILER_DATABASE_URL": "postgres://u@h/db", "RECONCILER_ACCOUNTS_FILE": filepath.Join(absent, "accounts.yaml")})
		if err == nil || !IsConfigError(err) || !strings.Contains(err.Error(), "RECONCILER_ACCOUNTS_FILE") || !strings.Contains(err.Error(), "cannot read") {
			t.Fatalf("got %v", err)
		}
	})
}
