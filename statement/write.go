package statement

import (
	"archive/zip"
	"bufio"
	"cmp"
	"compress/gzip"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"io"
	"iter"
	"strconv"
	"strings"
	"time"

	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/transform"

	"github.com/payrecon/payrecon/reconcile"
)

// The generators below write bills in the platforms' exact formats, every oddity included,
// streaming from a line iterator so a million-line bill costs no memory. Tests, benchmarks
// and the sandbox use them; the readers above are their counterpart.

// AlipayFile describes an Alipay bill to write.
type AlipayFile struct {
	UserID     string    // the account as the bill names it: the PID plus "0156"
	Day        time.Time // the bill's day (its date in China time)
	ExportedAt time.Time // the #导出时间 line; zero: 05:46:49 the next day
	OldFooter  bool      // word the footer as older bills do ("交易金额共")
	// SkewMinor is added to the declared payment total: a bill that does not add up.
	SkewMinor int64
}

// EntryBase is "<userId>_<yyyyMMdd>", the start of the zip's entry names and download name.
func (f AlipayFile) EntryBase() string {
	return f.UserID + "_" + f.Day.In(chinaTime).Format("20060102")
}

const alipayDetailHeader = "支付宝交易号,商户订单号,业务类型,商品名称,创建时间,完成时间,门店编号,门店名称,操作员,终端号,对方账户,订单金额（元）,商家实收（元）,支付宝红包（元）,集分宝（元）,支付宝优惠（元）,商家优惠（元）,券核销金额（元）,券名称,商家红包消费金额（元）,卡消费金额（元）,退款批次号/请求号,服务费（元）,分润（元）,备注"

const alipaySummaryHeader = "门店编号,门店名称,交易订单总笔数,退款订单总笔数,订单金额（元）,商家实收（元）,支付宝优惠（元）,商家优惠（元）,卡消费金额（元）,服务费（元）,分润（元）,实收净额（元）"

// alipaySums are what the generator declares.
type alipaySums struct {
	t                Totals
	payRecv, refRecv int64
}

func received(l Line) int64 {
	if l.ReceivedMinor != 0 {
		return l.ReceivedMinor
	}
	return l.AmountMinor
}

// WriteAlipayCSV writes the detail CSV, GBK-encoded, and returns what its lines add up to.
func WriteAlipayCSV(w io.Writer, f AlipayFile, lines iter.Seq[Line]) (Totals, error) {
	s, err := writeAlipayDetail(w, f, lines)
	return s.t, err
}

func writeAlipayDetail(w io.Writer, f AlipayFile, lines iter.Seq[Line]) (alipaySums, error) {
	enc := transform.NewWriter(w, simplifiedchinese.GBK.NewEncoder())
	bw := bufio.NewWriterSize(enc, 64<<10)
	day := f.Day.In(chinaTime)
	start := time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 0, 0, chinaTime)
	const cn = "2006年01月02日 15:04:05"
	fmt.Fprintf(bw, "#支付宝业务明细查询\n#账号：[%s]\n#起始日期：[%s]   终止日期：[%s]\n", f.UserID, start.Format(cn), start.AddDate(0, 0, 1).Format(cn))
	bw.WriteString("#-----------------------------------------业务明细列表----------------------------------------\n")
	bw.WriteString(alipayDetailHeader + "\n")
	var s alipaySums
	var buf []byte
	n := 0
	for l := range lines {
		buf = appendAlipayRow(buf[:0], l, n)
		n++
		bw.Write(buf)
		s.t.add(l)
		if l.Kind == reconcile.BillRefund {
			s.refRecv += received(l)
		} else {
			s.payRecv += received(l)
		}
	}
	bw.WriteString("#-----------------------------------------业务明细列表结束------------------------------------\n")
	label, payDecl := "商家实收", s.payRecv
	if f.OldFooter {
		label, payDecl = "交易金额", s.t.PaymentsMinor
	}
	refDecl := s.refRecv
	if f.OldFooter {
		refDecl = s.t.RefundsMinor
	}
	fmt.Fprintf(bw, "#交易合计：%d笔，%s共%s元，商家优惠共0.00元\n", s.t.Payments, label, reconcile.FormatYuanPlaces(payDecl+f.SkewMinor, reconcile.FenPlaces, 2))
	fmt.Fprintf(bw, "#退款合计：%d笔，%s退款共%s元，商家优惠退款共0.00元\n", s.t.Refunds, label, reconcile.FormatYuanPlaces(-refDecl, reconcile.FenPlaces, 2))
	exported := f.ExportedAt
	if exported.IsZero() {
		exported = start.AddDate(0, 0, 1).Add(5*time.Hour + 46*time.Minute + 49*time.Second)
	}
	fmt.Fprintf(bw, "#导出时间：[%s]\n", exported.In(chinaTime).Format(cn))
	if err := bw.Flush(); err != nil {
		return s, fmt.Errorf("write alipay detail: %w", err)
	}
	return s, enc.Close()
}

