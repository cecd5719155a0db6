package console_test

import (
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/payrecon/payrecon/config"
)

// providerAccounts is the accounts file the provider tests' console reads: the fixture's
// Alipay app 2021000000000001 and WeChat Pay merchant 1900000001 are direct merchants, its
// WeChat Pay merchant 1900000002 is a sub-merchant of the service provider 1900000109, and
// the third-party app 2021000000000009 calls for 2021000000000101. Every key, certificate,
// API v3 key and token path is under {{absent}}, a directory that does not exist: the
// console's pod mounts no key Secret.
const providerAccounts = `
alipay:
  - app_id: "2021000000000001"
    private_key_file: {{absent}}/app.pem
    public_key_file: {{absent}}/alipay.pem
  - app_id: "2021000000000009"
    private_key_file: {{absent}}/isv.pem
    app_cert_file: {{absent}}/isv-app.crt
    alipay_cert_file: {{absent}}/isv-alipay.crt
    alipay_root_cert_file: {{absent}}/isv-root.crt
    qps: 200
    sub_merchants:
      - auth_app_id: "2021000000000101"
        app_auth_token_file: {{absent}}/2021000000000101.token
wechatpay:
  - mchid: "1900000001"
    serial_no: 3775B6A45ACD588826D15E583A95F5DD00000000
    private_key_file: {{absent}}/mch.pem
    apiv3_key_file: {{absent}}/mch-v3.key
  - sp_mchid: "1900000109"
    serial_no: 3775B6A45ACD588826D15E583A95F5DD00000001
    private_key_file: {{absent}}/sp.pem
    apiv3_key_file: {{absent}}/sp-v3.key
    public_key_id: PUB_KEY_ID_0119000001092026
    public_key_file: {{absent}}/sp-pub.pem
    qps: 200
    sub_merchants:
      - sub_mchid: "1900000002"
      - sub_mchid: "1900000203"
`

// providerSettings are the tests' console settings with providerAccounts read as `reconciler
// console` reads it: its structure alone, no key file opened.
func providerSettings(t *testing.T) config.Console {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "accounts.yaml")
	must(t, os.WriteFile(path, []byte(strings.ReplaceAll(providerAccounts, "{{absent}}", filepath.Join(dir, "not-mounted"))), 0o600))
	accts, err := config.LoadAccountsStructure(path)
	if err != nil {
		t.Fatalf("the console could not read an accounts file without its key files: %v", err)
	}
	cs := consoleSettings()
	cs.Accounts = accts
	return cs
}

// newProviderFixture is the fixture's findings and statements under a console that knows
// providerAccounts, with a finding of the Alipay sub-merchant beside them; it returns that
// finding's id too.
func newProviderFixture(t *testing.T) (*fixture, int64) {
	t.Helper()
	f := newFixtureWith(t, providerSettings(t))
	f.seedStatements(t)
	var isvSub int64
	must(t, f.db.Get(&isvSub, `INSERT INTO reconcile_mismatches (platform, merchant_id, out_trade_no, platform_trade_no, kind,
		platform_amount_minor, platform_status, first_seen_at, last_seen_at)
		VALUES ('alipay', '2021000000000101', 'GHOST-ISV', '2026112822009', 'UNKNOWN_ORDER', 8800, 'TRADE_SUCCESS', $1, $1) RETURNING id`,
		base.Add(30*time.Minute)))
	return f, isvSub
}

// rowText is the text of the table row that begins with marker, tags dropped ("" if none).
func rowText(body, marker string) string {
	i := strings.Index(body, marker)
	if i < 0 {
		return ""
	}
	row := body[i:]
	return tagRe.ReplaceAllString(row[:strings.Index(row, "</tr>")], " ")
}

