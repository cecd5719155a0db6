package statement

import (
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/payrecon/payrecon/reconcile"
)

// wechatSample is the published layout (docs/protocols.md): a payment (line 2), its refund (line 3),
// the summary header and row (lines 4 and 5).
const wechatSample = wxHeader + "\n" +
	"`2022-03-21 13:51:31,`wxfdc955f7104ad557,`180023671,`176531292,`,`420000612032130748613220688,`2021WERUN1647840687637,`oZWaCKXip5njeEiloC4oeOV1TTsk,`JSAPI,`SUCCESS,`OTHERS,`CNY,`0.01,`0.00,`0,`0,`0.00,`0.00,`,`,`微信云托管支付测试,`,`0.00009,`0.90%,`0.01,`0.00,`\n" +
	"`2022-03-21 14:00:00,`wxfdc955f7104ad557,`180023671,`176531292,`,`420000612032130748613220688,`2021WERUN1647840687637,`oZWaCKXip5njeEiloC4oeOV1TTsk,`JSAPI,`REFUND,`OTHERS,`CNY,`0.00,`0.00,`50300001,`RF1,`0.01,`0.00,`ORIGINAL,`SUCCESS,`微信云托管支付测试,`,`-0.00009,`0.90%,`0.00,`0.01,`\n" +
	wxSummaryHeader + "\n" +
	"`2,`0.01,`0.01,`0.00,`0.00000,`0.01,`0.01\n"

func gz(t testing.TB, b []byte) []byte {
	t.Helper()
	var out bytes.Buffer
	zw := gzip.NewWriter(&out)
	zw.Write(b)
	zw.Close()
	return out.Bytes()
}

func sha1Hex(b []byte) string { s := sha1.Sum(b); return hex.EncodeToString(s[:]) }

func TestWeChatCSVOddities(t *testing.T) {
	payAt := mustTime(t, "2022-03-21 13:51:31")
	refundAt := mustTime(t, "2022-03-21 14:00:00")
	old := strings.Replace(strings.Replace(wechatSample, "应结订单金额", "总金额", 1), "代金券金额", "企业红包金额", 1)
	for _, c := range []struct {
		name    string
		data    []byte
		mch     string
		pending bool // the refund is still PROCESSING
	}{
		{name: "as published", data: []byte(wechatSample), mch: "176531292"},
		{name: "gzip", data: gz(t, []byte(wechatSample)), mch: "176531292"},
		{name: "with a BOM", data: []byte("\ufeff" + wechatSample), mch: "176531292"},
		{name: "gzip with a BOM", data: gz(t, []byte("\ufeff"+wechatSample)), mch: "176531292"},
		{name: "CRLF line ends", data: []byte(strings.ReplaceAll(wechatSample, "\n", "\r\n")), mch: "176531292"},
		{name: "older header (总金额, 企业红包金额)", data: []byte(old), mch: "176531292"},
		{name: "ordinary merchant (特约商户号 0)", data: []byte(strings.ReplaceAll(wechatSample, "`176531292,", "`0,")), mch: "180023671"},
		{name: "refund still processing", data: []byte(strings.Replace(wechatSample, "`ORIGINAL,`SUCCESS,", "`ORIGINAL,`PROCESSING,", 1)), mch: "176531292", pending: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			plain := c.data
			if bytes.HasPrefix(plain, gzipMagic) {
				plain = []byte(wechatSample)
				if strings.Contains(c.name, "BOM") {
					plain = []byte("\ufeff" + wechatSample)
				}
			}
			r := NewWeChatCSV(bytes.NewReader(c.data), WithSHA1(strings.ToUpper(sha1Hex(plain))))
			got, err := readAll(r)
			if err != nil {
				t.Fatal(err)
			}
			want := []Line{
				{Kind: reconcile.BillPayment, OutTradeNo: "2021WERUN1647840687637", PlatformTradeNo: "420000612032130748613220688", Currency: "CNY", AmountMinor: 1, ReceivedMinor: 1, FeeMilliFen: 9, At: payAt},
				{Kind: reconcile.BillRefund, OutTradeNo: "2021WERUN1647840687637", PlatformTradeNo: "420000612032130748613220688", RefundNo: "RF1", PlatformRefundNo: "50300001", RefundStatus: "SUCCESS", Currency: "CNY", AmountMinor: 1, ReceivedMinor: 1, FeeMilliFen: -9, At: refundAt},
			}
			if c.pending {
				want[1].Pending, want[1].RefundStatus = true, "PROCESSING"
			}
			sameLines(t, got, want, false)
			if got[0].No != 2 || got[1].No != 3 || got[0].MerchantID != c.mch {
				t.Fatalf("numbers %d, %d, merchant %q", got[0].No, got[1].No, got[0].MerchantID)
			}
			if tot := r.Totals(); tot != (Totals{Payments: 1, PaymentsMinor: 1, Refunds: 1, RefundsMinor: 1}) {
				t.Fatalf("totals %+v", tot)
			}
		})
	}
}

