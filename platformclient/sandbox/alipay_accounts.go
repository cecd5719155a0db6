package sandbox

// AlipayAccount is one Alipay app the sandbox plays.
type AlipayAccount struct {
	AppID    string
	SellerID string
}