// appendAlipayRow writes the detail row of the n-th line: text fields end in a tab (Alipay's
// way of keeping long numbers text in a spreadsheet), a text field with a comma or a quote
// in it is quoted, refunds carry negative amounts.
func appendAlipayRow(b []byte, l Line, n int) []byte {
	kind, sign := "交易", int64(1)
	if l.Kind == reconcile.BillRefund {
		kind, sign = "退款", -1
	}
	at := l.At.In(chinaTime)
	text := func(b []byte, s string) []byte { return append(append(b, s...), "\t,"...) }
	money := func(b []byte, v int64) []byte {
		return append(append(b, reconcile.FormatYuanPlaces(v, reconcile.FenPlaces, 2)...), ',')
	}
	b = text(b, l.PlatformTradeNo)
	b = text(b, l.OutTradeNo)
	b = text(b, kind)
	b = appendCSVField(b, sampleProducts[n%len(sampleProducts)])
	b = append(b, ',')
	created := l.CreatedAt
	if created.IsZero() {
		created = l.At.Add(-time.Minute)
	}
	b = append(append(b, created.In(chinaTime).Format(timeLayout)...), ',')
	b = append(append(b, at.Format(timeLayout)...), ',')
	b = append(b, "\t,\t,\t,\t,138****8888\t,"...) // 门店编号 门店名称 操作员 终端号 对方账户
	b = money(b, sign*l.AmountMinor)
	b = money(b, sign*received(l))
	b = append(b, "0.00,0.00,0.00,0.00,0.00,\t,0.00,0.00,"...) // 红包 集分宝 优惠 商家优惠 券 券名称 商家红包 卡
	b = text(b, l.RefundNo)
	b = append(append(b, reconcile.FormatYuanPlaces(l.FeeMilliFen, reconcile.MilliFenPlaces, feeDecimals(l.FeeMilliFen))...), ',')
	b = append(b, "0.00,"...)
	b = appendCSVField(b, sampleRemarks[n%len(sampleRemarks)])
	return append(b, '\n')
}

// The text the generators write into the merchant's own columns, in turn: what merchants
// really put there, commas, double quotes, JSON and full-width punctuation included, so that
// every generated bill (the sandbox's too) exercises the readers' splitting.
var (
	sampleProducts = []string{"微信支付测试", `套餐A,含"加料"`, "全角，标点（测试）", `礼盒 "2件装", 红色`}
	sampleAttaches = []string{"", `{"a":"1","b":"2"}`, `{"order":"T1","note":"含,逗号"}`, `{"tags":["a","b"],"q":"\"x\""}`}
	sampleRemarks  = []string{"下单测试", "备注,含逗号", `他说"好"`, "全角，逗号"}
)

// appendCSVField writes s as a CSV field, quoted as Alipay quotes it: only when it holds a
// comma, a double quote or a line break, with a quote inside doubled.
func appendCSVField(b []byte, s string) []byte {
	if !strings.ContainsAny(s, ",\"\r\n") {
		return append(b, s...)
	}
	b = append(b, '"')
	b = append(b, strings.ReplaceAll(s, `"`, `""`)...)
	return append(b, '"')
}

