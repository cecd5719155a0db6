package sandbox

// Accounts are the extra merchant accounts a Sandbox plays, beside each platform's default
// account (the one Keys and Identity describe).
type Accounts struct {
	Alipay    []AlipayAccount
	WechatPay []WechatAccount
}
