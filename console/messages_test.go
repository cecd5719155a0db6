package console_test

import (
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// refusal is one way the console says no: the request (built for a language), the status,
// a phrase the Chinese and the English message each say, and a value the person typed that
// the message may repeat.
type refusal struct {
	name   string
	rq     func(lang string) request
	status int
	zh, en string
	echo   string
}

// TestEveryRefusalInThePagesLanguage drives each refusal a person can meet (a review move
// the rules refuse, a form or filter that does not read, a missing or stale form token, a
// page that does not exist, a person the console does not know) with Accept-Language zh-CN
// and with English. The Chinese message says it in Chinese and holds no English word but
// an identifier (an address, a setting's name, a format's name, what the person typed);
// the English one keeps its English wording.
func TestEveryRefusalInThePagesLanguage(t *testing.T) {
	f := newFixture(t)
	// The states the refusals need: cfo's proposal on the unknown order, ann's
	// acknowledgement of the paid-after-close finding, new evidence on the amount finding.
	post := func(who, path string, form map[string]string) request {
		form["csrf"] = f.tokenFor(t, who)
		return request{method: "POST", path: path, peer: trusted, who: who, form: form}
	}
	for _, rq := range []request{
		post(cfo, actionPath(f.unknown, "resolve"), map[string]string{"version": "1", "resolution": "refunded"}),
		post(ann, actionPath(f.pac, "acknowledge"), map[string]string{"version": "1"}),
	} {
		if w := f.do(t, rq); w.Code != http.StatusSeeOther {
			t.Fatalf("set up %s: HTTP %d\n%s", rq.path, w.Code, w.Body.String())
		}
	}
	f.db.MustExec(`UPDATE reconcile_mismatches SET platform_amount_minor = 143456, evidence_version = 2 WHERE id = $1`, f.amount)
	// An open finding no payment can settle: accept_payment does not fit it.
	var unfit int64
	must(t, f.db.Get(&unfit, `INSERT INTO reconcile_mismatches (platform, merchant_id, out_trade_no, platform_trade_no, kind,
		platform_amount_minor, platform_status, first_seen_at, last_seen_at)
		VALUES ('alipay', '2021000000000001', 'GHOST-8', '2026112822008', 'UNKNOWN_ORDER', 700, 'TRADE_SUCCESS', $1, $1)
		RETURNING id`, base))

	for _, c := range refusals(f, unfit, post) {
		t.Run(c.name, func(t *testing.T) {
			for _, lang := range []string{"zh-CN,zh;q=0.9", "en"} {
				rq := c.rq(lang)
				rq.lang = lang
				w := f.do(t, rq)
				msg := messageOf(w)
				if w.Code != c.status {
					t.Errorf("%s: HTTP %d, want %d: %q", lang, w.Code, c.status, msg)
				}
				if lang == "en" {
					if !strings.Contains(msg, c.en) || hasCJK(msg) {
						t.Errorf("en: message %q, want it to say %q in English", msg, c.en)
					}
					continue
				}
				if !strings.Contains(msg, c.zh) {
					t.Errorf("zh: message %q, want it to say %q", msg, c.zh)
				}
				if words := englishWords(msg, c.echo); len(words) > 0 {
					t.Errorf("zh: message %q holds English %q", msg, words)
				}
			}
		})
	}
}

// refusals are the cases of TestEveryRefusalInThePagesLanguage, over f's findings in the
// states it set up and unfit, an open finding accept_payment does not fit.
func refusals(f *fixture, unfit int64, post func(who, path string, form map[string]string) request) []refusal {
	get := func(who, path string) func(string) request {
		return func(string) request { return request{method: "GET", path: path, peer: trusted, who: who} }
	}
	move := func(who string, id int64, action string, form map[string]string) func(string) request {
		return func(string) request {
			copied := map[string]string{}
			for k, v := range form {
				copied[k] = v
			}
			return post(who, actionPath(id, action), copied)
		}
	}
	bulk := func(who string, vals url.Values) func(string) request {
		return func(string) request {
			rq := post(who, "/review/bulk", map[string]string{})
			v := url.Values{"csrf": {rq.form["csrf"]}}
			for k, vs := range vals {
				v[k] = vs
			}
			return request{method: "POST", path: "/review/bulk", peer: trusted, who: who, values: v}
		}
	}
	v1, v2 := map[string]string{"version": "1"}, map[string]string{"version": "2"}
	with := func(m map[string]string, k, v string) map[string]string {
		out := map[string]string{k: v}
		for a, b := range m {
			out[a] = b
		}
		return out
	}
	one := strconv.FormatInt(f.pac, 10) + ".1"
	return []refusal{
		// The review rules, as the database refuses the move.
		{"stale evidence", move(ann, f.amount, "resolve", with(v1, "resolution", "accepted")), http.StatusConflict, "证据在您查看后已变化", "look again", ""},
		{"self-approval", move(cfo, f.unknown, "approve", v1), http.StatusForbidden, "这是您的提议", "a second person must approve", ""},
		{"moved already", move(ann, f.pac, "acknowledge", v1), http.StatusConflict, "其他人已处理该差异", "Someone else already moved", ""},
		{"a write-off needs a note", move(ann, f.amount, "resolve", with(v2, "resolution", "written_off")), http.StatusBadRequest,
			"“已核销”须在备注中说明原因", "Written off needs a note saying why", ""},
		{"accept_payment does not fit", move(ann, unfit, "resolve", with(v1, "resolution", "accept_payment")), http.StatusBadRequest,
			"“确认收款入账”不适用于此差异", "Payment taken in does not fit this finding", ""},
		{"a rejection needs a note", move(aud, f.unknown, "reject", v1), http.StatusBadRequest, "驳回须填写理由", "a rejection needs a note saying why", ""},
		{"only the proposer withdraws", move(aud, f.unknown, "withdraw", v1), http.StatusBadRequest, "只有提议人本人可以撤回提议", "Only its proposer may withdraw", ""},
		{"no such finding to move", move(ann, 999999, "acknowledge", v1), http.StatusNotFound, "没有这条差异", "No such finding", ""},
		// The form, before the rules.
		{"no resolution", move(ann, f.amount, "resolve", with(v2, "resolution", "nope")), http.StatusBadRequest, "请选择处理结果", "choose a resolution", ""},
		{"no version", move(ann, f.amount, "resolve", map[string]string{"resolution": "accepted"}), http.StatusBadRequest, "表单不完整：证据版本", "The form is incomplete: version", ""},
		{"approval by a reviewer", move(ann, f.unknown, "approve", v1), http.StatusForbidden, "只有审批人可以批准或驳回", "403 forbidden: Only approvers", ""},
		{"no form token", func(string) request {
			return request{method: "POST", path: actionPath(f.amount, "acknowledge"), peer: trusted, who: ann, form: map[string]string{"version": "2"}}
		}, http.StatusForbidden, "表单已过期", "403 forbidden: The form expired", ""},
		{"no such action", move(ann, f.amount, "explode", v2), http.StatusNotFound, "404 页面不存在", "404 page not found", ""},
		// Pages and filters.
		{"no such finding", get(ann, "/review/findings/abc"), http.StatusNotFound, "没有这条差异", "No such finding", ""},
		{"no such page", get(ann, "/review/nope"), http.StatusNotFound, "404 页面不存在", "404 page not found", ""},
		{"list: a date", get(ann, "/review/?from=yesterday"), http.StatusBadRequest, "起始日期：请输入日期", `from: want a date such as 2026-11-28, got "yesterday"`, "yesterday"},
		{"list: backwards", get(ann, "/review/?from=2026-11-29&to=2026-11-28"), http.StatusBadRequest, "截止日期：早于起始日期", "to: the period ends before it starts", ""},
		{"list: a kind", get(ann, "/review/?kind=NOPE"), http.StatusBadRequest, "差异类型：无法识别「NOPE」", `kind: unknown "NOPE"`, "NOPE"},
		{"list: a status", get(ann, "/review/?status=DONE"), http.StatusBadRequest, "复核状态：无法识别「DONE」", `status: unknown "DONE"`, "DONE"},
		{"list: an amount", get(ann, "/review/?min=lots"), http.StatusBadRequest, "请输入以元为单位的金额", "min: want an amount in yuan", "lots"},
		{"list: a page", get(ann, "/review/?page=0"), http.StatusBadRequest, "页码：请输入页码", "page: want a page number", ""},
		{"list: a sort", get(ann, "/review/?sort=colour"), http.StatusBadRequest, "排序：无法识别「colour」", `sort: unknown "colour"`, "colour"},
		{"list: a search", get(ann, "/review/?q="+strings.Repeat("9", 80)), http.StatusBadRequest, "搜索：最多", "q: a search is at most", ""},
		{"list: not text", get(ann, "/review/?q=%00"), http.StatusBadRequest, "空字节或无效的 UTF-8 编码", "400 bad request: A filter holds bytes", ""},
		{"statements: a date", get(ann, "/review/statements?from=2026-11-22&to=soon"), http.StatusBadRequest, "截止日期：请输入日期", "to: want a date", "soon"},
		{"statements: too long", get(ann, "/review/statements?from=2025-01-01&to=2026-01-02"), http.StatusBadRequest, "每次最多 366 天", "to: at most 366 days at a time", ""},
		{"report: a format", get(ann, "/review/report?format=pdf&from=2026-11-28&to=2026-11-28"), http.StatusBadRequest, "格式须为", "400 bad request: format must be csv, xlsx or html", ""},
		{"report: no period", get(ann, "/review/report?format=csv"), http.StatusBadRequest, "请填写起始日期和截止日期", "400 bad request: The form is incomplete: from, to", ""},
		{"report: a date", get(ann, "/review/report?format=csv&from=2026-11-28&to=yesterday"), http.StatusBadRequest, "截止日期：请输入日期", `to: want a date such as 2026-11-28, got "yesterday"`, "yesterday"},
		{"report: backwards", get(ann, "/review/report?format=csv&from=2026-11-29&to=2026-11-28"), http.StatusBadRequest, "截止日期：早于起始日期", "to: the period ends before it starts", ""},
		{"report: too long", get(ann, "/review/report?format=csv&from=2025-01-01&to=2026-01-02"), http.StatusBadRequest, "每次最多 366 天", "to: at most 366 days at a time", ""},
		// Bulk moves.
		{"bulk: a selection", bulk(ann, url.Values{"action": {"acknowledge"}, "scope": {"selected"}, "sel": {"abc"}}), http.StatusBadRequest,
			"所选差异「abc」格式无效", `a selected finding "abc" is not <id>.<version>`, "abc"},
		{"bulk: no action", bulk(ann, url.Values{"scope": {"selected"}, "sel": {one}}), http.StatusBadRequest, "请选择操作", "choose an action.", ""},
		{"bulk: a rejection needs a note", bulk(cfo, url.Values{"action": {"reject"}, "scope": {"selected"}, "sel": {one}}), http.StatusBadRequest,
			"驳回须填写理由", "a rejection needs a note saying why.", ""},
		{"bulk: moved already", bulk(ann, url.Values{"action": {"acknowledge"}, "scope": {"selected"}, "sel": {one}}), http.StatusOK,
			"其他人已处理该差异", "Someone else already moved", ""},
		{"bulk: a filter", bulk(ann, url.Values{"action": {"acknowledge"}, "scope": {"all"}, "filter": {"kind=NOPE"}}), http.StatusBadRequest,
			"差异类型：无法识别「NOPE」", `kind: unknown "NOPE"`, "NOPE"},
		// Who is asking.
		{"not a reviewer", get(eve, "/review/"), http.StatusForbidden, "不是复核人", "is not a reviewer", ""},
		{"no identity", func(string) request { return request{method: "GET", path: "/review/", peer: untrusted, who: ann} },
			http.StatusUnauthorized, "请通过财务登录代理登录", "401 unauthorized: sign in through the finance sign-in proxy", ""},
	}
}

var (
	errorLine   = regexp.MustCompile(`(?s)<div class="error" role="alert" id="error">(.*?)</div>`)
	refusedCell = regexp.MustCompile(`(?s)<table id="refused">.*?<td><a [^>]*>\d+</a></td><td>(.*?)</td>`)
	heading     = regexp.MustCompile(`(?s)<h1>(.*?)</h1>`)
)

// messageOf is what a response tells the person: a plain error's text, or on a page the
// error line, else a bulk move's first refusal, else the heading (the "no such finding"
// page).
func messageOf(w *httptest.ResponseRecorder) string {
	body := w.Body.String()
	if !strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") {
		return strings.TrimSpace(body)
	}
	for _, re := range []*regexp.Regexp{errorLine, refusedCell, heading} {
		if m := re.FindStringSubmatch(body); m != nil {
			return strings.TrimSpace(html.UnescapeString(m[1]))
		}
	}
	return "(no message on the page)"
}

// englishWords are the words of two Latin letters or more in msg that are not identifiers:
// an address, a setting, a format's or an encoding's name, the value echo the person typed.
func englishWords(msg, echo string) []string {
	for _, id := range []*regexp.Regexp{regexp.MustCompile(`[\w.+-]+@[\w.-]+`), regexp.MustCompile(`RECONCILER_[A-Z_]+`),
		regexp.MustCompile(`\b(?:csv|xlsx|html|UTF-8)\b`)} {
		msg = id.ReplaceAllString(msg, " ")
	}
	if echo != "" {
		msg = strings.ReplaceAll(msg, echo, " ")
	}
	return regexp.MustCompile(`[A-Za-z]{2,}`).FindAllString(msg, -1)
}

func hasCJK(s string) bool {
	for _, r := range s {
		if r >= 0x4e00 && r <= 0x9fff {
			return true
		}
	}
	return false
}