// WriteAlipayZip writes the zip Alipay serves: the detail CSV and the summary CSV, both GBK,
// with GBK entry names.
func WriteAlipayZip(w io.Writer, f AlipayFile, lines iter.Seq[Line]) (Totals, error) {
	zw := zip.NewWriter(w)
	detail, err := zw.CreateHeader(gbkEntry(f.EntryBase() + "_业务明细.csv"))
	if err != nil {
		return Totals{}, fmt.Errorf("write alipay zip: %w", err)
	}
	s, err := writeAlipayDetail(detail, f, lines)
	if err != nil {
		return s.t, err
	}
	summary, err := zw.CreateHeader(gbkEntry(f.EntryBase() + "_业务明细(汇总).csv"))
	if err != nil {
		return s.t, fmt.Errorf("write alipay zip: %w", err)
	}
	enc := transform.NewWriter(summary, simplifiedchinese.GBK.NewEncoder())
	net := s.payRecv - s.refRecv
	fmt.Fprintf(enc, "#支付宝业务汇总查询\n#账号：[%s]\n#-----------------------------------------业务汇总列表----------------------------------------\n%s\n", f.UserID, alipaySummaryHeader)
	fmt.Fprintf(enc, "合计\t,\t,%d,%d,%s,%s,0.00,0.00,0.00,%s,0.00,%s\n", s.t.Payments, s.t.Refunds,
		reconcile.FormatYuanPlaces(s.t.PaymentsMinor-s.t.RefundsMinor, reconcile.FenPlaces, 2), reconcile.FormatYuanPlaces(net, reconcile.FenPlaces, 2),
		reconcile.FormatYuanPlaces(s.t.FeeMilliFen, reconcile.MilliFenPlaces, feeDecimals(s.t.FeeMilliFen)), reconcile.FormatYuanPlaces(net, reconcile.FenPlaces, 2))
	fmt.Fprintf(enc, "#-----------------------------------------业务汇总列表结束------------------------------------\n")
	if err := enc.Close(); err != nil {
		return s.t, fmt.Errorf("write alipay summary: %w", err)
	}
	return s.t, zw.Close()
}

func gbkEntry(name string) *zip.FileHeader {
	gbk, err := simplifiedchinese.GBK.NewEncoder().String(name)
	if err != nil {
		gbk = name
	}
	return &zip.FileHeader{Name: gbk, Method: zip.Deflate, NonUTF8: true, Modified: time.Unix(0, 0)}
}

// WeChatFile describes a WeChat Pay trade bill to write.
type WeChatFile struct {
	AppID     string
	MchID     string
	SubMchID  string // 特约商户号; "" writes "0", an ordinary merchant
	OldHeader bool   // the older header: 总金额 / 企业红包金额
	BOM       bool   // start with a UTF-8 BOM, as some files do
	Gzip      bool   // tar_type=GZIP
	// SkewMinor is added to the summary's 应结订单总金额: a bill that does not add up.
	SkewMinor int64
}

const wxHeader = "交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状态,付款银行,货币种类,应结订单金额,代金券金额,微信退款单号,商户退款单号,退款金额,充值券退款金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率,订单金额,申请退款金额,费率备注"
const wxHeaderOld = "交易时间,公众账号ID,商户号,特约商户号,设备号,微信订单号,商户订单号,用户标识,交易类型,交易状态,付款银行,货币种类,总金额,企业红包金额,微信退款单号,商户退款单号,退款金额,充值券退款金额,退款类型,退款状态,商品名称,商户数据包,手续费,费率,订单金额,申请退款金额,费率备注"
const wxSummaryHeader = "总交易单数,应结订单总金额,退款总金额,充值券退款总金额,手续费总金额,订单总金额,申请退款总金额"

