package httpapi

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/payrecon/payrecon/reconcile"
)

func get(t *testing.T, h http.Handler, method, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, strings.NewReader("")))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

// TestPortsServeOnlyTheirPaths: the callback port has the callbacks and the probes and no
// metrics; the admin port has the metrics and the probes and no review console; the console's
// port has both.
func TestPortsServeOnlyTheirPaths(t *testing.T) {
	review := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "review "+r.URL.Path) }) //nolint:errcheck
	var counted []string
	public := NewCallbackMux(Callbacks{Count: func(p reconcile.Platform, result string) { counted = append(counted, string(p)+" "+result) }})
	cases := []struct {
		name         string
		h            http.Handler
		method, path string
		code         int
		body         string
	}{
		{"callback port: no metrics", public, "GET", "/metrics", http.StatusNotFound, ""},
		{"callback port: healthz", public, "GET", "/healthz", http.StatusOK, "ok"},
		{"callback port: no review", public, "GET", "/review/", http.StatusNotFound, ""},
		{"callback port: alipay without accounts", public, "POST", "/notify/alipay", http.StatusOK, "fail"},
		{"admin: metrics", NewAdminMux(prometheus.NewRegistry(), nil), "GET", "/metrics", http.StatusOK, ""},
		{"admin: healthz", NewAdminMux(prometheus.NewRegistry(), nil), "GET", "/healthz", http.StatusOK, "ok"},
		{"admin without a pinger: no readyz", NewAdminMux(prometheus.NewRegistry(), nil), "GET", "/readyz", http.StatusNotFound, ""},
		{"admin: no review", NewAdminMux(prometheus.NewRegistry(), nil), "GET", "/review/", http.StatusNotFound, ""},
		{"console: review", NewConsoleMux(prometheus.NewRegistry(), nil, review), "GET", "/review/findings/7", http.StatusOK, "review /review/findings/7"},
		{"console: metrics", NewConsoleMux(prometheus.NewRegistry(), nil, review), "GET", "/metrics", http.StatusOK, ""},
		{"console: healthz", NewConsoleMux(prometheus.NewRegistry(), nil, review), "GET", "/healthz", http.StatusOK, "ok"},
		{"console: no callbacks", NewConsoleMux(prometheus.NewRegistry(), nil, review), "POST", "/notify/alipay", http.StatusNotFound, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body := get(t, tc.h, tc.method, tc.path)
			if code != tc.code || !strings.Contains(body, tc.body) {
				t.Fatalf("%s %s: %d %q, want %d containing %q", tc.method, tc.path, code, body, tc.code, tc.body)
			}
		})
	}
	if len(counted) != 1 || counted[0] != "alipay refused_not_configured" {
		t.Fatalf("counted %v, want the one refused alipay callback", counted)
	}
	if NewServer(public).MaxHeaderBytes != 16<<10 {
		t.Fatal("a server without the 16 KiB header bound")
	}
}