// TestPagesNameTheProviderOfASubMerchant: wherever a page shows a merchant account (the
// findings list, the by-account summary, a finding's card and evidence, the statements and
// the days not reconciled, a day's bill lines) a sub-merchant is shown with its provider,
// in English and in Chinese; a direct merchant is shown as before, with none.
func TestPagesNameTheProviderOfASubMerchant(t *testing.T) {
	f, isvSub := newProviderFixture(t)
	for _, l := range []struct{ lang, via, viaISV string }{
		{"en", "via provider 1900000109", "via provider 2021000000000009"},
		{"zh-CN,zh;q=0.9", "服务商 1900000109", "服务商 2021000000000009"},
	} {
		get := func(path string) string {
			t.Helper()
			w := f.do(t, request{method: "GET", path: path, peer: trusted, who: ann, lang: l.lang})
			if w.Code != http.StatusOK {
				t.Fatalf("%s %s: HTTP %d\n%s", l.lang, path, w.Code, w.Body.String())
			}
			return w.Body.String()
		}
		list, pac, direct := get("/review/"), get(findingPath(f.pac)), get(findingPath(f.amount))
		statements := get("/review/statements?from=2026-11-22&to=2026-11-28")
		missing := statements[strings.Index(statements, `id="missing"`):]
		cases := []struct {
			name, text, want string // want "": no provider at all
		}{
			{"list: wechat sub-merchant", rowText(list, `value="`+itoa(f.pac)+`.`), l.via},
			{"list: alipay sub-merchant", rowText(list, `value="`+itoa(isvSub)+`.`), l.viaISV},
			{"list: direct merchant", rowText(list, `value="`+itoa(f.amount)+`.`), ""},
			{"by account: sub-merchant", rowText(list, `data-account="wechatpay:1900000002"`), l.via},
			{"by account: direct merchant", rowText(list, `data-account="alipay:2021000000000001"`), ""},
			{"finding: card", between(pac, `id="finding-account"`, "</div>"), l.via},
			{"finding: evidence", between(pac, `<td class="merchant">`, "</tr>"), l.via},
			{"finding of a direct merchant", direct[strings.Index(direct, "<main>"):], ""},
			{"statements: sub-merchant", rowText(statements, `data-account="wechatpay:1900000002"`), l.via},
			{"statements: direct merchant", rowText(statements, `data-account="alipay:2021000000000001"`), ""},
			{"not reconciled: sub-merchant", rowText(missing, `<tr><td>2026-11-26</td><td>`+platformName(l.lang)+`</td>`), l.via},
			{"bill lines: sub-merchant", between(get("/review/statements/wechatpay/1900000002/2026-11-27"), "<h1>", "</h1>"), l.via},
			{"bill lines: direct merchant", between(get("/review/statements/alipay/2021000000000001/2026-11-28"), "<h1>", "</h1>"), ""},
		}
		for _, c := range cases {
			switch {
			case c.text == "":
				t.Errorf("%s: %s: the page shows no such merchant", l.lang, c.name)
			case c.want != "" && strings.Count(c.text, c.want) != 1:
				t.Errorf("%s: %s: want %q once in %q", l.lang, c.name, c.want, c.text)
			case c.want == "" && (strings.Contains(c.text, "via provider") || strings.Contains(c.text, "服务商")):
				t.Errorf("%s: %s: a direct merchant shown with a provider: %q", l.lang, c.name, c.text)
			}
		}
		// The finding of a sub-merchant names its provider twice: its card and its evidence.
		if n := strings.Count(pac, l.via); n != 2 {
			t.Errorf("%s: the sub-merchant's finding names its provider %d times, want 2", l.lang, n)
		}
	}
}

