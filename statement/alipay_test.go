package statement

import (
	"archive/zip"
	"bytes"
	"errors"

	"os"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/payrecon/payrecon/reconcile"
)

// alipaySample is the published layout (docs/protocols.md), a payment and its refund (lines 6 and 7).
const alipaySample = "#支付宝业务明细查询\n" +
	"#账号：[20880211096256330156]\n" +
	"#起始日期：[2019年09月16日 00:00:00]   终止日期：[2019年09月17日 00:00:00]\n" +
	"#-----------------------------------------业务明细列表----------------------------------------\n" +
	alipayDetailHeader + "\n" +
	"2019091622001458860515315453\t,service_1568601259302\t,交易\t,下单测试,2019-09-16 10:55:16,2019-09-16 10:55:23,\t,\t,\t,\t,\t,0.01,0.01,0.00,0.00,0.00,0.00,0.00,\t,0.00,0.00,\t,0.00,0.00,下单测试\n" +
	"2019091622001458860515315453\t,service_1568601259302\t,退款\t,下单测试,2019-09-16 10:55:16,2019-09-16 10:56:48,\t,\t,\t,\t,\t,-0.01,-0.01,0.00,0.00,0.00,0.00,0.00,\t,0.00,0.00,re_test_1568602607356\t,0.00,0.00,下单测试\n" +
	"#-----------------------------------------业务明细列表结束------------------------------------\n" +
	"#交易合计：1笔，商家实收共0.01元，商家优惠共0.00元\n" +
	"#退款合计：1笔，商家实收退款共-0.01元，商家优惠退款共0.00元\n" +
	"#导出时间：[2019年09月17日 05:46:49]\n"

func TestAlipayCSVOddities(t *testing.T) {
	payAt := mustTime(t, "2019-09-16 10:55:23")
	createdAt := mustTime(t, "2019-09-16 10:55:16")
	refundAt := mustTime(t, "2019-09-16 10:56:48")
	swapCols := func(s string) string { // 商户订单号 before 支付宝交易号, in the header and the rows
		var out []string
		for _, l := range strings.Split(s, "\n") {
			if f := strings.Split(l, ","); !strings.HasPrefix(l, "#") && len(f) > 2 {
				f[0], f[1] = f[1], f[0]
				l = strings.Join(f, ",")
			}
			out = append(out, l)
		}
		return strings.Join(out, "\n")
	}
	for _, c := range []struct {
		name     string
		text     string
		utf8     bool
		pay, ref int64 // amounts of the two lines
		recv     int64 // the payment's 商家实收
	}{
		{name: "as published, GBK", text: alipaySample, pay: 1, ref: 1, recv: 1},
		{name: "re-saved as UTF-8", text: alipaySample, utf8: true, pay: 1, ref: 1, recv: 1},
		{name: "UTF-8 with a BOM", text: "\ufeff" + alipaySample, utf8: true, pay: 1, ref: 1, recv: 1},
		{name: "CRLF line ends", text: strings.ReplaceAll(alipaySample, "\n", "\r\n"), pay: 1, ref: 1, recv: 1},
		{name: "older footer wording", text: strings.ReplaceAll(alipaySample, "商家实收共", "交易金额共"), pay: 1, ref: 1, recv: 1},
		{name: "half-width parentheses", text: strings.ReplaceAll(strings.ReplaceAll(alipaySample, "（", "("), "）", ")"), pay: 1, ref: 1, recv: 1},
		{name: "columns in another order", text: swapCols(alipaySample), pay: 1, ref: 1, recv: 1},
		{name: "merchant received less than the order (a red packet)",
			text: strings.Replace(strings.Replace(alipaySample, ",0.01,0.01,0.00,", ",1.00,0.90,0.10,", 1), "商家实收共0.01元", "商家实收共0.90元", 1),
			pay:  100, ref: 1, recv: 90},
		{name: "a quoted product name with a comma", text: strings.Replace(alipaySample, ",下单测试,2019-09-16 10:55:16,2019-09-16 10:55:23,", `,"下单,""测试""",2019-09-16 10:55:16,2019-09-16 10:55:23,`, 1), pay: 1, ref: 1, recv: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			data := []byte(c.text)
			if !c.utf8 {
				data = gbk(t, c.text)
			}
			r := NewAlipayCSV(bytes.NewReader(data))
			got, err := readAll(r)
			if err != nil {
				t.Fatal(err)
			}
			want := []Line{
				{No: 6, Kind: reconcile.BillPayment, OutTradeNo: "service_1568601259302", PlatformTradeNo: "2019091622001458860515315453", Currency: "CNY", AmountMinor: c.pay, ReceivedMinor: c.recv, At: payAt, CreatedAt: createdAt},
				{No: 7, Kind: reconcile.BillRefund, OutTradeNo: "service_1568601259302", PlatformTradeNo: "2019091622001458860515315453", RefundNo: "re_test_1568602607356", Currency: "CNY", AmountMinor: c.ref, ReceivedMinor: c.ref, At: refundAt, CreatedAt: createdAt},
			}
			sameLines(t, got, want, true)
			if got[0].No != 6 || got[1].No != 7 {
				t.Fatalf("line numbers %d, %d; want 6, 7", got[0].No, got[1].No)
			}
			if tot := r.Totals(); tot != (Totals{Payments: 1, PaymentsMinor: c.pay, Refunds: 1, RefundsMinor: c.ref}) {
				t.Fatalf("totals %+v", tot)
			}
			wantHead := Header{Account: "20880211096256330156", Start: testDay, End: testDay.AddDate(0, 0, 1)}
			if h := r.(HeaderReader).Header(); h.Account != wantHead.Account || !h.Start.Equal(wantHead.Start) || !h.End.Equal(wantHead.End) {
				t.Fatalf("header %+v, want %+v", h, wantHead)
			}
		})
	}
}

