package console_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
)

// seedStatementDay saves one account's day as a statement run does: in a statement
// transaction, through SaveDay (no run: the row's run id stays NULL).
func (f *fixture) seedStatementDay(t *testing.T, p reconcile.Platform, merchant, date string, fig reconcile.StatementFigures) {
	t.Helper()
	ctx := context.Background()
	d, err := time.ParseInLocation(time.DateOnly, date, shanghai)
	must(t, err)
	day := reconcile.StatementDay{Account: reconcile.AccountKey{Platform: p, MerchantID: merchant},
		BusinessDay: reconcile.BusinessDay{Date: date, Start: d, End: d.AddDate(0, 0, 1)}}
	tx, err := postgres.NewStore(f.db.DB).BeginStatement(ctx, day, 0)
	must(t, err)
	defer tx.Rollback()
	must(t, tx.SaveDay(ctx, fig))
	must(t, tx.Commit())
}

// seedStatements saves three days: two in the week the console shows by default (the week
// ending 28 Nov, China time) and one of 20 Nov, before it.
func (f *fixture) seedStatements(t *testing.T) {
	t.Helper()
	// 28 Nov, Alipay: ¥1,234.56 in over 3 payments, ¥50.00 back, fees 0.6% of the ¥1,184.56
	// received (¥7.10736, kept to the thousandth of a fen).
	f.seedStatementDay(t, reconcile.Alipay, "2021000000000001", "2026-11-28", reconcile.StatementFigures{
		Payments: 3, PaymentsMinor: 123456, Refunds: 1, RefundsMinor: 5000, ReceivedMinor: 118456,
		FeeMilliFen: 710736, NetMilliFen: 118456*1000 - 710736, Lines: 4, Matched: 2, Repaired: 1, Found: 1, Held: 1,
		RefundsRepaired: 1, BillSHA256: strings.Repeat("ab", 32), BillLocation: "/bills/alipay-2026-11-28.csv"})
	f.seedStatementDay(t, reconcile.WechatPay, "1900000002", "2026-11-27", reconcile.StatementFigures{
		Payments: 1, PaymentsMinor: 990000, ReceivedMinor: 990000, FeeMilliFen: 5940000, NetMilliFen: 990000*1000 - 5940000,
		Lines: 2, Matched: 1, Found: 1, RefundsUnknown: 1})
	f.seedStatementDay(t, reconcile.Alipay, "2021000000000001", "2026-11-20", reconcile.StatementFigures{
		Payments: 7, PaymentsMinor: 777700, ReceivedMinor: 777700, NetMilliFen: 777700 * 1000, Lines: 7, Matched: 7})
}

var (
	tagRe  = regexp.MustCompile(`<[^>]*>`)
	cellRe = regexp.MustCompile(`(?s)<t[dh][^>]*>(.*?)</t[dh]>`)
)

// rowCells is the text of each cell of the table row that begins with marker ("" if none).
func rowCells(body, marker string) []string {
	i := strings.Index(body, marker)
	if i < 0 {
		return nil
	}
	row := body[i:]
	row = row[:strings.Index(row, "</tr>")]
	var out []string
	for _, m := range cellRe.FindAllStringSubmatch(row, -1) {
		out = append(out, strings.TrimSpace(tagRe.ReplaceAllString(m[1], "")))
	}
	return out
}

