package statement

import (
	"encoding/hex"
	"strings"
)

// Option adjusts how a bill is read.
type Option func(*options)

type options struct {
	name    string // what rejections call the file
	sha1Hex string // the WeChat Pay digest the unzipped bytes must have; "" checks nothing
}

// WithSHA1 makes a WeChat Pay reader reject the bill unless the SHA1 of its (unzipped)
// bytes is hexDigest, the download answer's hash_value. Case does not matter.
func WithSHA1(hexDigest string) Option {
	return func(o *options) { o.sha1Hex = strings.ToLower(strings.TrimSpace(hexDigest)) }
}

func buildOptions(def string, opts []Option) options {
	o := options{name: def}
	for _, f := range opts {
		f(&o)
	}
	return o
}

func validHex(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == 20
}
