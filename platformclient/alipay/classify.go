package alipay

import (
	"fmt"
	"strings"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/reconcile"
)

// Business codes and sub-codes payrecon branches on.
const (
	codeSuccess        = "10000"
	codeUnavailable    = "20000"
	codeAuthToken      = "20001"
	codeMissingParam   = "40001"
	codeInvalidParam   = "40002"
	codeBusinessFailed = "40004"
	codeCallLimited    = "40005"
	codeNoPermission   = "40006"

	subTradeNotExist    = "ACQ.TRADE_NOT_EXIST"
	subSystemError      = "ACQ.SYSTEM_ERROR"
	subTradeStatusError = "ACQ.TRADE_STATUS_ERROR"
	subInvalidSignature = "isv.invalid-signature"
	subInvalidAppID     = "isv.invalid-app-id"
)

// normSubCode drops the routing prefixes ("aop.", "isp.") some gateways put before ACQ codes.
func normSubCode(s string) string {
	if i := strings.Index(s, "ACQ."); i > 0 {
		return s[i:]
	}
	return s
}

// classify turns a failure node (code != 10000) into the error the reconciler acts on.
// Not-found and already-paid are decided by the callers, who know which call they made.
func classify(n commonNode) *reconcile.PlatformError {
	code, sub := string(n.Code), normSubCode(n.SubCode)
	label := code
	if n.SubCode != "" {
		label += "/" + n.SubCode
	}
	msg := strings.TrimSpace(n.Msg + " " + n.SubMsg)
	mk := func(kind reconcile.PlatformErrorKind, m string) *reconcile.PlatformError {
		return platformclient.NewError(reconcile.Alipay, kind, label, m, nil)
	}
	switch code {
	case codeUnavailable:
		return mk(reconcile.KindRetryable, msg)
	case codeCallLimited:
		return mk(reconcile.KindRateLimited, msg)
	case codeAuthToken:
		return mk(reconcile.KindConfig, fmt.Sprintf("%s (authorisation token refused: check %s and the app's authorisation)", msg, SettingAppID))
	case codeMissingParam:
		return mk(reconcile.KindConfig, fmt.Sprintf("%s (a required parameter is missing: check %s and %s)", msg, SettingAppID, SettingGateway))
	case codeInvalidParam:
		switch {
		case sub == subInvalidAppID:
			return mk(reconcile.KindConfig, fmt.Sprintf("%s (check %s)", msg, SettingAppID))
		case strings.Contains(sub, "cert-sn") || strings.Contains(sub, "cert_sn"):
			// The gateway refused our app_cert_sn or alipay_root_cert_sn: the certificate
			// files do not belong to this app, or the app is not in certificate mode.
			return mk(reconcile.KindConfig, fmt.Sprintf("%s (Alipay refused the certificate SNs: check %s and %s belong to %s, and that the app uses certificate mode)", msg, SettingAppCert, SettingRootCert, SettingAppID))
		case sub == subInvalidSignature || strings.HasPrefix(sub, "isv.invalid-signature"):
			return mk(reconcile.KindConfig, fmt.Sprintf("%s (Alipay rejected our signature: check %s matches the app public key uploaded to Alipay for %s)", msg, SettingPrivateKey, SettingAppID))
		}
		return mk(reconcile.KindConfig, fmt.Sprintf("%s (invalid argument: check %s and %s)", msg, SettingAppID, SettingPrivateKey))
	case codeNoPermission:
		return mk(reconcile.KindConfig, fmt.Sprintf("%s (the app lacks permission for this API: check %s and its products in Alipay's console)", msg, SettingAppID))
	case codeBusinessFailed:
		if sub == subSystemError {
			return mk(reconcile.KindRetryable, msg)
		}
		return mk(reconcile.KindPermanent, msg)
	}
	return mk(reconcile.KindPermanent, msg)
}