// TestStatementsPage: the daily statement figures, per business day and account, as finance
// signs them off: counts, amounts as ¥1,234.56, fees and net to the fen with the bill's five
// decimals beneath, the line outcomes, the period's total; the days of accounts that no run
// saved, as not reconciled; in English and Simplified Chinese; the period chosen by date.
func TestStatementsPage(t *testing.T) {
	f := newFixture(t)
	f.seedStatements(t)
	get := func(path, lang string) (int, string) {
		w := f.do(t, request{method: "GET", path: path, peer: trusted, who: ann, lang: lang})
		return w.Code, w.Body.String()
	}

	code, body := get("/review/statements", "")
	if code != http.StatusOK {
		t.Fatalf("HTTP %d\n%s", code, body)
	}
	rows := map[string][]string{
		`<tr data-day="2026-11-28" data-account="alipay:2021000000000001">`: {"2026-11-28", "Alipay", "2021000000000001",
			"3", "¥1,234.56", "1", "¥50.00", "¥1,184.56", "¥7.11¥7.10736", "¥1,177.45¥1,177.45264", "4", "2", "1", "1", "1", "1", "0"},
		`<tr data-day="2026-11-27" data-account="wechatpay:1900000002">`: {"2026-11-27", "WeChat Pay", "1900000002",
			"1", "¥9,900.00", "0", "¥0.00", "¥9,900.00", "¥59.40¥59.40000", "¥9,840.60¥9,840.60000", "2", "1", "0", "1", "0", "0", "1"},
		`<tr id="statements-total">`: {"Total", "4", "¥11,134.56", "1", "¥50.00", "¥11,084.56", "¥66.51¥66.50736", "¥11,018.05¥11,018.05264",
			"6", "3", "1", "2", "1", "1", "1"},
	}
	for marker, want := range rows {
		if got := rowCells(body, marker); !slices.Equal(got, want) {
			t.Errorf("row %s:\n got %q\nwant %q", marker, got, want)
		}
	}
	// 22 to 27 November (the 28th is today: its bill is not out): Alipay has none of them
	// saved, WeChat Pay only the 27th.
	if !strings.Contains(body, `<h2 id="not-reconciled">Not reconciled: 11</h2>`) ||
		!strings.Contains(body, "<tr><td>2026-11-26</td><td>WeChat Pay</td><td>1900000002</td></tr>") ||
		strings.Contains(body, "<tr><td>2026-11-27</td><td>WeChat Pay</td>") || strings.Contains(body, "<tr><td>2026-11-28</td>") {
		t.Errorf("the days not reconciled are wrong:\n%s", body[strings.Index(body, "<main>"):])
	}
	// By day, then account: the 27th before the 28th.
	if strings.Index(body, `data-day="2026-11-27"`) > strings.Index(body, `data-day="2026-11-28"`) {
		t.Errorf("days are not in date order")
	}
	if strings.Contains(body, `data-day="2026-11-20"`) {
		t.Errorf("the default week (22–28 Nov) shows 20 Nov")
	}
	for _, want := range []string{`lang="en"`, "Daily statements (the platforms&#39; trade bills)", "Business day", "Payments", "Paid in",
		"Refunded", "Received", "Fees", "Net", "Bill lines", "Matched", "Repaired", "Findings", "Held", "Refunds repaired", "Unknown refunds",
		`name="from" value="2026-11-22"`, `name="to" value="2026-11-28"`} {
		if !strings.Contains(body, want) {
			t.Errorf("English page lacks %q", want)
		}
	}
	if strings.Contains(body, "<script") || strings.Contains(body, "fees_milli_fen") {
		t.Errorf("page has a script or a raw column name")
	}

	_, zh := get("/review/statements", "zh-CN,zh;q=0.9")
	for _, want := range []string{`lang="zh-Hans"`, "每日对账单（平台交易账单）", "账单日期", "收款笔数", "收款金额", "退款金额", "实收金额",
		"手续费", "结算净额", "账单行数", "已匹配", "已补单", "挂起", "退款已修复", "未知退款", "支付宝", "合计", "¥1,177.45264"} {
		if !strings.Contains(zh, want) {
			t.Errorf("Chinese page lacks %q", want)
		}
	}
	if strings.Contains(zh, "Business day") {
		t.Errorf("Chinese page shows English column names")
	}

	// A chosen period: 20 Nov alone.
	_, one := get("/review/statements?from=2026-11-20&to=2026-11-20", "")
	if got := rowCells(one, `<tr id="statements-total">`); len(got) < 3 || got[1] != "7" || got[2] != "¥7,777.00" {
		t.Errorf("20 Nov's total = %q, want 7 payments of ¥7,777.00", got)
	}
	if strings.Contains(one, `data-day="2026-11-28"`) {
		t.Errorf("20 Nov's page shows 28 Nov")
	}
	// A period without statements says so.
	if _, empty := get("/review/statements?from=2026-10-01&to=2026-10-31", ""); !strings.Contains(empty, `id="no-statements"`) ||
		strings.Contains(empty, `id="statements"`) {
		t.Errorf("an empty period does not say no bill was reconciled")
	}
	for _, q := range []string{"from=yesterday", "to=2026-13-01", "from=2026-11-29&to=2026-11-28", "from=2025-01-01&to=2026-11-28"} {
		if code, body := get("/review/statements?"+q, ""); code != http.StatusBadRequest || !strings.Contains(body, `id="error"`) {
			t.Errorf("%s: HTTP %d, want 400 with the reason", q, code)
		}
	}
}