func mustTime(t *testing.T, s string) (at time.Time) {
	t.Helper()
	at, err := parseChinaTime(s)
	if err != nil {
		t.Fatal(err)
	}
	return at
}

func TestAlipayCSVRejects(t *testing.T) {
	row6 := "2019091622001458860515315453\t,service_1568601259302\t,交易\t,下单测试,2019-09-16 10:55:16,2019-09-16 10:55:23,"
	cut := func(marker string) string { return alipaySample[:strings.Index(alipaySample, marker)] }
	for _, c := range []struct {
		name string
		text string
		line int
		why  string
	}{
		{"an amount that is not one", strings.Replace(alipaySample, ",0.01,0.01,", ",0.0x,0.01,", 1), 6, "订单金额"},
		{"three decimals", strings.Replace(alipaySample, ",0.01,0.01,", ",0.001,0.01,", 1), 6, "订单金额"},
		{"an unknown business type", strings.Replace(alipaySample, "退款\t,下单测试", "冻结\t,下单测试", 1), 7, "业务类型"},
		{"a time that is not one", strings.Replace(alipaySample, "2019-09-16 10:55:23", "2019/09/16 10:55", 1), 6, "完成时间"},
		{"a creation time that is not one", strings.Replace(alipaySample, "2019-09-16 10:55:16", "2019-09-31 10:55:16", 1), 6, "创建时间"},
		{"no order number", strings.Replace(alipaySample, "service_1568601259302\t,交易", "\t,交易", 1), 6, "商户订单号"},
		{"a negative payment", strings.Replace(alipaySample, ",0.01,0.01,", ",-0.01,-0.01,", 1), 6, "negative"},
		{"an unterminated quote", strings.Replace(alipaySample, row6, row6+`"`, 1), 6, "quote"},
		{"a header without the order number", strings.Replace(alipaySample, "支付宝交易号,商户订单号,", "支付宝交易号,订单号,", 1), 5, "商户订单号"},
		{"cut after the rows", cut("#-----------------------------------------业务明细列表结束"), 0, "footer"},
		{"cut in the middle of the rows", cut("2019091622001458860515315453\t,service_1568601259302\t,退款"), 0, "footer"},
		{"no header at all", "#支付宝业务明细查询\n", 0, "header"},
		{"footer count differs", strings.Replace(alipaySample, "#交易合计：1笔", "#交易合计：2笔", 1), 0, "declares 2"},
		{"footer amount differs", strings.Replace(alipaySample, "商家实收共0.01元", "商家实收共0.02元", 1), 0, "0.02"},
		{"refund total differs", strings.Replace(alipaySample, "退款共-0.01元", "退款共-0.03元", 1), 0, "0.03"},
		{"an unreadable totals line", strings.Replace(alipaySample, "#交易合计：1笔", "#交易合计：一笔", 1), 9, "totals"},
		{"a row after the footer", alipaySample + strings.SplitAfter(alipaySample, "\n")[5], 12, "after the footer"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := readAll(NewAlipayCSV(bytes.NewReader(gbk(t, c.text))))
			re := wantReject(t, err, c.line)
			if !strings.Contains(re.Error(), c.why) {
				t.Fatalf("%q does not mention %q", re.Error(), c.why)
			}
		})
	}
}

