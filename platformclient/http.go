package platformclient

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// MaxBodyBytes bounds how much of an answer is read: a trade answer is a few KiB.
const MaxBodyBytes = 1 << 20

// NewHTTPClient returns a client whose transport keeps enough idle connections for a pass's
// workers (the default keeps 2 per host, which makes 64 workers reconnect constantly).
// Timeouts come from the per-attempt context, not from the client.
func NewHTTPClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 256
	t.MaxIdleConnsPerHost = 128
	t.IdleConnTimeout = 90 * time.Second
	return &http.Client{Transport: t}
}

// ErrBodyTooLarge is returned by ReadBody for an answer over MaxBodyBytes.
var ErrBodyTooLarge = errors.New("answer body too large")

// ReadBody reads an answer body whole, bounded by MaxBodyBytes. A connection cut before
// the declared length comes back as an error (io.ErrUnexpectedEOF): a truncated body.
func ReadBody(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxBodyBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read answer: %w", err)
	}
	if len(b) > MaxBodyBytes {
		return nil, ErrBodyTooLarge
	}
	return b, nil
}
