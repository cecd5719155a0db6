package console_test

import (
	"bytes"
	"net/http"
	"strings"
	"testing"
)

// TestLanguagesAmountsAndTimes: Accept-Language picks English or Simplified Chinese; amounts
// read ¥1,234.56; times are in TIMEZONE (Asia/Shanghai here), whatever the database's zone.
func TestLanguagesAmountsAndTimes(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		lang string
		want []string
		not  []string
	}{
		{"", []string{`lang="en"`, "Findings", "Amount differs", "Times in Asia/Shanghai"}, []string{"差异列表"}},
		{"zh-CN,zh;q=0.9,en;q=0.8", []string{`lang="zh-Hans"`, "差异列表", "金额不符", "复核状态"}, []string{"Amount differs"}},
		{"zh-Hans", []string{"差异列表"}, nil},
		{"fr-FR, en;q=0.5", []string{"Findings"}, []string{"差异列表"}},
		{"zh-TW", []string{"差异列表"}, nil}, // the closest we have: Simplified rather than English
	}
	for _, c := range cases {
		body := f.do(t, request{method: "GET", path: "/review/", peer: trusted, who: ann, lang: c.lang}).Body.String()
		for _, w := range c.want {
			if !strings.Contains(body, w) {
				t.Errorf("Accept-Language %q: page lacks %q", c.lang, w)
			}
		}
		for _, n := range c.not {
			if strings.Contains(body, n) {
				t.Errorf("Accept-Language %q: page has %q", c.lang, n)
			}
		}
	}
	body := f.do(t, request{method: "GET", path: findingPath(f.amount), peer: trusted, who: ann}).Body.String()
	for _, want := range []string{
		"¥1,234.56", "¥1,334.56", // ours vs the platform's
		"¥100.00",                                                // at stake
		"2026-11-28 10:00:00",                                    // first seen, China time
		"2026-11-28 12:00:00",                                    // last seen
		"2026-11-28 09:59:00",                                    // the PAID event
		"ORD-1001", "2026112822001", "TRADE_SUCCESS", "Callback", // the event's source, for people
		`<td class="num">3</td>`, // times seen
	} {
		if !strings.Contains(body, want) {
			t.Errorf("finding page lacks %q", want)
		}
	}
	for _, raw := range []string{"at_stake", "platform_trade_no", "AMOUNT_MISMATCH</", "rcYuan"} {
		if strings.Contains(body, ">"+raw) {
			t.Errorf("finding page shows the raw name %q", raw)
		}
	}
	// A finding with no order says so instead of an empty table.
	if body := f.do(t, request{method: "GET", path: findingPath(f.unknown), peer: trusted, who: ann}).Body.String(); !strings.Contains(body, "names no order of ours") {
		t.Errorf("unknown-order page does not say it names no order")
	}
	for _, path := range []string{findingPath(999999), "/review/findings/abc"} {
		if w := f.do(t, request{method: "GET", path: path, peer: trusted, who: ann}); w.Code != http.StatusNotFound {
			t.Errorf("%s: HTTP %d, want 404", path, w.Code)
		}
	}
}

// TestReportDownloads: csv and xlsx download as files, html opens in the browser; each holds
// the period's findings; a bad request is a 400.
func TestReportDownloads(t *testing.T) {
	f := newFixture(t)
	cases := []struct {
		format, ctype, disposition string
		check                      func([]byte) bool
	}{
		{"csv", "text/csv", "attachment", func(b []byte) bool {
			return bytes.Contains(b, []byte("ORD-1001")) && bytes.Contains(b, []byte("GHOST-7"))
		}},
		{"xlsx", "spreadsheetml", "attachment", func(b []byte) bool { return bytes.HasPrefix(b, []byte("PK\x03\x04")) && len(b) > 2000 }},
		{"html", "text/html", "inline", func(b []byte) bool {
			return bytes.Contains(b, []byte("<svg")) && bytes.Contains(b, []byte("ORD-1001")) && !bytes.Contains(b, []byte("<script"))
		}},
	}
	for _, c := range cases {
		w := f.do(t, request{method: "GET", path: "/review/report?from=2026-11-28&to=2026-11-28&format=" + c.format, peer: trusted, who: ann})
		if w.Code != http.StatusOK || !strings.Contains(w.Header().Get("Content-Type"), c.ctype) ||
			!strings.HasPrefix(w.Header().Get("Content-Disposition"), c.disposition+`; filename="payrecon-report-2026-11-28-to-2026-11-28.`+c.format) ||
			!c.check(w.Body.Bytes()) {
			t.Errorf("%s: HTTP %d %q %q (%d bytes)", c.format, w.Code, w.Header().Get("Content-Type"), w.Header().Get("Content-Disposition"), w.Body.Len())
		}
	}
	// The period is the chosen days only: the paid-after-close finding (25 Nov) is not in 28 Nov's.
	if w := f.do(t, request{method: "GET", path: "/review/report?from=2026-11-28&to=2026-11-28&format=csv", peer: trusted, who: ann}); strings.Contains(w.Body.String(), "ORD-2002") {
		t.Errorf("28 Nov's report holds a finding of 25 Nov")
	}
	zh := f.do(t, request{method: "GET", path: "/review/report?from=2026-11-28&to=2026-11-28&format=html", peer: trusted, who: ann, lang: "zh-CN"})
	if !strings.Contains(zh.Body.String(), "对账报告") {
		t.Errorf("a Chinese reader's HTML report is not in Chinese")
	}
	for _, q := range []string{"format=pdf&from=2026-11-28&to=2026-11-28", "format=csv", "format=csv&from=2026-11-28&to=yesterday", "format=csv&from=2026-11-29&to=2026-11-28"} {
		if w := f.do(t, request{method: "GET", path: "/review/report?" + q, peer: trusted, who: ann}); w.Code != http.StatusBadRequest {
			t.Errorf("%s: HTTP %d, want 400", q, w.Code)
		}
	}
}
