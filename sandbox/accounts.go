package sandbox

import (
	"fmt"
	"os"
	"path/filepath"

	"go.yaml.in/yaml/v3"

	"github.com/payrecon/payrecon/reconcile"
)

// Accounts are the extra merchant accounts a Sandbox plays, beside each platform's default
// account (the one Keys and Identity describe).
type Accounts struct {
	Alipay    []AlipayAccount
	WechatPay []WechatAccount
}

// Second accounts the standalone sandbox and the demo play, in the other credential mode.
const (
	SecondAlipayAppID    = "2021000122600002"
	SecondAlipaySellerID = "2088621000000002"
	SecondWechatMchID    = "1900000002"
	SecondWechatAppID    = "wxd678efh567hg6788"
)

// SecondAccounts makes one more account per platform in the credential mode the default
// accounts do not use: an Alipay app in certificate mode and a WeChat Pay merchant on
// platform certificates. bits 0 means 2048.
func SecondAccounts(bits int) (Accounts, error) {
	ali, err := GenerateAlipayAccount(SecondAlipayAppID, SecondAlipaySellerID, true, bits)
	if err != nil {
		return Accounts{}, err
	}
	wx, err := GenerateWechatAccount(SecondWechatMchID, SecondWechatAppID, WechatModeCertificate, bits)
	if err != nil {
		return Accounts{}, err
	}
	return Accounts{Alipay: []AlipayAccount{ali}, WechatPay: []WechatAccount{wx}}, nil
}

// The service providers the sandbox plays beside the merchants' own accounts: an Alipay
// third-party app and a WeChat Pay service provider (sp_mchid), each calling for two
// sub-merchants.
const (
	ProviderAlipayAppID = "2021000122609009"
	ProviderWechatMchID = "1900009109"
)

// ProviderSubMerchants are the providers' sub-merchants: the Alipay app's auth_app_ids and
// the WeChat Pay provider's sub_mchids.
var ProviderSubMerchants = map[reconcile.Platform][]string{
	reconcile.Alipay:    {"2021000122609101", "2021000122609102"},
	reconcile.WechatPay: {"1900009201", "1900009202"},
}

// ProviderAccounts generates the two service providers with their sub-merchants (bits as
// for GenerateKeys).
func ProviderAccounts(bits int) (Accounts, error) {
	isv, err := GenerateAlipayAccount(ProviderAlipayAppID, "2088621000009009", false, bits)
	if err != nil {
		return Accounts{}, err
	}
	isv.SubMerchants = append([]string(nil), ProviderSubMerchants[reconcile.Alipay]...)
	sp, err := GenerateWechatAccount(ProviderWechatMchID, "wx9999999999999991", WechatModePublicKey, bits)
	if err != nil {
		return Accounts{}, err
	}
	sp.SubMerchants = append([]string(nil), ProviderSubMerchants[reconcile.WechatPay]...)
	return Accounts{Alipay: []AlipayAccount{isv}, WechatPay: []WechatAccount{sp}}, nil
}

// Join is a and b's accounts together.
func (a Accounts) Join(b Accounts) Accounts {
	return Accounts{Alipay: append(append([]AlipayAccount(nil), a.Alipay...), b.Alipay...),
		WechatPay: append(append([]WechatAccount(nil), a.WechatPay...), b.WechatPay...)}
}

// AccountsFileName is the accounts file WriteAccountsFile writes.
const AccountsFileName = "accounts.yaml"

// WriteAccountsFile writes every account's key and certificate files into dir and an
// accounts file (RECONCILER_ACCOUNTS_FILE) listing them all, each account with the given
// qps. It returns the accounts file's path.
func (s *Sandbox) WriteAccountsFile(dir, baseURL string, qps float64) (string, error) {
	ali, err := s.WriteAlipayAccountFiles(dir, baseURL)
	if err != nil {
		return "", err
	}
	wx, err := s.WriteWechatAccountFiles(dir, baseURL)
	if err != nil {
		return "", err
	}
	for _, e := range append(append([]map[string]any{}, ali...), wx...) {
		e["qps"] = qps
	}
	doc, err := yaml.Marshal(map[string]any{"alipay": ali, "wechatpay": wx})
	if err != nil {
		return "", fmt.Errorf("sandbox accounts file: %w", err)
	}
	head := []byte("# Written by the payrecon sandbox: every account it plays, for RECONCILER_ACCOUNTS_FILE.\n")
	path := filepath.Join(dir, AccountsFileName)
	if err := writeFileMode(path, append(head, doc...), 0o644); err != nil {
		return "", err
	}
	return path, nil
}

// AccountsEnv lists the RECONCILER_* settings that point a reconciler at this sandbox's
// accounts through the accounts file.
func AccountsEnv(accountsFile string) []string {
	return []string{
		// The sandbox speaks plain http on loopback; production URLs must be https.
		"RECONCILER_ALLOW_INSECURE_PLATFORM=true",
		"RECONCILER_ACCOUNTS_FILE=" + accountsFile,
	}
}

// accountFile is one file of an accounts-file entry: the field naming it and its content.
type accountFile struct {
	field, path string
	data        []byte
	mode        os.FileMode
}

// writeAccountFiles writes an account's files and names each in its accounts-file entry.
func writeAccountFiles(entry map[string]any, files []accountFile) error {
	for _, f := range files {
		if err := writeFileMode(f.path, f.data, f.mode); err != nil {
			return err
		}
		entry[f.field] = f.path
	}
	return nil
}

// writeFileMode writes data with exactly mode, whatever the umask or an older file said.
func writeFileMode(path string, data []byte, mode os.FileMode) error {
	if err := os.WriteFile(path, data, mode); err != nil {
		return fmt.Errorf("write %s: %w", filepath.Base(path), err)
	}
	if err := os.Chmod(path, mode); err != nil {
		return fmt.Errorf("chmod %s: %w", filepath.Base(path), err)
	}
	return nil
}
