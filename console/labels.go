package console

import (
	"net/http"
	"time"

	"golang.org/x/text/language"

	"github.com/payrecon/payrecon/render"
)

// Languages the console speaks, English first (the fallback).
var (
	langs   = []language.Tag{language.English, language.SimplifiedChinese}
	matcher = language.NewMatcher(langs)
)

// lang picks English or Simplified Chinese from Accept-Language.
func lang(r *http.Request) string {
	tags, _, _ := language.ParseAcceptLanguage(r.Header.Get("Accept-Language"))
	_, idx, _ := matcher.Match(tags...)
	if idx == 1 {
		return "zh"
	}
	return "en"
}

// text is the label of key in lang from render's one table, which the reports read too, so
// the console and the files call a thing by one name: a page's word, or a word of the
// database (a kind, a status, a platform); a missing key shows itself
// (TestEveryLabelKeyThePagesUseExists keeps the pages from asking for one).
func text(lang, key string) string { return render.Label(render.Lang(lang), key) }

// auditName is the label of an audit row's action ("approve" reads "approved", not the
// button's "Approve").
func auditName(lang, action string) string {
	if s := render.Label(render.Lang(lang), "audit."+action); s != "audit."+action {
		return s
	}
	return action
}

// yuan formats minor units as ¥1,234.56.
func yuan(minor int64) string { return render.Yuan(minor) }

// yuanPtr is yuan for a nullable amount ("—" when unknown).
func yuanPtr(minor *int64) string {
	if minor == nil {
		return "—"
	}
	return yuan(*minor)
}

// clock formats a time in the console's zone, with its offset: a time read out of the page
// (into a ticket, a chat, a spreadsheet) still says which instant it was, and "+08:00" is
// unambiguous where an abbreviation such as CST is not.
func clock(t time.Time, loc *time.Location) string {
	return t.In(loc).Format("2006-01-02 15:04:05 -07:00")
}