func TestWeChatCSVRejects(t *testing.T) {
	rep := func(old, new string) []byte { return []byte(strings.Replace(wechatSample, old, new, 1)) }
	full := gz(t, []byte(wechatSample))
	for _, c := range []struct {
		name string
		data []byte
		opts []Option
		line int
		why  string
	}{
		{"an amount that is not one", rep("`CNY,`0.01,", "`CNY,`0.0x,"), nil, 2, "应结订单金额"},
		{"a refund amount with three decimals", rep("`RF1,`0.01,", "`RF1,`0.011,"), nil, 3, "退款金额"},
		{"a negative settlement amount", rep("`CNY,`0.01,", "`CNY,`-0.01,"), nil, 2, "negative"},
		{"a fee with six decimals", rep("`0.00009,", "`0.000091,"), nil, 2, "手续费"},
		{"an unknown trade state", rep("`SUCCESS,`OTHERS", "`REVOKED,`OTHERS"), nil, 2, "REVOKED"},
		{"a time that is not one", rep("2022-03-21 13:51:31", "21/03/2022"), nil, 2, "交易时间"},
		{"no order number", rep("`2021WERUN1647840687637,`oZWa", "`,`oZWa"), nil, 2, "商户订单号"},
		{"a header without the order number", rep("商户订单号", "订单号"), nil, 1, "商户订单号"},
		{"cut before the summary", []byte(wechatSample[:strings.Index(wechatSample, wxSummaryHeader)]), nil, 0, "summary"},
		{"cut after the summary header", []byte(wechatSample[:strings.Index(wechatSample, "`2,")]), nil, 0, "summary"},
		{"summary count differs", rep("`2,`0.01", "`3,`0.01"), nil, 5, "总交易单数"},
		{"summary settlement differs", rep("`2,`0.01,", "`2,`0.02,"), nil, 5, "应结订单总金额"},
		{"summary refunds differ", rep("`0.01,`0.00,`0.00000", "`0.02,`0.00,`0.00000"), nil, 5, "退款总金额"},
		{"summary fee differs", rep("`0.00,`0.00000,", "`0.00,`0.00001,"), nil, 5, "手续费总金额"},
		{"text after the summary", []byte(wechatSample + "`1,`2\n"), nil, 6, "after the summary"},
		{"a SHA1 that differs", []byte(wechatSample), []Option{WithSHA1(strings.Repeat("0", 40))}, 0, "SHA1"},
		{"a SHA1 that is not one", []byte(wechatSample), []Option{WithSHA1("abc")}, 0, "SHA1"},
		{"a gzip cut short", full[:len(full)-9], nil, 0, "cut short"},
		{"a gzip without its trailer", full[:len(full)-4], nil, 0, "cut short"},
		{"a gzip cut in its header", full[:5], nil, 0, "gzip"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := readAll(NewWeChatCSV(bytes.NewReader(c.data), c.opts...))
			var re *RejectError
			if !asReject(err, &re) {
				t.Fatalf("want a rejection, got %v", err)
			}
			if c.line >= 0 && !strings.Contains(c.why, "cut short") && re.Line != c.line {
				t.Fatalf("rejected on line %d, want %d: %v", re.Line, c.line, err)
			}
			if !strings.Contains(re.Error(), c.why) {
				t.Fatalf("%q does not mention %q", re.Error(), c.why)
			}
		})
	}
}