// TestStatementsNeedATrustedIdentity: the figures are shown to reviewers and approvers only,
// named by the sign-in proxy on loopback; everyone else sees none of them.
func TestStatementsNeedATrustedIdentity(t *testing.T) {
	f := newFixture(t)
	f.seedStatements(t)
	cases := []struct {
		name, peer, who string
		want            int
	}{
		{"no identity from the sidecar", trusted, "", http.StatusUnauthorized},
		{"identity from an untrusted peer", untrusted, cfo, http.StatusUnauthorized},
		{"identity from an untrusted IPv6 peer", "[2001:db8::5]:4000", ann, http.StatusUnauthorized},
		{"two identities", trusted, ann + "\x00" + bob, http.StatusUnauthorized},
		{"signed in but not listed", trusted, eve, http.StatusForbidden},
		{"reviewer via IPv4 loopback", trusted, ann, http.StatusOK},
		{"approver via IPv4 loopback", trusted, cfo, http.StatusOK},
		{"approver by domain via IPv6 loopback", trusted6, aud, http.StatusOK},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			rq := request{method: "GET", path: "/review/statements?from=2026-11-22&to=2026-11-28", peer: c.peer, who: c.who}
			if who, other, two := strings.Cut(c.who, "\x00"); two {
				rq.who = who
				rq.extra = other
			}
			w := f.do(t, rq)
			if w.Code != c.want {
				t.Fatalf("HTTP %d, want %d\n%s", w.Code, c.want, w.Body.String())
			}
			shows := strings.Contains(w.Body.String(), "¥1,234.56")
			if shows != (c.want == http.StatusOK) {
				t.Errorf("HTTP %d and the figures shown: %v", w.Code, shows)
			}
		})
	}
}

// TestNavigationLinksStatements: the findings page leads to the statements and back.
func TestNavigationLinksStatements(t *testing.T) {
	f := newFixture(t)
	for _, path := range []string{"/review/", "/review/statements", findingPath(f.amount)} {
		body := f.do(t, request{method: "GET", path: path, peer: trusted, who: ann}).Body.String()
		if !strings.Contains(body, `<a href="/review/statements" id="nav-statements">Daily statements</a>`) ||
			!strings.Contains(body, `<a href="/review/" id="nav-findings">Findings</a>`) {
			t.Errorf("%s: no navigation between findings and statements", path)
		}
	}
}

// TestStatementLinesPage: a day's repaired and findings figures link to the bill lines the
// run remembered, which the lines page lists, filtered by what became of them, each finding
// linked; a finding's page links back to its line.
func TestStatementLinesPage(t *testing.T) {
	f := newFixture(t)
	f.seedStatements(t)
	f.db.MustExec(`INSERT INTO statement_lines (platform, merchant_id, bill_date, line_no, kind, out_trade_no, platform_trade_no,
		refund_no, amount_minor, outcome, mismatch_kind, mismatch_id) VALUES
		('alipay', '2021000000000001', '2026-11-28', 2, 'payment', 'ORD-2', 'T-2', '', 3000, 'repaired', NULL, NULL),
		('alipay', '2021000000000001', '2026-11-28', 3, 'payment', 'GHOST-7', 'T-3', '', 5000, 'mismatch', 'UNKNOWN_ORDER', $1),
		('alipay', '2021000000000001', '2026-11-28', 5, 'refund', 'ORD-1', 'T-1', 'RF-1', 5000, 'other_day', NULL, NULL)`, f.unknown)
	get := func(path string) (int, string) {
		w := f.do(t, request{method: "GET", path: path, peer: trusted, who: ann})
		return w.Code, w.Body.String()
	}
	day := "/review/statements/alipay/2021000000000001/2026-11-28"
	_, body := get("/review/statements")
	for _, want := range []string{`<a href="` + day + `?result=repaired">1</a>`, `<a href="` + day + `?result=mismatch">1</a>`, `<a href="` + day + `">4</a>`} {
		if !strings.Contains(body, want) {
			t.Errorf("the statements page lacks %s", want)
		}
	}
	for _, c := range []struct {
		q     string
		lines []string
	}{{"", []string{"2", "3", "5"}}, {"?result=mismatch", []string{"3"}}, {"?result=repaired", []string{"2"}}, {"?result=unchanged", nil}} {
		code, body := get(day + c.q)
		got := regexp.MustCompile(`<tr data-line="(\d+)">`).FindAllStringSubmatch(body, -1)
		var lines []string
		for _, m := range got {
			lines = append(lines, m[1])
		}
		if code != http.StatusOK || !slices.Equal(lines, c.lines) {
			t.Errorf("%s: %d, lines %v, want %v", c.q, code, lines, c.lines)
		}
	}
	if _, body := get(day + "?result=mismatch"); !strings.Contains(body, fmt.Sprintf(`<a href="/review/findings/%d">#%d</a> Unknown order`, f.unknown, f.unknown)) {
		t.Errorf("the finding's line does not link to it:\n%s", body)
	}
	if _, body := get(findingPath(f.unknown)); !strings.Contains(body, `<table id="finding-lines">`) || !strings.Contains(body, `<a href="`+day+`">2026-11-28</a>`) {
		t.Errorf("the finding does not link to its bill line")
	}
	for _, bad := range []string{day + "?result=lost", "/review/statements/paypal/x/2026-11-28", "/review/statements/alipay/x/28-11-2026"} {
		if code, _ := get(bad); code != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", bad, code)
		}
	}
}
