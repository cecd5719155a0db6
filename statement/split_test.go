package statement

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"golang.org/x/text/transform"
)

func TestSplitBackticks(t *testing.T) {
	for _, c := range []struct {
		name string
		row  string
		want []string
		ok   bool
	}{
		{"plain", "`a,`b,`c", []string{"a", "b", "c"}, true},
		{"an empty last field", "`a,`b,`", []string{"a", "b", ""}, true},
		{"commas and quotes are text", "`咖啡豆,500g,`27\" 显示器,`x", []string{"咖啡豆,500g", "27\" 显示器", "x"}, true},
		{"JSON", "`1,`{\"a\":\"1\",\"b\":[\"x\",\"y\"]},`2", []string{"1", `{"a":"1","b":["x","y"]}`, "2"}, true},
		{"full-width punctuation", "`全角，标点（测试）,`0.01", []string{"全角，标点（测试）", "0.01"}, true},
		{"a backtick inside a field", "`a`b,`c", []string{"a`b", "c"}, true},
		{"no leading backtick", "a,`b", nil, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ok := splitBackticks(nil, c.row)
			if ok != c.ok || !slices.Equal(got, c.want) {
				t.Fatalf("split %q = %q, %v; want %q, %v", c.row, got, ok, c.want, c.ok)
			}
		})
	}
}

// TestQuoteTabs: the tab Alipay writes after a quoted field goes; every other tab stays,
// however the input is cut into blocks.
func TestQuoteTabs(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"\"a,b\"\t,c\t,d\n", "\"a,b\",c\t,d\n"},
		{"\"a,b\"\t\t\r\n", "\"a,b\"\r\n"},
		{"\"a,b\"\t", "\"a,b\""},
		{"\"a\tb\",c", "\"a\tb\",c"},
		{"\"a\"\tb,c", "\"a\"\tb,c"}, // not before a separator: text
		{"x\"\"\t,y", "x\"\",y"},
		{"no quotes\t,at all\t\n", "no quotes\t,at all\t\n"},
	} {
		for _, oneByte := range []bool{false, true} {
			var src io.Reader = strings.NewReader(c.in)
			if oneByte {
				src = iotest.OneByteReader(src)
			}
			got, err := io.ReadAll(transform.NewReader(src, quoteTabs{}))
			if err != nil || string(got) != c.want {
				t.Errorf("%q (one byte at a time: %v) became %q, %v; want %q", c.in, oneByte, got, err, c.want)
			}
		}
	}
}

// TestRejectNamesLineAndColumn: a value that cannot be read rejects the bill naming its line
// and its column, as "line N, column NAME: ...".
func TestRejectNamesLineAndColumn(t *testing.T) {
	wx, ali := golden(t, "wechatpay_all_20261128.csv"), golden(t, "alipay_detail_20261128.gbk.csv")
	aliText, err := simplifiedChineseDecode(ali)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		r    Reader
		want string
	}{
		{"wechatpay amount", NewWeChatCSV(bytes.NewReader(bytes.Replace(wx, []byte("`59.90,`5.00"), []byte("`59.9x,`5.00"), 1))),
			"line 3, column 应结订单金额: invalid yuan amount"},
		{"wechatpay fee after text holding ,`", NewWeChatCSV(bytes.NewReader(bytes.Replace(wx, []byte("`0.00006,"), []byte("`0.000061,"), 1))),
			"line 6, column 手续费: invalid yuan amount"},
		{"wechatpay trade state", NewWeChatCSV(bytes.NewReader(bytes.Replace(wx, []byte("`REFUND,"), []byte("`REVOKED,"), 1))),
			`line 4, column 交易状态: "REVOKED"`},
		{"alipay amount", NewAlipayCSV(bytes.NewReader(gbk(t, strings.Replace(aliText, "-28.00,-28.00", "-28.0.0,-28.00", 1)))),
			"line 8, column 订单金额（元）: invalid yuan amount"},
		{"alipay time after a two-line row", NewAlipayCSV(bytes.NewReader(gbk(t, strings.Replace(aliText, "2026-11-28 21:30:45", "2026-11-28 21:30", 1)))),
			"line 11, column 完成时间: time"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := readAll(c.r)
			var re *RejectError
			if !asReject(err, &re) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want a rejection with %q", err, c.want)
			}
		})
	}
}

