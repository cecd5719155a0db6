package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/statement"
)

// statementLockKey is the advisory lock class of statement runs: one run per account at a
// time, so two runs of the same day never stage, hold or record concurrently.
const statementLockKey = 0x73746d74 // "stmt"

// StatementTx is one statement run of one account's day, in ONE transaction on one
// connection: the bill is staged with COPY into a temporary table while it is parsed, then
// classified with a few set-based statements. Nothing it writes is visible before Commit, so a
// bill rejected mid-stream (or a dry run) rolls back and leaves nothing behind.
type StatementTx struct {
	conn  *sqlx.Conn // the transaction's connection: Stage streams COPY data on it directly
	tx    *sqlx.Tx
	pool  *sqlx.DB // the store's pool: Books reads on it while the classification streams on conn
	day   reconcile.StatementDay
	runID int64
}

// BeginStatement opens the day's transaction, waits for the account's statement lock and
// creates the staging table.
func (s *Store) BeginStatement(ctx context.Context, day reconcile.StatementDay, runID int64) (*StatementTx, error) {
	// The transaction itself is not bound to ctx: database/sql rolls a cancelled
	// transaction back from a goroutine of its own, which would then read the connection
	// while a COPY's response loop is still reading it (two readers on one session, caught
	// by the race detector when a signal came mid-stream). Each statement still takes ctx,
	// and the caller's Rollback ends the transaction once the COPY is closed.
	// The connection is held explicitly (not only through the transaction) so that Stage can
	// reach the driver's raw COPY stream on it.
	conn, err := s.db.Connx(context.WithoutCancel(ctx))
	if err != nil {
		return nil, fmt.Errorf("statement %s %s: connect: %w", day.Account, day.Date, err)
	}
	tx, err := conn.BeginTxx(context.WithoutCancel(ctx), nil)
	if err != nil {
		conn.Close()
		return nil, fmt.Errorf("statement %s %s: begin: %w", day.Account, day.Date, err)
	}
	t := &StatementTx{conn: conn, tx: tx, pool: s.db, day: day, runID: runID}
	if _, err := tx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1, hashtext($2))`, statementLockKey, day.Account.String()); err != nil {
		t.Rollback()
		return nil, fmt.Errorf("statement %s %s: lock: %w", day.Account, day.Date, err)
	}
	// The classification hashes a day's lines against the account's orders: with the default
	// work_mem a million-line day spills to 16 batches on disk. This is the server's memory,
	// for one statement at a time per account (the lock above), never this process's.
	if _, err := tx.ExecContext(ctx, `SET LOCAL work_mem = '128MB'`); err != nil {
		t.Rollback()
		return nil, fmt.Errorf("statement %s %s: set work_mem: %w", day.Account, day.Date, err)
	}
	// A day's statements are few and large: the planner's cost of a million-line join called
	// for JIT compilation, with inlining and optimisation, which took 0.8 s of the 2.4 s the
	// join itself took, every run. Interpreted, it is that much quicker.
	if _, err := tx.ExecContext(ctx, `SET LOCAL jit = off`); err != nil {
		t.Rollback()
		return nil, fmt.Errorf("statement %s %s: set jit: %w", day.Account, day.Date, err)
	}
	// The staged bill lives in this session's local buffers: 8 MB by default, so a
	// million-line day (100 MB) went to and came back from temporary files at the COPY and at
	// every scan. A session may raise it only until it first uses its local buffers: a
	// pooled session that staged an earlier day keeps what it had (the block swallows the
	// refusal).
	if _, err := tx.ExecContext(ctx, `DO $$ BEGIN PERFORM set_config('temp_buffers', '256MB', true);
		EXCEPTION WHEN OTHERS THEN NULL; END $$`); err != nil {
		t.Rollback()
		return nil, fmt.Errorf("statement %s %s: set temp_buffers: %w", day.Account, day.Date, err)
	}
	// Temporary: not WAL-logged, private to this session, dropped with the transaction.
	if _, err := tx.ExecContext(ctx, `CREATE TEMP TABLE statement_stage (`+StageColumns+`) ON COMMIT DROP`); err != nil {
		t.Rollback()
		return nil, fmt.Errorf("statement %s %s: create staging table: %w", day.Account, day.Date, err)
	}
	return t, nil
}

// StageColumns is the staging table's shape: one bill line per row, with what matching it
// to an order, and a refund line to a refund, needs. Benchmarks copy into the same shape.
const StageColumns = `line_no integer NOT NULL, kind text NOT NULL, out_trade_no text NOT NULL,
	platform_trade_no text NOT NULL, refund_no text NOT NULL, platform_refund_no text NOT NULL,
	refund_status text NOT NULL, currency text NOT NULL, amount_minor bigint NOT NULL, paid_us bigint NULL`

// warmWait bounds how long WarmConns waits for a connection: past it a worker opens its own.
const warmWait = 5 * time.Second

// WarmConns opens up to n pooled connections at once and gives them back idle, so that n
// workers about to start find their sessions ready: on a busy server a new session costs
// tens, even hundreds, of milliseconds, and a statement run's apply workers would otherwise
// all wait for theirs at once, after the bill is staged. A connection that cannot be opened
// is left to the worker that needs it.
//
// It never waits for the pool: it holds the connections it got until all have come, so
// asking for more than the pool has free would hold the workers' connections while it waits
// for theirs (a statement run whose RECONCILER_CONCURRENCY passed the pool's size hung so).
// It asks for what is free now, and each ask gives up after warmWait.
func (s *Store) WarmConns(ctx context.Context, n int) {
	if st := s.db.Stats(); st.MaxOpenConnections > 0 {
		n = min(n, st.MaxOpenConnections-st.InUse)
	}
	if n <= 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, warmWait)
	defer cancel()
	var mu sync.Mutex
	var wg sync.WaitGroup
	conns := make([]*sql.Conn, 0, n)
	for range n {
		wg.Go(func() {
			if c, err := s.db.Conn(ctx); err == nil {
				mu.Lock()
				conns = append(conns, c)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, c := range conns {
		c.Close() //nolint:errcheck // back to the pool
	}
}

// Rollback abandons everything the transaction wrote and gives the connection back; safe
// after Commit.
func (t *StatementTx) Rollback() {
	t.tx.Rollback() //nolint:errcheck // after a commit or a lost connection there is nothing to undo
	t.conn.Close()  //nolint:errcheck // closed already after a commit
}

// Commit makes the day's records durable.
func (t *StatementTx) Commit() error {
	err := t.tx.Commit()
	t.conn.Close() //nolint:errcheck // the pool takes it back; a broken one is dropped
	if err != nil {
		return fmt.Errorf("statement %s %s: commit: %w", t.day.Account, t.day.Date, err)
	}
	return nil
}

// Stage streams the bill's lines into the staging table with COPY while the reader parses
// them, so the bill is never held in memory. Parsing runs one batch ahead of the COPY in its
// own goroutine, so decoding the file and PostgreSQL's work overlap. Any reader error other
// than io.EOF (a *statement.RejectError above all) is returned as is, and the caller must roll
// back.
func (t *StatementTx) Stage(ctx context.Context, r statement.Reader) (reconcile.StagedBill, error) {
	batches, done := make(chan []statement.Line, stageAhead), make(chan struct{})
	// Copied batches go back to the reader: a million lines in fresh batches were half of
	// what staging allocated, and the collector's work on it was a third of the parse's CPU.
	spare := make(chan []statement.Line, stageAhead+2)
	var readErr error
	go func() {
		defer close(batches)
		readErr = readBatches(r, batches, spare, done)
	}()
	defer func() {
		close(done)
		for range batches { // let the reader goroutine finish before returning
		}
	}()
	var out reconcile.StagedBill
	err := t.conn.Raw(func(dc any) error {
		return hideBadConn(t.copyBatches(ctx, dc, batches, spare, &out, func() error { return readErr }))
	})
	if err != nil {
		return out, err
	}
	// The planner needs the staged row count to join a million lines sensibly; a small
	// sample gives it (and how rare refund lines are) at a tenth of the default's cost.
	if _, err := t.tx.ExecContext(ctx, `SET LOCAL default_statistics_target = 10; ANALYZE statement_stage`); err != nil {
		return out, fmt.Errorf("statement %s %s: analyze staged lines: %w", t.day.Account, t.day.Date, err)
	}
	return out, nil
}

// ErrConnLost: the statement's database session was lost while the bill streamed in; the
// day applied nothing and can be run again.
var ErrConnLost = errors.New("database session lost")

// hideBadConn keeps driver.ErrBadConn (a session lost mid-COPY) from reaching Conn.Raw as
// such: Raw would then close the connection, and closing waits for the statement's
// transaction on it to end, which only the caller's Rollback after Stage returns ends: Stage
// would never return. The connection is found broken and dropped at that Rollback instead.
func hideBadConn(err error) error {
	if errors.Is(err, driver.ErrBadConn) {
		return fmt.Errorf("%w: %s", ErrConnLost, err.Error())
	}
	return err
}

// copyData is lib/pq's COPY statement taking rows already in COPY's text format.
type copyData interface {
	CopyData(ctx context.Context, rows string) (driver.Result, error)
}

// StageColumnNames are StageColumns' names, in order.
var StageColumnNames = []string{"line_no", "kind", "out_trade_no", "platform_trade_no", "refund_no",
	"platform_refund_no", "refund_status", "currency", "amount_minor", "paid_us"}

// copyBatches COPYs every batch into the staging table on the transaction's own driver
// connection (dc). The rows are written here in COPY's text format, a batch per call:
// database/sql's Exec per row (a lock, argument conversion and an allocation per value)
// halved what a client COPY of a million lines achieved, and its CPU is taken from the
// parser and the server on the same cores. readErr is the reader's end, read once the
// batches are closed: a bill that ends in an error returns it, and the caller rolls back
// what was copied.
func (t *StatementTx) copyBatches(ctx context.Context, dc any, batches <-chan []statement.Line, spare chan<- []statement.Line,
	out *reconcile.StagedBill, readErr func() error) error {
	conn, ok := dc.(driver.Conn)
	if !ok {
		return fmt.Errorf("statement %s %s: start COPY: driver connection %T", t.day.Account, t.day.Date, dc)
	}
	st, err := conn.Prepare(pq.CopyIn("statement_stage", StageColumnNames...))
	if err != nil {
		return fmt.Errorf("statement %s %s: start COPY: %w", t.day.Account, t.day.Date, err)
	}
	defer st.Close()
	cd, ok := st.(copyData)
	if !ok {
		return fmt.Errorf("statement %s %s: start COPY: the driver's %T takes no COPY data", t.day.Account, t.day.Date, st)
	}
	var buf []byte
	for batch := range batches {
		if err := ctx.Err(); err != nil { // a signal while the bill streams in: nothing is kept
			return fmt.Errorf("statement %s %s: COPY: %w", t.day.Account, t.day.Date, err)
		}
		buf = buf[:0]
		for _, l := range batch {
			buf = AppendStageRow(buf, l)
			out.Lines++
			out.ReceivedMinor += received(l)
		}
		last := batch[len(batch)-1].No
		select {
		case spare <- batch:
		default:
		}
		// CopyData ends the rows with the newline it adds; its context only watches for a
		// cancel, which the check above does once per batch instead of once per call. It
		// copies the rows into its own buffer before it returns, so they are handed over
		// without a copy of their own (buf is not touched until then).
		rows := unsafe.String(unsafe.SliceData(buf), len(buf)-1)
		if _, err := cd.CopyData(context.Background(), rows); err != nil {
			return fmt.Errorf("statement %s %s: COPY up to line %d: %w", t.day.Account, t.day.Date, last, err)
		}
	}
	if err := readErr(); err != nil { // the channel is closed: the reader is done with it
		return err
	}
	if _, err := st.Exec(nil); err != nil { //nolint:staticcheck // lib/pq finishes a COPY with Exec(nil)
		return fmt.Errorf("statement %s %s: finish COPY: %w", t.day.Account, t.day.Date, err)
	}
	return nil
}

// AppendStageRow writes one line as a row of the staging table (StageColumns) in COPY's text
// format: what Stage sends, and what a benchmark's bare COPY of the same lines sends too.
func AppendStageRow(b []byte, l statement.Line) []byte {
	b = strconv.AppendInt(b, int64(l.No), 10)
	for _, s := range [...]string{string(l.Kind), l.OutTradeNo, l.PlatformTradeNo, l.RefundNo, l.PlatformRefundNo,
		l.RefundStatus, currencyOrDefault(l.Currency)} {
		b = appendCopyText(append(b, '\t'), s)
	}
	b = append(strconv.AppendInt(append(b, '\t'), l.AmountMinor, 10), '\t')
	// A line's time travels as microseconds since the epoch: written and read as a number it
	// costs both sides a fraction of a timestamp's text, and only the lines that come back
	// from the classification are turned into a time again.
	if l.At.IsZero() {
		b = append(b, `\N`...)
	} else {
		b = strconv.AppendInt(b, l.At.UnixMicro(), 10)
	}
	return append(b, '\n')
}

// appendCopyText writes s as a COPY text field: a backslash, tab, newline or carriage return
// in it is escaped (bill text fields are the platform's and the merchant's, and may hold any).
func appendCopyText(b []byte, s string) []byte {
	if !strings.ContainsAny(s, "\\\t\n\r") {
		return append(b, s...)
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			b = append(b, `\\`...)
		case '\t':
			b = append(b, `\t`...)
		case '\n':
			b = append(b, `\n`...)
		case '\r':
			b = append(b, `\r`...)
		default:
			b = append(b, c)
		}
	}
	return b
}

// stageBatch is how many parsed lines travel to the COPY at once: enough to amortise the
// hand-over, small enough that a few batches in flight cost well under a MiB.
const stageBatch = 512

// stageAhead is how many parsed batches may wait for the COPY.
const stageAhead = 4

// readBatches reads r to its end into batches, stopping early when done closes. It fills
// the batches spare gives back before it makes new ones.
func readBatches(r statement.Reader, batches chan<- []statement.Line, spare <-chan []statement.Line, done <-chan struct{}) error {
	next := func() []statement.Line {
		select {
		case b := <-spare:
			return b[:0]
		default:
			return make([]statement.Line, 0, stageBatch)
		}
	}
	batch := next()
	send := func() bool {
		select {
		case batches <- batch:
			batch = next()
			return true
		case <-done:
			return false
		}
	}
	for {
		l, err := r.Next()
		if errors.Is(err, io.EOF) {
			if len(batch) > 0 {
				send()
			}
			return nil
		}
		if err != nil {
			return err
		}
		if batch = append(batch, l); len(batch) == stageBatch && !send() {
			return nil
		}
	}
}

func currencyOrDefault(c string) string {
	if c == "" {
		return reconcile.DefaultCurrency // Alipay bills name no currency
	}
	return c
}

// classifySQL matches every staged line against the account's orders and refunds in ONE
// statement, and holds the day's PAID orders that no line names. A line is matched when our
// books already say what the bill says: a payment, its order PAID or REFUNDED under the same
// trade number, amount and currency; a refund (one the bill gives as finished), that order's
// refund of the same out_refund_no SUCCESS with the same amount and currency. Matched lines
// whose paid_at (succeeded_at) falls on another day are remembered (the held list of that day
// must leave them out). What comes back is only the rest: lines for the apply path, and lines
// an earlier run of the day settled.
//
// The day's lines meet the day's PAID orders (paid_at in the day) in one full join: a
// payment line that finds its order there with the same figures is a plain match, done; an
// order no line finds (of either kind: the platform that refunded a trade knows it was paid)
// goes on the day's held list, unless another day's bill listed it. Drawing the held list
// here, from the join the matching needs anyway, saves hashing a million staged lines a
// second time (3 s of a million-line day). Only the few rows left (lines that are no plain
// match, orders no line named) are materialised (few): a million matched lines held as a CTE
// spilled to disk and cost as much again as the join that found them. The lines left are
// then looked up, one by one (LATERAL, with the LIMIT that keeps the planner from turning
// it back into a join; each is unique anyway), by their own order (any status, any day) and refund
// lines by their refund, as the apply path will see them: the planner cannot know how few
// they are, and joined plainly it hashed all the account's orders to probe them (0.9 s), and
// earlier, a small or empty payment_refunds, the million joined lines.
// The lines come back in no particular order, and as the join finds them: nothing in the
// statement waits for the join's end before the first line is sent (the held list and the
// other day's lines are written after the last), so the apply path can start on the first
// lines while the join is still probing.
// $1 platform, $2 merchant, $3 bill date, $4/$5 the day, $6 run id.
const classifySQL = `
WITH few AS MATERIALIZED (
	SELECT s.line_no, s.kind, s.out_trade_no, s.platform_trade_no, s.refund_no, s.platform_refund_no, s.refund_status,
		s.currency, s.amount_minor, s.paid_us, d.id AS day_order_id, d.out_trade_no AS day_out_trade_no
	FROM statement_stage s
	FULL JOIN (SELECT id, out_trade_no, platform_trade_no, amount_minor, currency FROM payment_orders
		WHERE platform = $1 AND merchant_id = $2 AND status = 'PAID' AND paid_at >= $4 AND paid_at < $5) d
		ON d.out_trade_no = s.out_trade_no
	WHERE s.line_no IS NULL
		OR s.line_no IN (SELECT line_no FROM statement_lines WHERE platform = $1 AND merchant_id = $2 AND bill_date = $3::date)
		OR NOT COALESCE(s.kind = 'payment' AND d.platform_trade_no = s.platform_trade_no
			AND d.amount_minor = s.amount_minor AND d.currency = s.currency, false)
), held AS (
	INSERT INTO statement_held (platform, merchant_id, bill_date, order_id, out_trade_no, refund_id, out_refund_no)
	SELECT $1, $2, $3::date, f.day_order_id, f.day_out_trade_no, NULL::bigint, '' FROM few f
	WHERE f.line_no IS NULL
		AND NOT EXISTS (SELECT 1 FROM statement_lines l WHERE l.order_id = f.day_order_id AND l.kind = 'payment')
	ON CONFLICT DO NOTHING
), c AS MATERIALIZED (
	SELECT f.*, p.outcome AS prior, p.mismatch_kind AS prior_mismatch, o.id AS order_id, o.status AS order_status, CASE f.kind WHEN 'payment' THEN o.paid_at ELSE r.succeeded_at END AS booked_at,
		CASE f.kind WHEN 'payment' THEN COALESCE(o.status IN ('PAID', 'REFUNDED') AND o.platform_trade_no = f.platform_trade_no
				AND o.amount_minor = f.amount_minor AND o.currency = f.currency, false)
			ELSE COALESCE(f.refund_status IN ('', 'SUCCESS') AND r.status = 'SUCCESS' AND r.amount_minor = f.amount_minor
				AND r.currency = f.currency, false) END AS matched
	FROM few f
	LEFT JOIN statement_lines p ON p.platform = $1 AND p.merchant_id = $2 AND p.bill_date = $3::date
		AND p.line_no = f.line_no AND p.kind = f.kind AND p.out_trade_no = f.out_trade_no AND p.amount_minor = f.amount_minor
	LEFT JOIN LATERAL (SELECT id, status, platform_trade_no, amount_minor, currency, paid_at FROM payment_orders
		WHERE platform = $1 AND merchant_id = $2 AND out_trade_no = f.out_trade_no LIMIT 1) o ON true
	LEFT JOIN LATERAL (SELECT status, amount_minor, currency, succeeded_at FROM payment_refunds
		WHERE f.kind = 'refund' AND order_id = o.id AND out_refund_no = f.refund_no LIMIT 1) r ON true
	WHERE f.line_no IS NOT NULL
), other_day AS (
	INSERT INTO statement_lines (platform, merchant_id, bill_date, line_no, kind, out_trade_no, platform_trade_no,
		refund_no, amount_minor, order_id, outcome, run_id)
	SELECT $1, $2, $3::date, line_no, kind, out_trade_no, platform_trade_no, refund_no, amount_minor, order_id, 'other_day', NULLIF($6::bigint, 0)
	FROM c WHERE matched AND prior IS NULL AND (booked_at < $4 OR booked_at >= $5)
	ON CONFLICT DO NOTHING
)
SELECT line_no, kind, out_trade_no, platform_trade_no, refund_no, platform_refund_no, refund_status, currency,
	amount_minor, timestamptz 'epoch' + paid_us * interval '1 microsecond' AS paid_at, COALESCE(order_status, '') AS order_status, COALESCE(prior, '') AS prior,
	COALESCE(prior_mismatch, '') AS prior_mismatch