func TestAlipayZipRoundTrip(t *testing.T) {
	lines := sampleSlice(500, 7)
	f := AlipayFile{UserID: "20880211096256330156", Day: testDay}
	data := alipayZipBytes(t, f, lines)
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	names := []string{f.EntryBase() + "_业务明细.csv", f.EntryBase() + "_业务明细(汇总).csv"}
	for i, e := range zr.File {
		if utf8.ValidString(e.Name) || entryName(e) != names[i] {
			t.Fatalf("entry %d: raw name %q (want GBK bytes) decodes to %q, want %q", i, e.Name, entryName(e), names[i])
		}
	}
	path := writeFile(t, f.EntryBase()+".csv.zip", data)
	for _, open := range []func() (ReadCloser, error){
		func() (ReadCloser, error) { return OpenAlipayZip(path) },
		func() (ReadCloser, error) { return Open(reconcile.Alipay, path) },
	} {
		r, err := open()
		if err != nil {
			t.Fatal(err)
		}
		got, err := readAll(r)
		if err != nil {
			t.Fatal(err)
		}
		r.Close()
		sameLines(t, got, lines, true)
		if got[0].No != 6 {
			t.Fatalf("first line numbered %d, want 6", got[0].No)
		}
		if h := r.(HeaderReader).Header(); h.Account != f.UserID || !h.Start.Equal(testDay) {
			t.Fatalf("zip header %+v", h)
		}
		if r.Totals().Refunds != 500/7 || r.Totals().Payments != 500-500/7 {
			t.Fatalf("totals %+v", r.Totals())
		}
	}
	// The bare detail CSV through Open.
	csvPath := writeFile(t, "detail.csv", alipayCSVBytes(t, f, lines))
	r, err := Open(reconcile.Alipay, csvPath)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	got, err := readAll(r)
	if err != nil {
		t.Fatal(err)
	}
	sameLines(t, got, lines, true)
}

func TestAlipayGeneratedOddities(t *testing.T) {
	lines := sampleSlice(3, 3) // a payment, a payment, a refund
	text, err := simplifiedChineseDecode(alipayCSVBytes(t, AlipayFile{UserID: "20880211096256330156", Day: testDay}, lines))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"#支付宝业务明细查询\n", "#账号：[20880211096256330156]\n",
		"#起始日期：[2019年09月16日 00:00:00]   终止日期：[2019年09月17日 00:00:00]\n",
		"\n" + alipayDetailHeader + "\n", ",T1\t,退款\t,", ",-0.02,-0.02,", ",re_T1\t,", "#交易合计：2笔，商家实收共0.03元，",
		"#退款合计：1笔，商家实收退款共-0.02元，", "#导出时间：[2019年09月17日 05:46:49]\n", ",\t,\t,",
		`,"套餐A,含""加料""",`, `,0.00,"备注,含逗号"` + "\n", `,0.00,"他说""好"""` + "\n", ",全角，标点（测试）,"} {
		if !strings.Contains(text, want) {
			t.Errorf("generated bill lacks %q", want)
		}
	}
	old, _ := simplifiedChineseDecode(alipayCSVBytes(t, AlipayFile{UserID: "2088", Day: testDay, OldFooter: true}, lines))
	if !strings.Contains(old, "#交易合计：2笔，交易金额共0.03元，") {
		t.Errorf("older footer not written:\n%s", old)
	}
}

func TestAlipayZipRejects(t *testing.T) {
	lines := sampleSlice(200, 9)
	f := AlipayFile{UserID: "20880211096256330156", Day: testDay}
	good := alipayZipBytes(t, f, lines)
	summaryOff := func() []byte { // a zip whose summary counts one trade too many
		var b bytes.Buffer
		zw := zip.NewWriter(&b)
		w, _ := zw.CreateHeader(gbkEntry(f.EntryBase() + "_业务明细.csv"))
		WriteAlipayCSV(w, f, slicesValues(lines))
		w, _ = zw.CreateHeader(gbkEntry(f.EntryBase() + "_业务明细(汇总).csv"))
		w.Write(gbk(t, "#支付宝业务汇总查询\n"+alipaySummaryHeader+"\n合计\t,\t,999,22,0.00,0.00,0.00,0.00,0.00,0.00,0.00,0.00\n"))
		zw.Close()
		return b.Bytes()
	}
	noDetail := func() []byte {
		var b bytes.Buffer
		zw := zip.NewWriter(&b)
		w, _ := zw.Create("readme.txt")
		w.Write([]byte("x"))
		zw.Close()
		return b.Bytes()
	}
	corrupt := append([]byte(nil), good...)
	corrupt[200] ^= 0xff // inside the detail entry's compressed data
	for _, c := range []struct {
		name string
		data []byte
		why  string
	}{
		{"truncated zip", good[:len(good)/2], "zip"},
		{"truncated by one byte", good[:len(good)-1], "zip"},
		{"a damaged entry", corrupt, ""},
		{"totals that disagree", alipayZipBytes(t, AlipayFile{UserID: f.UserID, Day: testDay, SkewMinor: 1}, lines), "交易合计"},
		{"a summary that disagrees", summaryOff(), "交易订单总笔数"},
		{"no detail entry", noDetail(), "业务明细.csv"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := writeFile(t, "bill.csv.zip", c.data)
			r, err := OpenAlipayZip(path)
			if err == nil {
				_, err = readAll(r)
				r.Close()
			}
			var re *RejectError
			if !errors.As(err, &re) {
				t.Fatalf("want a rejection, got %v", err)
			}
			if !strings.Contains(re.Error(), c.why) {
				t.Fatalf("%v does not mention %q", err, c.why)
			}
		})
	}
}

func TestOpenUnknownPlatform(t *testing.T) {
	if _, err := Open("paypal", os.DevNull); err == nil {
		t.Fatal("want an error for a platform without a bill format")
	}
}
