package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/lib/pq"
)

func TestConnectionLost(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"bad connection", fmt.Errorf("save run 1: %w", driver.ErrBadConn), true},
		{"reset by peer", &net.OpError{Op: "read", Net: "tcp", Err: os.NewSyscallError("read", syscall.ECONNRESET)}, true},
		{"read deadline", &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}, true},
		{"eof mid-message", io.ErrUnexpectedEOF, true},
		{"refused while the server restarts", os.NewSyscallError("connect", syscall.ECONNREFUSED), true},
		{"admin shutdown", &pq.Error{Code: "57P01"}, true},
		{"connection failure", &pq.Error{Code: "08006"}, true},
		{"unique violation", &pq.Error{Code: "23505"}, false},
		{"serialization failure", &pq.Error{Code: "40001"}, false},
		{"statement timeout", &pq.Error{Code: "57014"}, false},
		{"cancelled", fmt.Errorf("take: %w", context.Canceled), false},
		{"deadline of the caller", context.DeadlineExceeded, false},
		{"plain", errors.New("no rows"), false},
	}
	for _, c := range cases {
		if got := connectionLost(c.err); got != c.want {
			t.Errorf("%s: connectionLost(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
}

func TestRetryConn(t *testing.T) {
	reset := os.NewSyscallError("read", syscall.ECONNRESET)
	cases := []struct {
		name      string
		errs      []error // what each call returns; past the end, nil
		wantCalls int
		wantErr   bool
	}{
		{"first try", nil, 1, false},
		{"two resets, then the answer", []error{reset, reset}, 3, false},
		{"a dead path gives up", []error{reset, reset, reset, reset}, connAttempts, true},
		{"an answer is not retried", []error{&pq.Error{Code: "23505"}}, 1, true},
	}
	for _, c := range cases {
		calls := 0
		err := retryConn(context.Background(), func() error {
			calls++
			if calls <= len(c.errs) {
				return c.errs[calls-1]
			}
			return nil
		})
		if calls != c.wantCalls || (err != nil) != c.wantErr {
			t.Errorf("%s: %d calls, err %v; want %d calls, error %v", c.name, calls, err, c.wantCalls, c.wantErr)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := 0
	retryConn(ctx, func() error { calls++; return reset }) //nolint:errcheck // only the calls matter
	if calls != 1 {
		t.Errorf("a cancelled pass retried: %d calls", calls)
	}
}