// TestProviderFilterNarrowsTheList: the provider filter shows one provider's sub-merchants
// alone, on either platform, with the other filters and the pages still applied; an
// unknown provider is a 400 naming the field; a bulk move over all that matches takes
// exactly what the list showed. A console without an accounts file offers no such filter.
func TestProviderFilterNarrowsTheList(t *testing.T) {
	f, isvSub := newProviderFixture(t)
	ids := regexp.MustCompile(`name="sel" value="([0-9]+)\.`)
	list := func(query string) (int, []string, string) {
		t.Helper()
		w := f.do(t, request{method: "GET", path: "/review/?" + query, peer: trusted, who: ann})
		var got []string
		for _, m := range ids.FindAllStringSubmatch(w.Body.String(), -1) {
			got = append(got, m[1])
		}
		slices.Sort(got)
		return w.Code, got, w.Body.String()
	}
	for _, c := range []struct {
		name, query string
		want        []string
	}{
		{"WeChat Pay provider", "provider=1900000109", []string{itoa(f.pac)}},
		{"Alipay provider", "provider=2021000000000009", []string{itoa(isvSub)}},
		{"provider and a kind of none of its findings", "provider=1900000109&kind=AMOUNT_MISMATCH", nil},
		{"provider and a merchant not its own", "provider=1900000109&merchant=1900000001", nil},
		{"no provider", "", sorted(itoa(f.amount), itoa(f.unknown), itoa(f.pac), itoa(isvSub))},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, got, body := list(c.query)
			if code != http.StatusOK || !slices.Equal(got, c.want) {
				t.Fatalf("HTTP %d, findings %v, want %v", code, got, c.want)
			}
			if c.query != "" && !strings.Contains(body, `<input type="hidden" name="filter" value="`) && len(c.want) > 0 {
				t.Fatalf("no bulk form")
			}
		})
	}

	// The filter offers each provider once, with its platform, and keeps the choice.
	_, _, body := list("provider=1900000109")
	for _, want := range []string{`<select name="provider">`, `<option value="1900000109" selected>1900000109 (WeChat Pay)</option>`,
		`<option value="2021000000000009">2021000000000009 (Alipay)</option>`, `name="filter" value="` + "provider=1900000109"} {
		if !strings.Contains(body, want) {
			t.Errorf("the filtered list lacks %q", want)
		}
	}

	// An id that names no provider is refused, naming the field, in both languages.
	for _, l := range []struct{ lang, want string }{{"en", "provider"}, {"zh-CN", "服务商"}} {
		w := f.do(t, request{method: "GET", path: "/review/?provider=1900000001", peer: trusted, who: ann, lang: l.lang})
		if msg := between(w.Body.String(), `id="error">`, "</div>"); w.Code != http.StatusBadRequest || !strings.Contains(msg, l.want) ||
			!strings.Contains(msg, "1900000001") {
			t.Errorf("%s: unknown provider: HTTP %d, error %q", l.lang, w.Code, msg)
		}
	}

	// Bulk, all that match: the count and the findings carried are the provider's alone.
	csrf := csrfRe.FindStringSubmatch(body)[1]
	w := f.do(t, request{method: "POST", path: "/review/bulk", peer: trusted, who: ann, values: url.Values{"csrf": {csrf},
		"action": {"acknowledge"}, "scope": {"all"}, "filter": {"provider=1900000109"}}})
	sels := regexp.MustCompile(`name="sel" value="([0-9]+)\.[0-9]+"`).FindAllStringSubmatch(w.Body.String(), -1)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "Confirm (1)") || len(sels) != 1 || sels[0][1] != itoa(f.pac) {
		t.Errorf("bulk over the provider's findings: HTTP %d, %d carried\n%s", w.Code, len(sels), w.Body.String())
	}

	// Without an accounts file: no provider filter, and a provider asked for names none.
	plain := newFixture(t)
	pw := plain.do(t, request{method: "GET", path: "/review/", peer: trusted, who: ann})
	if strings.Contains(pw.Body.String(), `name="provider"`) || strings.Contains(pw.Body.String(), "via provider") {
		t.Errorf("a console without an accounts file shows providers")
	}
	if pw := plain.do(t, request{method: "GET", path: "/review/?provider=1900000109", peer: trusted, who: ann}); pw.Code != http.StatusBadRequest {
		t.Errorf("a provider filter without an accounts file: HTTP %d, want 400", pw.Code)
	}
}

func sorted(s ...string) []string { slices.Sort(s); return s }

// between is the part of s after the first from, up to the next to ("" if from is absent).
func between(s, from, to string) string {
	i := strings.Index(s, from)
	if i < 0 {
		return ""
	}
	rest := s[i+len(from):]
	if j := strings.Index(rest, to); j >= 0 {
		return rest[:j]
	}
	return rest
}

// platformName is WeChat Pay's name on a page in lang.
func platformName(lang string) string {
	if strings.HasPrefix(lang, "zh") {
		return "微信支付"
	}
	return "WeChat Pay"
}