func TestWeChatGeneratedRoundTrip(t *testing.T) {
	lines := sampleSlice(300, 6)
	lines[5].Pending, lines[5].RefundStatus = true, "PROCESSING" // a refund still processing
	for _, f := range []WeChatFile{
		{AppID: "wxfdc955f7104ad557", MchID: "180023671"},
		{AppID: "wxfdc955f7104ad557", MchID: "180023671", Gzip: true},
		{AppID: "wxfdc955f7104ad557", MchID: "180023671", Gzip: true, BOM: true, OldHeader: true},
		{AppID: "wxfdc955f7104ad557", MchID: "180023671", SubMchID: "176531292"},
	} {
		data, sum := wechatBytes(t, f, lines)
		if bytes.HasPrefix(data, gzipMagic) != f.Gzip {
			t.Fatalf("gzip %v, magic %x", f.Gzip, data[:2])
		}
		path := writeFile(t, "bill.csv", data)
		r, err := Open(reconcile.WechatPay, path, WithSHA1(sum))
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAll(r)
		r.Close()
		if err != nil {
			t.Fatalf("%+v: %v", f, err)
		}
		sameLines(t, got, lines, false)
		wantMch := f.MchID
		if f.SubMchID != "" {
			wantMch = f.SubMchID
		}
		if got[0].MerchantID != wantMch || !got[5].Pending || got[5].Kind != reconcile.BillRefund {
			t.Fatalf("%+v: line 0 merchant %q, line 5 %+v", f, got[0].MerchantID, got[5])
		}
	}
}

func TestWeChatGeneratedOddities(t *testing.T) {
	lines := sampleSlice(3, 3)
	plain, sum := wechatBytes(t, WeChatFile{AppID: "wx1", MchID: "1800", BOM: true}, lines)
	zipped, zsum := wechatBytes(t, WeChatFile{AppID: "wx1", MchID: "1800", BOM: true, Gzip: true}, lines)
	if sum != zsum || sum != sha1Hex(plain) {
		t.Fatalf("digest %s (gzip %s), want the plain bytes' %s", sum, zsum, sha1Hex(plain))
	}
	if !bytes.Equal(gunzip(t, zipped), plain) {
		t.Fatal("the gzip does not hold the plain bill")
	}
	text := string(plain)
	for _, want := range []string{"\ufeff" + wxHeader + "\n", "`JSAPI,`SUCCESS,", "`JSAPI,`REFUND,", "`0.00,`0.00,`50",
		"`re_T1,`0.02,", "`ORIGINAL,`SUCCESS,", "`-0.00012,", "`0.00012,", "\n" + wxSummaryHeader + "\n`3,`0.03,`0.02,`0.00,`0.00006,`0.03,`0.02\n", "`0,`,`",
		"`套餐A,含\"加料\",`{\"a\":\"1\",\"b\":\"2\"},", "`全角，标点（测试）,`{\"order\":\"T1\",\"note\":\"含,逗号\"},"} {
		if !strings.Contains(text, want) {
			t.Errorf("generated bill lacks %q:\n%s", want, text)
		}
	}
	old, _ := wechatBytes(t, WeChatFile{AppID: "wx1", MchID: "1800", OldHeader: true}, lines)
	if !strings.HasPrefix(string(old), wxHeaderOld+"\n") {
		t.Error("older header not written")
	}
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if _, err := out.ReadFrom(zr); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}
