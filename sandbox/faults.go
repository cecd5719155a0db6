package sandbox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// transportFault applies the faults that happen before any answer: latency, hangs and a
// proxy's error page. It reports whether the request is finished.
func (s *Sandbox) transportFault(w http.ResponseWriter, r *http.Request, f Fault) bool {
	if d := f.delay(); d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return true
		case <-s.closed:
			return true
		}
	}
	if f.Hang {
		select {
		case <-r.Context().Done():
		case <-s.closed:
		}
		return true
	}
	if f.HTTPStatus != 0 {
		// What a load balancer in front of the platform sends: HTML, unsigned.
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(f.HTTPStatus)
		fmt.Fprintf(w, "<html><head><title>%d %s</title></head><body><center><h1>%d %s</h1></center></body></html>\n",
			f.HTTPStatus, http.StatusText(f.HTTPStatus), f.HTTPStatus, http.StatusText(f.HTTPStatus))
		return true
	}
	return false
}

// writeBody writes an answer; with Truncate it declares the full length, sends half and
// cuts the connection, as a dying proxy would.
func writeBody(w http.ResponseWriter, status int, contentType string, body []byte, f Fault) {
	if contentType != "" {
		w.Header().Set("Content-Type", contentType)
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	if f.Truncate && len(body) > 1 {
		_, _ = w.Write(body[:len(body)/2])
		if fl, ok := w.(http.Flusher); ok {
			fl.Flush()
		}
		panic(http.ErrAbortHandler) // net/http closes the connection without logging
	}
	_, _ = w.Write(body)
}

// field is one member of an ordered JSON object: the platforms' answers have a field order
// and the signature covers the bytes, so the sandbox writes them in order.
type field struct {
	k string
	v any
}

// object writes {"k":v,...} in order, skipping nil and empty-string values, without Go's
// HTML escaping.
func object(fields ...field) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	first := true
	for _, f := range fields {
		if f.v == nil {
			continue
		}
		if s, ok := f.v.(string); ok && s == "" {
			continue
		}
		if !first {
			b.WriteByte(',')
		}
		first = false
		b.Write(marshal(f.k))
		b.WriteByte(':')
		if raw, ok := f.v.(json.RawMessage); ok {
			b.Write(raw)
		} else {
			b.Write(marshal(f.v))
		}
	}
	b.WriteByte('}')
	return b.Bytes()
}

func marshal(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return bytes.TrimRight(b.Bytes(), "\n")
}

// tamper changes one byte of a signed body after signing: the first digit after key (an
// amount), or else the first letter after `"msg":"`.
func tamper(body []byte, key string) []byte {
	out := append([]byte(nil), body...)
	if i := bytes.Index(out, []byte(`"`+key+`":`)); i >= 0 {
		for j := i + len(key) + 3; j < len(out); j++ {
			if out[j] >= '0' && out[j] <= '9' {
				out[j] = '0' + (out[j]-'0'+1)%10
				return out
			}
		}
	}
	for j := 0; j < len(out); j++ {
		if out[j] >= 'a' && out[j] <= 'z' {
			out[j] -= 'a' - 'A'
			return out
		}
	}
	return append(out, ' ')
}

func jsonRaw(b []byte) json.RawMessage { return json.RawMessage(b) }
