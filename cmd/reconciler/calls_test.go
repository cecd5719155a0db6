package main

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/payrecon/payrecon/platformclient/alipay"
)

// callRecorder stands in front of the platform (the in-process sandbox, or a proxy to a
// sandbox process) and notes every query as it arrives: when, for which merchant account,
// and whether the platform answered with its throttle. The budget tests judge the budget
// where the platform sees it, not by what the worker says about itself.
type callRecorder struct {
	next http.Handler

	mu    sync.Mutex
	calls []recordedCall
}

type recordedCall struct {
	at        time.Time
	merchant  string
	throttled bool
}

var wechatMchID = regexp.MustCompile(`mchid="([^"]*)"`)

func (rec *callRecorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	merchant, isQuery := rec.queryAccount(r)
	if !isQuery {
		rec.next.ServeHTTP(w, r)
		return
	}
	tw := &throttleWatcher{ResponseWriter: w}
	rec.next.ServeHTTP(tw, r)
	rec.mu.Lock()
	rec.calls = append(rec.calls, recordedCall{at: at, merchant: merchant, throttled: tw.throttled})
	rec.mu.Unlock()
}

// queryAccount names the account of a query request: Alipay's app_id (form or URL), WeChat
// Pay's mchid (in the Authorization header). The body is read and put back for the sandbox.
func (rec *callRecorder) queryAccount(r *http.Request) (string, bool) {
	switch {
	case r.URL.Path == "/gateway.do":
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		form, _ := url.ParseQuery(string(body))
		for k, v := range r.URL.Query() {
			form[k] = append(form[k], v...)
		}
		return form.Get("app_id"), form.Get("method") == alipay.MethodTradeQuery
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v3/pay/partner/transactions/"):
		// A service provider's call for its sub-merchant: the sub-merchant's query.
		return r.URL.Query().Get("sub_mchid"), true
	case r.Method == http.MethodGet && strings.HasPrefix(r.URL.Path, "/v3/pay/transactions/"):
		m := wechatMchID.FindStringSubmatch(r.Header.Get("Authorization"))
		if m == nil {
			return "", true
		}
		return m[1], true
	}
	return "", false
}

// throttleWatcher sees the platform's throttle answer go by: WeChat Pay's 429, Alipay's
// code 40005 in a 200 answer.
type throttleWatcher struct {
	http.ResponseWriter
	throttled bool
}

func (t *throttleWatcher) WriteHeader(status int) {
	if status == http.StatusTooManyRequests {
		t.throttled = true
	}
	t.ResponseWriter.WriteHeader(status)
}

func (t *throttleWatcher) Write(b []byte) (int, error) {
	if bytes.Contains(b, []byte(`"code":"40005"`)) {
		t.throttled = true
	}
	return t.ResponseWriter.Write(b)
}

func (t *throttleWatcher) Flush() {
	if f, ok := t.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// account returns one account's calls (every account's for merchant ""), oldest first.
func (rec *callRecorder) account(merchant string) callSeries {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	var s callSeries
	for _, c := range rec.calls {
		if merchant == "" || c.merchant == merchant {
			s = append(s, c)
		}
	}
	sort.Slice(s, func(i, j int) bool { return s[i].at.Before(s[j].at) })
	return s
}

// callSeries is one account's queries as the platform received them, oldest first.
type callSeries []recordedCall

func (s callSeries) throttles() int {
	n := 0
	for _, c := range s {
		if c.throttled {
			n++
		}
	}
	return n
}

// steadyRate is calls per second over the busy interval with its first and last trim cut
// off: start-up (processes connecting, the first take) and the tail (the last shard
// finishing alone) are not what a budget is judged by.
func (s callSeries) steadyRate(trim time.Duration) (rate float64, from, to time.Time) {
	if len(s) < 2 {
		return 0, time.Time{}, time.Time{}
	}
	from, to = s[0].at.Add(trim), s[len(s)-1].at.Add(-trim)
	if !to.After(from) {
		return 0, from, to
	}
	n := 0
	for _, c := range s {
		if !c.at.Before(from) && c.at.Before(to) {
			n++
		}
	}
	return float64(n) / to.Sub(from).Seconds(), from, to
}

// busy is the time from the first call to the last.
func (s callSeries) busy() time.Duration {
	if len(s) < 2 {
		return 0
	}
	return s[len(s)-1].at.Sub(s[0].at)
}

// maxInWindow is the most calls in any window of length w.
func (s callSeries) maxInWindow(w time.Duration) int {
	best, lo := 0, 0
	for hi := range s {
		for s[hi].at.Sub(s[lo].at) >= w {
			lo++
		}
		best = max(best, hi-lo+1)
	}
	return best
}

// longestGap is the longest time between two consecutive calls.
func (s callSeries) longestGap() time.Duration {
	var gap time.Duration
	for i := 1; i < len(s); i++ {
		gap = max(gap, s[i].at.Sub(s[i-1].at))
	}
	return gap
}

// rateBetween is calls per second in [from, to).
func (s callSeries) rateBetween(from, to time.Time) float64 {
	if !to.After(from) {
		return 0
	}
	n := 0
	for _, c := range s {
		if !c.at.Before(from) && c.at.Before(to) {
			n++
		}
	}
	return float64(n) / to.Sub(from).Seconds()
}
