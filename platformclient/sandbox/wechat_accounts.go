package sandbox

// WechatAccount is one WeChat Pay merchant (mchid) the sandbox plays.
type WechatAccount struct {
	MchID string
	AppID string
}
