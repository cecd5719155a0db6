package statement

import (
	"bufio"
	"fmt"
	"os"

	"github.com/payrecon/payrecon/reconcile"
)

// Open reads a bill file of the platform's: for Alipay the zip or its bare detail CSV (told
// apart by the zip's magic bytes), for WeChat Pay the CSV, plain or gzip. Options as for the
// readers (WithSHA1 for a WeChat Pay download).
func Open(platform reconcile.Platform, file string, opts ...Option) (ReadCloser, error) {
	switch platform {
	case reconcile.Alipay, reconcile.WechatPay:
	default:
		return nil, fmt.Errorf("statement: no bill format for platform %q", platform)
	}
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("open bill: %w", err)
	}
	o := buildOptions(file, opts)
	if platform == reconcile.WechatPay {
		w := &wechatReader{opt: o, src: f, closer: f}
		return w, nil
	}
	br := bufio.NewReader(f)
	if magic, _ := br.Peek(4); string(magic) == "PK\x03\x04" {
		f.Close()
		return OpenAlipayZip(file, opts...)
	}
	return newAlipayReaderAhead(br, f, o), nil
}