FROM c WHERE prior IS NOT NULL OR NOT matched`

// ClassifyEach calls each for every staged line that is not a plain match, as the server
// finds them and in no particular order, and holds the day's PAID orders that no line names
// (see classifySQL; HoldUnlisted holds the refunds). each runs on the caller's goroutine
// between reads of the result: it must hand the line on rather than apply it.
func (t *StatementTx) ClassifyEach(ctx context.Context, each func(reconcile.ClassifiedLine)) error {
	rows, err := t.tx.QueryxContext(ctx, classifySQL, string(t.day.Account.Platform), t.day.Account.MerchantID,
		t.day.Date, t.day.Start, t.day.End, t.runID)
	if err != nil {
		return fmt.Errorf("statement %s %s: classify: %w", t.day.Account, t.day.Date, err)
	}
	defer rows.Close()
	for rows.Next() {
		var l reconcile.ClassifiedLine
		var kind, status, prior string
		var at sql.NullTime
		if err := rows.Scan(&l.No, &kind, &l.OutTradeNo, &l.PlatformTradeNo, &l.RefundNo, &l.PlatformRefundNo,
			&l.RefundStatus, &l.Currency, &l.AmountMinor, &at, &status, &l.Prior, &prior); err != nil {
			return fmt.Errorf("statement %s %s: read classified line: %w", t.day.Account, t.day.Date, err)
		}
		l.Kind, l.At, l.PriorMismatch = reconcile.BillLineKind(kind), at.Time, reconcile.MismatchKind(prior)
		l.OrderStatus = reconcile.Status(status)
		each(l)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("statement %s %s: classify: %w", t.day.Account, t.day.Date, err)
	}
	return nil
}

// PendingTrades is the account's PENDING orders (by out_trade_no) when they are at most
// limit; ok is false when there are more. It reads on the store's pool. A bill line naming
// one of them needs the apply path whatever the classification says (a payment line moves
// only a PENDING order, and such an order is never a plain match), so it can be applied
// while the classification still hashes the day's orders. A re-run of the day (a run has
// recorded lines) gets none: its recorded lines must not be applied again.
func (t *StatementTx) PendingTrades(ctx context.Context, limit int) (map[string]struct{}, bool, error) {
	acct := t.day.Account
	var trades []string
	if err := t.pool.SelectContext(ctx, &trades, `SELECT out_trade_no FROM payment_orders
		WHERE platform = $1 AND merchant_id = $2 AND status = 'PENDING'
			AND NOT EXISTS (SELECT 1 FROM statement_lines WHERE platform = $1 AND merchant_id = $2 AND bill_date = $3::date)
		LIMIT $4`, string(acct.Platform), acct.MerchantID, t.day.Date, limit+1); err != nil {
		return nil, false, fmt.Errorf("statement %s %s: read the pending orders: %w", acct, t.day.Date, err)
	}
	if len(trades) > limit {
		return nil, false, nil
	}
	set := make(map[string]struct{}, len(trades))
	for _, no := range trades {
		set[no] = struct{}{}
	}
	return set, true, nil
}

// PendingLine is a bill line naming an order PendingTrades found PENDING, as ClassifyEach
// would return it.
func PendingLine(l statement.Line) reconcile.ClassifiedLine {
	return reconcile.ClassifiedLine{No: l.No, Kind: l.Kind, OutTradeNo: l.OutTradeNo, PlatformTradeNo: l.PlatformTradeNo,
		RefundNo: l.RefundNo, PlatformRefundNo: l.PlatformRefundNo, RefundStatus: l.RefundStatus,
		Currency: currencyOrDefault(l.Currency), AmountMinor: l.AmountMinor, At: l.At, OrderStatus: reconcile.StatusPending}
}

// Books reads the orders and refunds of the account that the lines name, in two statements,
// on the store's pool rather than in the statement's transaction: it runs while the
// classification still streams on the transaction's session. What it reads is the apply
// path's copy; the conditional statements decide.
func (t *StatementTx) Books(ctx context.Context, lines []reconcile.ClassifiedLine) (reconcile.LineBooks, error) {
	b := reconcile.LineBooks{Orders: map[string]reconcile.Order{}, Refunds: map[string]reconcile.Refund{}}
	var trades, refunds []string
	for _, l := range lines {
		if l.Prior != "" {
			continue // not applied again
		}
		trades = append(trades, l.OutTradeNo)
		if l.Kind == reconcile.BillRefund {
			refunds = append(refunds, l.RefundNo)
		}
	}
	if len(trades) == 0 {
		return b, nil
	}
	acct := t.day.Account
	var orders []orderRow
	if err := t.pool.SelectContext(ctx, &orders, `SELECT `+orderColumns+` FROM payment_orders
		WHERE platform = $1 AND merchant_id = $2 AND out_trade_no = ANY($3)`,
		string(acct.Platform), acct.MerchantID, pq.Array(trades)); err != nil {
		return b, fmt.Errorf("statement %s %s: read the orders of %d lines: %w", acct, t.day.Date, len(lines), err)
	}
	for _, o := range orders {
		b.Orders[o.OutTradeNo] = o.order()
	}
	if len(refunds) == 0 {
		return b, nil
	}
	var rs []refundRow
	if err := t.pool.SelectContext(ctx, &rs, `SELECT `+refundColumns+` FROM payment_refunds
		WHERE platform = $1 AND merchant_id = $2 AND out_refund_no = ANY($3)`,
		string(acct.Platform), acct.MerchantID, pq.Array(refunds)); err != nil {
		return b, fmt.Errorf("statement %s %s: read the refunds of %d lines: %w", acct, t.day.Date, len(lines), err)
	}
	for _, r := range rs {
		b.Refunds[r.OutRefundNo] = r.refund()
	}
	return b, nil
}

// RecordLines remembers the applied lines, each pointing at its finding (a refund line's
// finding is its refund number's), in one statement.
func (t *StatementTx) RecordLines(ctx context.Context, ls []reconcile.LineOutcome) error {
	if len(ls) == 0 {
		return nil
	}
	n := len(ls)
	nos, orders := make([]int64, n), make([]int64, n)
	kinds, outs, trades, refunds, outcomes, mkinds := make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n), make([]string, n)
	amounts := make([]int64, n)
	for i, l := range ls {
		nos[i], orders[i], amounts[i] = int64(l.Line.No), l.OrderID, l.Line.AmountMinor
		kinds[i], outs[i], trades[i], refunds[i] = string(l.Line.Kind), l.Line.OutTradeNo, l.Line.PlatformTradeNo, l.Line.RefundNo
		outcomes[i], mkinds[i] = string(l.Result), string(l.Mismatch)
	}
	_, err := t.tx.ExecContext(ctx, `
		INSERT INTO statement_lines (platform, merchant_id, bill_date, line_no, kind, out_trade_no, platform_trade_no,
			refund_no, amount_minor, order_id, outcome, mismatch_kind, mismatch_id, run_id)
		SELECT $1, $2, $3::date, u.no, u.kind, u.out_trade_no, u.trade_no, u.refund_no, u.amount, NULLIF(u.order_id, 0),
			u.outcome, NULLIF(u.mkind, ''),
			(SELECT m.id FROM reconcile_mismatches m WHERE m.platform = $1 AND m.merchant_id = $2
				AND m.out_trade_no = u.out_trade_no AND m.kind = u.mkind
				AND m.out_refund_no = CASE u.kind WHEN 'refund' THEN u.refund_no ELSE '' END),
			NULLIF($4::bigint, 0)
		FROM unnest($5::int[], $6::text[], $7::text[], $8::text[], $9::text[], $10::bigint[], $11::bigint[], $12::text[], $13::text[])
			AS u(no, kind, out_trade_no, trade_no, refund_no, amount, order_id, outcome, mkind)
		ON CONFLICT DO NOTHING`,
		string(t.day.Account.Platform), t.day.Account.MerchantID, t.day.Date, t.runID,
		pq.Array(nos), pq.Array(kinds), pq.Array(outs), pq.Array(trades), pq.Array(refunds), pq.Array(amounts),
		pq.Array(orders), pq.Array(outcomes), pq.Array(mkinds))
	if err != nil {
		return fmt.Errorf("statement %s %s: record %d lines: %w", t.day.Account, t.day.Date, n, err)
	}
	return nil
}

// holdUnlistedSQL puts on the day's held list, in ONE statement, every SUCCESS refund of the
// account whose succeeded_at falls in the day but which the bill does not list (by order and
// out_refund_no) — unless another day's bill listed it — and returns how many the day holds
// in all: orders (ClassifyEach held them) and refunds, an earlier run's and the new ones.
// $1 platform, $2 merchant, $3 bill date, $4/$5 the day.
const holdUnlistedSQL = `
WITH held AS (
	INSERT INTO statement_held (platform, merchant_id, bill_date, order_id, out_trade_no, refund_id, out_refund_no)
	SELECT r.platform, r.merchant_id, $3::date, r.order_id, r.out_trade_no, r.id, r.out_refund_no FROM payment_refunds r
	WHERE r.platform = $1 AND r.merchant_id = $2 AND r.status = 'SUCCESS' AND r.succeeded_at >= $4 AND r.succeeded_at < $5
		AND NOT EXISTS (SELECT 1 FROM statement_stage s WHERE s.kind = 'refund' AND s.out_trade_no = r.out_trade_no
			AND s.refund_no = r.out_refund_no)
		AND NOT EXISTS (SELECT 1 FROM statement_lines l WHERE l.order_id = r.order_id AND l.kind = 'refund'
			AND l.refund_no = r.out_refund_no)
	ON CONFLICT DO NOTHING
	RETURNING 1
)
SELECT (SELECT count(*) FROM held) + (SELECT count(*) FROM statement_held
	WHERE platform = $1 AND merchant_id = $2 AND bill_date = $3::date)`

// HoldUnlisted holds the day's SUCCESS refunds the bill does not list (see holdUnlistedSQL)
// and returns how many orders and refunds the day holds. It comes after ClassifyEach, which holds
// the orders.
func (t *StatementTx) HoldUnlisted(ctx context.Context) (int, error) {
	var n int
	if err := t.tx.GetContext(ctx, &n, holdUnlistedSQL, string(t.day.Account.Platform), t.day.Account.MerchantID,
		t.day.Date, t.day.Start, t.day.End); err != nil {
		return 0, fmt.Errorf("statement %s %s: hold unlisted refunds: %w", t.day.Account, t.day.Date, err)
	}
	return n, nil
}

// settleHeldSQL settles the previous day's held list against this day's bill in ONE
// statement: the orders (refunds) this bill lists fell on the other side of midnight and
// leave the list; the rest come back. Any line naming a held order lists it (as for
// holdUnlistedSQL); a held refund is listed by the refund line of its number.
// $1 platform, $2 merchant, $3 the previous day, $4 this day.
const settleHeldSQL = `
WITH listed AS (
	UPDATE statement_held h SET state = 'LISTED_NEXT_DAY', settled_on = $4::date
	WHERE h.platform = $1 AND h.merchant_id = $2 AND h.bill_date = $3::date AND h.state = 'HELD'
		AND EXISTS (SELECT 1 FROM statement_stage s WHERE s.out_trade_no = h.out_trade_no
			AND (h.refund_id IS NULL OR s.kind = 'refund' AND s.refund_no = h.out_refund_no))
	RETURNING h.order_id, h.refund_id
)
SELECT h.order_id, h.out_trade_no, COALESCE(h.refund_id, 0) AS refund_id, h.out_refund_no, COALESCE(r.currency, '') AS currency
FROM statement_held h LEFT JOIN payment_refunds r ON r.id = h.refund_id
WHERE h.platform = $1 AND h.merchant_id = $2 AND h.bill_date = $3::date AND h.state = 'HELD'
	AND NOT EXISTS (SELECT 1 FROM listed x WHERE x.order_id = h.order_id AND x.refund_id IS NOT DISTINCT FROM h.refund_id)
