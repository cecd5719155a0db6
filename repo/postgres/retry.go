package postgres

import (
	"context"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/lib/pq"
)

// connAttempts bounds retryConn: a reset or a failover costs one retry or two; a path that
// stays dead (each attempt waiting out RECONCILER_DATABASE_TIMEOUT) should fail the
// statement soon rather than hold the pass.
const connAttempts = 3

// retryConn runs op, an idempotent statement, again after a short pause when the
// connection under it broke (reset, closed, timed out, or the server shutting down): the
// pool dials a fresh connection for the next attempt. Without it a single connection reset
// in the middle of a pass ends the pass (its taking query fails), leaves its run row
// "running" (the final save fails) and strands its leases (releasing them fails). Only
// statements whose repetition changes nothing belong here: never an INSERT, never a
// transaction.
func retryConn(ctx context.Context, op func() error) error {
	pause := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := op()
		if err == nil || attempt == connAttempts || !connectionLost(err) || ctx.Err() != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(pause):
		}
		pause *= 4
	}
}

// connectionLost tells a broken connection from an answer: a statement PostgreSQL refused
// (a constraint, a serialization failure, a cancelled context) is not retried here.
func connectionLost(err error) bool {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		// Class 08: connection exception; 57P01-57P03: the server is shutting down or
		// not yet accepting connections (a failover in progress).
		return pqErr.Code.Class() == "08" || pqErr.Code == "57P01" || pqErr.Code == "57P02" || pqErr.Code == "57P03"
	}
	var netErr net.Error
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, net.ErrClosed) || errors.As(err, &netErr)
}
