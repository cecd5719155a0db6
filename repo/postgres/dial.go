package postgres

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// OpenWithTimeout is Open with a deadline on every read and write of every connection: a
// PostgreSQL that stops answering without closing the connection (a half-open TCP
// connection: a dead NAT entry, a failed-over host, a partitioned network) otherwise holds
// a worker forever, since a cancelled context only sends a cancel request the same dead
// path swallows. The deadline is per network call, so it bounds each statement's wait
// for its answer, not a transaction; an idle pooled connection never reads and never
// times out. timeout 0 is Open.
func OpenWithTimeout(ctx context.Context, url string, timeout time.Duration) (*sqlx.DB, error) {
	if timeout <= 0 {
		return Open(ctx, url)
	}
	connector, err := pq.NewConnector(url)
	if err != nil {
		return nil, fmt.Errorf("open database: %w", err)
	}
	connector.Dialer(deadlineDialer{timeout: timeout})
	return ping(ctx, sqlx.NewDb(sql.OpenDB(connector), "postgres"))
}

// deadlineDialer dials TCP (with keepalive, so a peer that vanished is also noticed by
// the kernel) and wraps each connection in a deadlineConn.
type deadlineDialer struct{ timeout time.Duration }

func (d deadlineDialer) Dial(network, address string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, address)
}

func (d deadlineDialer) DialTimeout(network, address string, timeout time.Duration) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	return d.DialContext(ctx, network, address)
}

func (d deadlineDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	nd := net.Dialer{Timeout: d.timeout, KeepAlive: d.timeout / 2}
	c, err := nd.DialContext(ctx, network, address)
	if err != nil {
		return nil, err
	}
	return &deadlineConn{Conn: c, timeout: d.timeout}, nil
}

// deadlineConn moves its deadline before each read and write. The driver's own deadlines
// (connect_timeout during the handshake) are overridden: ours is the shorter in practice,
// and it is what keeps a stalled handshake from hanging too.
type deadlineConn struct {
	net.Conn
	timeout time.Duration
}

func (c *deadlineConn) Read(b []byte) (int, error) {
	if err := c.Conn.SetReadDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Read(b)
}

func (c *deadlineConn) Write(b []byte) (int, error) {
	if err := c.Conn.SetWriteDeadline(time.Now().Add(c.timeout)); err != nil {
		return 0, err
	}
	return c.Conn.Write(b)
}