ORDER BY h.order_id, h.refund_id NULLS FIRST`

// SettleHeld settles the previous day's held list against this day's bill (see
// settleHeldSQL) and returns the orders and refunds to report (then MarkReported).
func (t *StatementTx) SettleHeld(ctx context.Context, prevDate string) ([]reconcile.HeldEntry, error) {
	var out []reconcile.HeldEntry
	if err := t.tx.SelectContext(ctx, &out, settleHeldSQL, string(t.day.Account.Platform), t.day.Account.MerchantID,
		prevDate, t.day.Date); err != nil {
		return nil, fmt.Errorf("statement %s %s: settle the held list of %s: %w", t.day.Account, t.day.Date, prevDate, err)
	}
	return out, nil
}

// MarkReported records that these of the previous day's held orders and refunds were
// reported, so no later run reports them again.
func (t *StatementTx) MarkReported(ctx context.Context, prevDate string, held []reconcile.HeldEntry) error {
	if len(held) == 0 {
		return nil
	}
	var orders, refunds []int64
	for _, h := range held {
		if h.IsRefund() {
			refunds = append(refunds, h.RefundID)
		} else {
			orders = append(orders, h.OrderID)
		}
	}
	_, err := t.tx.ExecContext(ctx, `UPDATE statement_held SET state = 'REPORTED', settled_on = $4::date
		WHERE platform = $1 AND merchant_id = $2 AND bill_date = $3::date
			AND (refund_id IS NULL AND order_id = ANY($5::bigint[]) OR refund_id = ANY($6::bigint[]))`,
		string(t.day.Account.Platform), t.day.Account.MerchantID, prevDate, t.day.Date, pq.Array(orders), pq.Array(refunds))
	if err != nil {
		return fmt.Errorf("statement %s %s: mark %d held orders and refunds reported: %w", t.day.Account, t.day.Date, len(held), err)
	}
	return nil
}

// saveDaySQL writes a day's row: its key, the figures (reconcile.StatementFigureTable), the
// bill, the run. Reconciling the same day again with the same outcome changes nothing (the
// row is left as it was, run id and time included).
var saveDaySQL = func() string {
	cols := append(figureColumns(), "bill_sha256", "bill_location")
	params := make([]string, len(cols))
	set := make([]string, len(cols))
	old := make([]string, len(cols))
	excluded := make([]string, len(cols))
	for i, c := range cols {
		params[i] = fmt.Sprintf("$%d", i+4)
		set[i] = c + " = EXCLUDED." + c
		old[i], excluded[i] = "d."+c, "EXCLUDED."+c
	}
	return `INSERT INTO statement_days AS d (platform, merchant_id, bill_date, ` + strings.Join(cols, ", ") + `, run_id)
		VALUES ($1, $2, $3::date, ` + strings.Join(params, ", ") + fmt.Sprintf(`, NULLIF($%d::bigint, 0))`, len(cols)+4) + `
		ON CONFLICT (platform, merchant_id, bill_date) DO UPDATE SET ` + strings.Join(set, ", ") + `, run_id = EXCLUDED.run_id, reconciled_at = now()
		WHERE (` + strings.Join(old, ", ") + `) IS DISTINCT FROM (` + strings.Join(excluded, ", ") + `)`
}()

// figureColumns are the statement_days columns of the day's figures, in the table's order.
func figureColumns() []string {
	cols := make([]string, len(reconcile.StatementFigureTable))
	for i, sf := range reconcile.StatementFigureTable {
		cols[i] = sf.Column
	}
	return cols
}

// SaveDay writes the day's figures (saveDaySQL).
func (t *StatementTx) SaveDay(ctx context.Context, f reconcile.StatementFigures) error {
	args := []any{string(t.day.Account.Platform), t.day.Account.MerchantID, t.day.Date}
	for _, sf := range reconcile.StatementFigureTable {
		args = append(args, sf.Value(f))
	}
	args = append(args, f.BillSHA256, f.BillLocation, t.runID)
	if _, err := t.tx.ExecContext(ctx, saveDaySQL, args...); err != nil {
		return fmt.Errorf("statement %s %s: save the day's figures: %w", t.day.Account, t.day.Date, err)
	}
	return nil
}

// StatementDays lists the saved days in [from, to) (dates), by day and account.
func (s *Store) StatementDays(ctx context.Context, from, to string) ([]reconcile.StatementDayRow, error) {
	return statementDays(ctx, s.db, from, to)
}

func statementDays(ctx context.Context, q sqlx.QueryerContext, from, to string) ([]reconcile.StatementDayRow, error) {
	out := []reconcile.StatementDayRow{}
	err := sqlx.SelectContext(ctx, q, &out, `SELECT platform, merchant_id, to_char(bill_date, 'YYYY-MM-DD') AS bill_date, `+
		strings.Join(figureColumns(), ", ")+`, bill_sha256, bill_location, reconciled_at
		FROM statement_days WHERE bill_date >= $1::date AND bill_date < $2::date
		ORDER BY bill_date, platform, merchant_id`, from, to)
	if err != nil {
		return nil, fmt.Errorf("list statement days %s..%s: %w", from, to, err)
	}
	return out, nil
}

// periodDays is the dates of the business days that start in [from, to), in from's zone:
// the first, and the first after them.
func periodDays(from, to time.Time) (string, string) {
	loc := from.Location()
	midnight := func(t time.Time) time.Time {
		t = t.In(loc)
		m := time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, loc)
		if m.Before(t) {
			m = m.AddDate(0, 0, 1)
		}
		return m
	}
	return midnight(from).Format(time.DateOnly), midnight(to).Format(time.DateOnly)
}

// received is what a line moved for the merchant: positive for a payment, negative for a
// refund. Every reader fills ReceivedMinor (Alipay's without a 商家实收 column with the
// order amount), so 0 is a real 0.00: a payment the platform's discounts paid in full.
func received(l statement.Line) int64 {
	if l.Kind == reconcile.BillRefund {
		return -l.ReceivedMinor
	}
	return l.ReceivedMinor
}

// LastStatementDay is the newest business day (YYYY-MM-DD) reconciled for the account, ""
// when none: re-running an older day must not make the account look behind.
func (s *Store) LastStatementDay(ctx context.Context, acct reconcile.AccountKey) (string, error) {
	var d sql.NullString
	err := s.db.GetContext(ctx, &d, `SELECT to_char(max(bill_date), 'YYYY-MM-DD') FROM statement_days
		WHERE platform = $1 AND merchant_id = $2`, string(acct.Platform), acct.MerchantID)
	if err != nil {
		return "", fmt.Errorf("last statement day of %s: %w", acct, err)
	}
	return d.String, nil
}
