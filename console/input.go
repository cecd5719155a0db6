package console

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"
)

// textOnly refuses, once for every page, a query or a posted form whose parameter names or
// values are not text: a NUL byte or invalid UTF-8 (a stray %00, %ff or an overlong %c0%af, typed, pasted or
// sent by a scanner). PostgreSQL refuses both, so they would otherwise reach the database
// and come back as a 500 logged at error level, although they are the asker's mistake: a 400
// in the page's language, logged at info.
func (h *handler) textOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := notText(r.URL.RawQuery)
		if !ok && r.Method == http.MethodPost {
			// A form's fields (a note, a resolution) reach the database the same way. What
			// does not parse is the form handler's to refuse.
			if err := r.ParseForm(); err == nil {
				name, ok = notTextValues(r.PostForm)
			}
		}
		if ok {
			h.log.Info().Str("person", viewerFrom(r.Context()).Email).Str("path", r.URL.Path).Str("param", name).
				Msg("review console: query that is not text refused")
			fail(w, r, http.StatusBadRequest, problemf("bad_bytes"))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// notText names (quoted, clipped: it came from the asker) the first query parameter whose
// name or value is not text. It reads the query as the pages do (url.Values), so what they
// would read is what is checked; a pair whose escapes do not decode is dropped by both.
func notText(rawQuery string) (string, bool) {
	vals, _ := url.ParseQuery(rawQuery) //nolint:errcheck // the pairs that decode are what the pages see
	return notTextValues(vals)
}

// notTextValues is notText over parsed values: a query's or a posted form's.
func notTextValues(vals url.Values) (string, bool) {
	for name, vs := range vals {
		bad := !isText(name)
		for _, v := range vs {
			bad = bad || !isText(v)
		}
		if bad {
			if len(name) > 64 {
				name = name[:64]
			}
			return strconv.QuoteToASCII(name), true
		}
	}
	return "", false
}

// isText is valid UTF-8 without a NUL byte: what a PostgreSQL text value may hold.
func isText(s string) bool { return utf8.ValidString(s) && !strings.ContainsRune(s, 0) }