// TestRowsThatDoNotLineUp: a row whose fields do not line up with the header is refused on
// its line, never read with its columns moved; only WeChat Pay text that held ",`" is read,
// from both ends.
func TestRowsThatDoNotLineUp(t *testing.T) {
	noText := strings.NewReplacer("商品名称", "商品", "商户数据包", "数据包").Replace(wechatSample)
	row6 := "2019091622001458860515315453\t,service_1568601259302\t,交易\t,下单测试,"
	for _, c := range []struct {
		name string
		r    Reader
		why  string
	}{
		{"wechatpay row cut short", NewWeChatCSV(strings.NewReader(strings.Replace(wechatSample, "`0.90%,`0.01,`0.00,`\n", "`0.90%\n", 1))),
			"line 2: 24 fields, the header names 27"},
		{"wechatpay ,` where the header names no merchant text", NewWeChatCSV(strings.NewReader(strings.Replace(noText, "`微信云托管支付测试,", "`微信,`云托管,", 1))),
			"line 2: 28 fields, the header names 27"},
		{"wechatpay detail row without its backtick", NewWeChatCSV(strings.NewReader(strings.Replace(wechatSample, "\n`2022-03-21 14:00:00", "\n2022-03-21 14:00:00", 1))),
			"line 3: a detail row must start with a backtick"},
		{"alipay comma outside quotes", NewAlipayCSV(bytes.NewReader(gbk(t, strings.Replace(alipaySample, row6, strings.Replace(row6, "下单测试", "下单,测试", 1), 1)))),
			"line 6: 26 fields, the header names 25: a comma outside quotes?"},
		{"alipay quote that never closes", NewAlipayCSV(bytes.NewReader(gbk(t, strings.Replace(alipaySample, row6, strings.Replace(row6, "下单测试", `"下单测试`, 1), 1)))),
			"line 6: 4 fields, the header names 25: a quote that does not close"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := readAll(c.r)
			var re *RejectError
			if !asReject(err, &re) || !strings.Contains(err.Error(), c.why) {
				t.Fatalf("got %v, want a rejection with %q", err, c.why)
			}
		})
	}
	// A trailing comma (blank fields past the header's) is not a moved column.
	trailing := strings.Replace(alipaySample, ",下单测试\n#---", ",下单测试,\t\n#---", 1)
	if _, err := readAll(NewAlipayCSV(bytes.NewReader(gbk(t, trailing)))); err != nil {
		t.Fatalf("a trailing comma: %v", err)
	}
}

// TestAlipayOpenQuoteStaysBounded: a quote that never closes in a large bill ends the read
// once the record outgrows any row, instead of reading the rest of the bill into one field.
func TestAlipayOpenQuoteStaysBounded(t *testing.T) {
	rows := strings.SplitAfter(alipaySample, "\n")
	open := strings.Replace(rows[5], ",下单测试,", `,"下单测试,`, 1)
	text := strings.Join(rows[:5], "") + open + strings.Repeat(rows[5], 2000) + strings.Join(rows[7:], "")
	_, err := readAll(NewAlipayCSV(bytes.NewReader(gbk(t, text))))
	var re *RejectError
	if !asReject(err, &re) || !strings.Contains(err.Error(), "a row after line 5 is longer than 65536 bytes: a quote that does not close?") {
		t.Fatalf("got %v, want the open quote named", err)
	}
}

// TestFastGBK: the decoder with the ASCII shortcut gives what x/text's GBK decoder gives,
// byte for byte, for bills, broken bytes and every way of cutting the input into blocks.
func TestFastGBK(t *testing.T) {
	bill := alipayCSVBytes(t, AlipayFile{UserID: "20880211096256330156", Day: testDay}, sampleSlice(40, 4))
	inputs := [][]byte{
		bill,
		gbk(t, "交易,下单测试\t,全角，标点（测试）,a€b"),
		{0x81},                   // a lead byte at the very end
		{'a', 0x81, '0', 'b'},    // a lead byte before a byte that cannot trail it
		{0x81, 0x7f, 0xff, 0x80}, // DEL after a lead, 0xFF, the euro sign
		{0xb0, 0x41, 'x', 0xb0},  // a trail byte that looks like ASCII, then a cut lead
		{0xfe, 0xfe, 0x81, 0x40, 0x20},
	}
	for _, in := range inputs {
		want, err := simplifiedChineseDecode(in)
		if err != nil {
			t.Fatal(err)
		}
		for _, oneByte := range []bool{false, true} {
			var src io.Reader = bytes.NewReader(in)
			if oneByte {
				src = iotest.OneByteReader(src)
			}
			got, err := io.ReadAll(transform.NewReader(src, newFastGBK()))
			if err != nil || string(got) != want {
				t.Fatalf("decoding % x (one byte at a time: %v): %q, %v; want %q", in[:min(len(in), 32)], oneByte, got, err, want)
			}
		}
	}
}
