package console_test

import (
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

// TestAuditTableBreaksNoToken: on a finding's page, in both languages, the audit history
// never breaks a word inside. The style sheet has no rule that breaks inside words
// (overflow-wrap: anywhere was one); the time, the person, the action, the statuses and the
// resolution sit in cells (or spans) kept on one line; only the note wraps, at spaces and
// between CJK characters; the table scrolls in its own box when it is wider than the page.
func TestAuditTableBreaksNoToken(t *testing.T) {
	f := newFixture(t)
	propose := map[string]string{"version": "1", "resolution": "written_off", "note": "below cost, 低于成本: ticket FIN-2026-11-0042",
		"csrf": f.tokenFor(t, ann)}
	if w := f.do(t, request{method: "POST", path: actionPath(f.pac, "resolve"), peer: trusted, who: ann, form: propose}); w.Code != http.StatusSeeOther {
		t.Fatalf("propose: HTTP %d", w.Code)
	}
	approve := map[string]string{"version": "1", "csrf": f.tokenFor(t, cfo)}
	if w := f.do(t, request{method: "POST", path: actionPath(f.pac, "approve"), peer: trusted, who: cfo, form: approve}); w.Code != http.StatusSeeOther {
		t.Fatalf("approve: HTTP %d", w.Code)
	}
	for _, lang := range []string{"en", "zh-CN"} {
		page := f.do(t, request{method: "GET", path: findingPath(f.pac), peer: trusted, who: ann, lang: lang}).Body.String()
		style := page[strings.Index(page, "<style>"):strings.Index(page, "</style>")]
		for _, bad := range []string{"anywhere", "break-all", "hyphens"} {
			if strings.Contains(style, bad) {
				t.Errorf("%s: the style sheet breaks inside words (%s)", lang, bad)
			}
		}
		if !regexp.MustCompile(`td\.nowrap,td \.nowrap\{white-space:nowrap\}`).MatchString(style) || !strings.Contains(style, "td.note{white-space:normal") {
			t.Errorf("%s: the style sheet keeps no cell on one line", lang)
		}
		doc, err := html.Parse(strings.NewReader(page))
		must(t, err)
		table := byID(doc, "audit")
		if table == nil || table.Parent == nil || attr(table.Parent, "class") != "wide" {
			t.Fatalf("%s: no audit table in a scrolling box", lang)
		}
		rows := 0
		walkNodes(table, func(tr *html.Node) {
			if tr.Data != "tr" || attr(tr, "data-action") == "" {
				return
			}
			rows++
			var tds []*html.Node
			for c := tr.FirstChild; c != nil; c = c.NextSibling {
				if c.Type == html.ElementNode && c.Data == "td" {
					tds = append(tds, c)
				}
			}
			// when, who, action, from, to, resolution: whole tokens; the version a number;
			// the note prose.
			for i, td := range tds[:6] {
				if !oneLine(td) {
					t.Errorf("%s: audit cell %d (%q) may wrap inside", lang, i, textContent(td))
				}
			}
			if attr(tds[6], "class") != "num" || attr(tds[7], "class") != "note" {
				t.Errorf("%s: version cell %q, note cell %q", lang, attr(tds[6], "class"), attr(tds[7], "class"))
			}
		})
		if rows != 2 {
			t.Errorf("%s: %d audit rows, want the proposal and the approval", lang, rows)
		}
	}
}

// oneLine says whether every piece of text in td is kept on one line: td itself is nowrap,
// or each of its elements holding text is.
func oneLine(td *html.Node) bool {
	if slices.Contains(strings.Fields(attr(td, "class")), "nowrap") || attr(td, "class") == "num" {
		return true
	}
	ok := true
	for c := td.FirstChild; c != nil; c = c.NextSibling {
		switch {
		case c.Type == html.TextNode && strings.TrimSpace(c.Data) != "":
			ok = false // bare text in a cell that wraps
		case c.Type == html.ElementNode && !slices.Contains(strings.Fields(attr(c, "class")), "nowrap"):
			ok = false
		}
	}
	return ok
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func byID(n *html.Node, id string) *html.Node {
	var found *html.Node
	walkNodes(n, func(c *html.Node) {
		if found == nil && attr(c, "id") == id {
			found = c
		}
	})
	return found
}

func walkNodes(n *html.Node, fn func(*html.Node)) {
	if n.Type == html.ElementNode {
		fn(n)
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		walkNodes(c, fn)
	}
}

func textContent(n *html.Node) string {
	if n.Type == html.TextNode {
		return n.Data
	}
	var b strings.Builder
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		b.WriteString(textContent(c))
	}
	return b.String()
}