// WriteWeChatCSV writes a trade bill (bill_type ALL), plain or gzip, and returns the SHA1 of
// the unzipped bytes (the hash_value WeChat Pay declares) and what the lines add up to.
func WriteWeChatCSV(w io.Writer, f WeChatFile, lines iter.Seq[Line]) (string, Totals, error) {
	var out io.Writer = w
	var zw *gzip.Writer
	if f.Gzip {
		zw = gzip.NewWriter(w)
		out = zw
	}
	h := sha1.New()
	bw := bufio.NewWriterSize(io.MultiWriter(out, h), 64<<10)
	if f.BOM {
		bw.Write(utf8BOM)
	}
	header := wxHeader
	if f.OldHeader {
		header = wxHeaderOld
	}
	bw.WriteString(header + "\n")
	var t Totals
	var settle, refund int64
	var buf []byte
	n := 0
	for l := range lines {
		buf = appendWeChatRow(buf[:0], f, l, n)
		n++
		bw.Write(buf)
		t.add(l)
		if l.Kind == reconcile.BillRefund {
			refund += received(l)
		} else {
			settle += received(l)
		}
	}
	bw.WriteString(wxSummaryHeader + "\n")
	fmt.Fprintf(bw, "`%d,`%s,`%s,`0.00,`%s,`%s,`%s\n", t.Payments+t.Refunds,
		reconcile.FormatYuanPlaces(settle+f.SkewMinor, reconcile.FenPlaces, 2), reconcile.FormatYuanPlaces(refund, reconcile.FenPlaces, 2),
		reconcile.FormatYuanPlaces(t.FeeMilliFen, reconcile.MilliFenPlaces, 5), reconcile.FormatYuanPlaces(t.PaymentsMinor, reconcile.FenPlaces, 2),
		reconcile.FormatYuanPlaces(t.RefundsMinor, reconcile.FenPlaces, 2))
	if err := bw.Flush(); err != nil {
		return "", t, fmt.Errorf("write wechatpay bill: %w", err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			return "", t, fmt.Errorf("write wechatpay bill: %w", err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), t, nil
}

// appendWeChatRow writes the detail row of the n-th line, every field behind a backtick and
// nothing quoted: the product name and attach hold commas, quotes and JSON as they come. A
// refund is its own row: the order's numbers, zero order amounts, the refund's numbers,
// amounts and status, a negative fee.
func appendWeChatRow(b []byte, f WeChatFile, l Line, n int) []byte {
	sub := f.SubMchID
	if sub == "" {
		sub = "0"
	}
	cur := l.Currency
	if cur == "" {
		cur = reconcile.DefaultCurrency
	}
	field := func(b []byte, s string) []byte { return append(append(append(b, '`'), s...), ',') }
	money := func(v int64) string { return reconcile.FormatYuanPlaces(v, reconcile.FenPlaces, 2) }
	state, settle, order, refundID, refundNo, refund, apply, refundType, refundState := "SUCCESS",
		money(received(l)), money(l.AmountMinor), "0", "0", "0.00", "0.00", "", ""
	if l.Kind == reconcile.BillRefund {
		state, settle, order, refundID, refundNo = "REFUND", "0.00", "0.00", cmp.Or(l.PlatformRefundNo, "50"+l.PlatformTradeNo), l.RefundNo
		refund, apply, refundType, refundState = money(received(l)), money(l.AmountMinor), "ORIGINAL", wxRefundState(l)
	}
	b = field(b, l.At.In(chinaTime).Format(timeLayout))
	for _, s := range []string{f.AppID, f.MchID, sub, "", l.PlatformTradeNo, l.OutTradeNo,
		"oZWaCKXip5njeEiloC4oeOV1TTsk", "JSAPI", state, "OTHERS", cur, settle, "0.00", refundID, refundNo,
		refund, "0.00", refundType, refundState, sampleProducts[n%len(sampleProducts)], sampleAttaches[n%len(sampleAttaches)],
		reconcile.FormatYuanPlaces(l.FeeMilliFen, reconcile.MilliFenPlaces, 5),
		"0.60%", order, apply} {
		b = field(b, s)
	}
	return append(b, "`\n"...)
}

// wxRefundState is a refund line's 退款状态: its RefundStatus, else what Pending says.
func wxRefundState(l Line) string {
	switch {
	case l.RefundStatus != "":
		return l.RefundStatus
	case l.Pending:
		return wxRefundPending
	}
	return wxRefundDone
}

// SampleLines yields n deterministic bill lines of day, for tests and benchmarks: payments
// with varied amounts and a 0.6% fee, and every refundEvery-th line (0: none) a refund of the
// payment before it. Order numbers are prefix + the line's index.
func SampleLines(day time.Time, prefix string, n, refundEvery int) iter.Seq[Line] {
	base := time.Date(day.Year(), day.Month(), day.Day(), 0, 0, 1, 0, chinaTime)
	return func(yield func(Line) bool) {
		var last Line
		for i := range n {
			at := base.Add(time.Duration(i%86000) * time.Second)
			l := Line{Kind: reconcile.BillPayment, Currency: reconcile.DefaultCurrency, OutTradeNo: prefix + strconv.Itoa(i),
				PlatformTradeNo: fmt.Sprintf("2019091622001%015d", i),
				AmountMinor:     int64(i%9973 + 1), At: at, CreatedAt: at.Add(-time.Minute)}
			l.FeeMilliFen = l.AmountMinor * 6
			if refundEvery > 0 && i%refundEvery == refundEvery-1 && last.OutTradeNo != "" {
				l = last
				l.Kind, l.RefundNo, l.FeeMilliFen = reconcile.BillRefund, "re_"+last.OutTradeNo, -last.FeeMilliFen
				l.PlatformRefundNo, l.RefundStatus = "50"+last.PlatformTradeNo, wxRefundDone
				l.At = last.At.Add(time.Minute)
			}
			if !yield(l) {
				return
			}
			last = l
		}
	}
}

// feeDecimals is how many decimals a bill writes a fee with: two unless its thousandths of
// a fen say otherwise.
func feeDecimals(milliFen int64) int {
	switch {
	case milliFen%1000 == 0:
		return 2
	case milliFen%100 == 0:
		return 3
	case milliFen%10 == 0:
		return 4
	}
	return 5
}
