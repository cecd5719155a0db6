package repo

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/statement"
)

// statementLockKey is the advisory lock class of statement runs: one run per account at a
// time, so two runs of the same day never stage, hold or record concurrently.
const statementLockKey = 0x73746d74 // "stmt"

// StatementDay is one account's business day: the bill's date and the [Start, End) it
// covers in the platform's zone.
type StatementDay struct {
	Account    reconcile.AccountKey
	Date       string // YYYY-MM-DD
	Start, End time.Time
}

// StatementTx is one statement run of one account's day, in ONE transaction on one
// connection: the bill is staged with COPY into a temporary table while it is parsed, then
// classified with a few set-based statements. Nothing it writes is visible before Commit, so a
// bill rejected mid-stream (or a dry run) rolls back and leaves nothing behind.
type StatementTx struct {
	tx    *sqlx.Tx
	day   StatementDay
	runID int64
}

// BeginStatement opens the day's transaction, waits for the account's statement lock and
// creates the staging table.
func (s *Store) BeginStatement(ctx context.Context, day StatementDay, runID int64) (*StatementTx, error) {
	// The transaction itself is not bound to ctx: database/sql rolls a cancelled
	// transaction back from a goroutine of its own, which would then read the connection
	// while a COPY's response loop is still reading it (two readers on one session, caught
	// by the race detector when a signal came mid-stream). Each statement still takes ctx,
	// and the caller's Rollback ends the transaction once the COPY is closed.
	tx, err := s.db.BeginTxx(context.WithoutCancel(ctx), nil)
	if err != nil {
		return nil, fmt.Errorf("statement %s %s: begin: %w", day.Account, day.Date, err)
	}
	t := &StatementTx{tx: tx, day: day, runID: runID}
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
	// Temporary: not WAL-logged, private to this session, dropped with the transaction.
	if _, err := tx.ExecContext(ctx, `CREATE TEMP TABLE statement_stage (
		line_no integer NOT NULL, kind text NOT NULL, out_trade_no text NOT NULL, platform_trade_no text NOT NULL,
		refund_no text NOT NULL, currency text NOT NULL, amount_minor bigint NOT NULL, paid_at timestamptz NULL
	) ON COMMIT DROP`); err != nil {
		t.Rollback()
		return nil, fmt.Errorf("statement %s %s: create staging table: %w", day.Account, day.Date, err)
	}
	return t, nil
}

// Rollback abandons everything the transaction wrote; safe after Commit.
func (t *StatementTx) Rollback() { t.tx.Rollback() } //nolint:errcheck // after a commit or a lost connection there is nothing to undo

// Commit makes the day's records durable.
func (t *StatementTx) Commit() error {
	if err := t.tx.Commit(); err != nil {
		return fmt.Errorf("statement %s %s: commit: %w", t.day.Account, t.day.Date, err)
	}
	return nil
}

// StagedBill is what staging read: the line count, the bill's totals (checked by the reader)
// and what the merchant actually received net of refunds.
type StagedBill struct {
	Lines         int
	Totals        statement.Totals
	ReceivedMinor int64 // payments received minus refunds given back
}

// Stage streams the bill's lines into the staging table with COPY while the reader parses
// them, so the bill is never held in memory. Parsing runs one batch ahead of the COPY in its
// own goroutine, so decoding the file and PostgreSQL's work overlap. Any reader error other
// than io.EOF (a *statement.RejectError above all) is returned as is, and the caller must roll
// back.
func (t *StatementTx) Stage(ctx context.Context, r statement.Reader) (StagedBill, error) {
	stmt, err := t.tx.PrepareContext(ctx, pq.CopyIn("statement_stage", "line_no", "kind", "out_trade_no",
		"platform_trade_no", "refund_no", "currency", "amount_minor", "paid_at"))
	if err != nil {
		return StagedBill{}, fmt.Errorf("statement %s %s: start COPY: %w", t.day.Account, t.day.Date, err)
	}
	defer stmt.Close()
	batches, done := make(chan []statement.Line, 4), make(chan struct{})
	var readErr error
	go func() {
		defer close(batches)
		readErr = readBatches(r, batches, done)
	}()
	defer func() {
		close(done)
		for range batches { // let the reader goroutine finish before returning
		}
	}()
	var out StagedBill
	for batch := range batches {
		for _, l := range batch {
			if _, err := stmt.ExecContext(ctx, l.No, string(l.Kind), l.OutTradeNo, l.PlatformTradeNo, l.RefundNo,
				currencyOrCNY(l.Currency), l.AmountMinor, nullTime(l.At)); err != nil {
				return out, fmt.Errorf("statement %s %s: COPY line %d: %w", t.day.Account, t.day.Date, l.No, err)
			}
			out.Lines++
			out.ReceivedMinor += received(l)
		}
	}
	if readErr != nil { // the channel is closed: the goroutine is done with readErr
		return out, readErr
	}
	if _, err := stmt.ExecContext(ctx); err != nil {
		return out, fmt.Errorf("statement %s %s: finish COPY: %w", t.day.Account, t.day.Date, err)
	}
	out.Totals = r.Totals()
	// The planner needs the staged row count to join a million lines sensibly.
	if _, err := t.tx.ExecContext(ctx, `ANALYZE statement_stage`); err != nil {
		return out, fmt.Errorf("statement %s %s: analyze staged lines: %w", t.day.Account, t.day.Date, err)
	}
	return out, nil
}

// stageBatch is how many parsed lines travel to the COPY at once: enough to amortise the
// hand-over, small enough that a few batches in flight cost well under a MiB.
const stageBatch = 512

// readBatches reads r to its end into batches, stopping early when done closes.
func readBatches(r statement.Reader, batches chan<- []statement.Line, done <-chan struct{}) error {
	batch := make([]statement.Line, 0, stageBatch)
	send := func() bool {
		select {
		case batches <- batch:
			batch = make([]statement.Line, 0, stageBatch)
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

func currencyOrCNY(c string) string {
	if c == "" {
		return "CNY" // Alipay bills name no currency
	}
	return c
}

// StatementLine is a staged line that is more than a plain match: one for the apply path, or
// one an earlier run of the same day already settled (Prior set: apply nothing again).
type StatementLine struct {
	No              int
	Kind            statement.LineKind
	OutTradeNo      string
	PlatformTradeNo string
	RefundNo        string
	Currency        string
	AmountMinor     int64
	At              time.Time
	Prior           string // statement_lines.outcome of an earlier run, "" when new
}

// classifySQL matches every staged line against the account's orders in ONE statement. A line
// is matched when the order already says what the bill says (a payment: PAID or REFUNDED under
// the same trade number, amount and currency; a refund: REFUNDED); matched payments whose
// paid_at falls on another day are remembered (the held list of that day must leave them out).
// What comes back is only the rest: lines for the apply path, and lines an earlier run of the
// day settled. $1 platform, $2 merchant, $3 bill date, $4/$5 the day, $6 run id.
const classifySQL = `
WITH c AS MATERIALIZED (
	SELECT s.line_no, s.kind, s.out_trade_no, s.platform_trade_no, s.refund_no, s.currency, s.amount_minor, s.paid_at,
		o.id AS order_id, o.paid_at AS order_paid_at, p.outcome AS prior,
		COALESCE(CASE s.kind
			WHEN 'payment' THEN o.status IN ('PAID', 'REFUNDED') AND o.platform_trade_no = s.platform_trade_no
				AND o.amount_minor = s.amount_minor AND o.currency = s.currency
			ELSE o.status = 'REFUNDED' END, false) AS matched
	FROM statement_stage s
	LEFT JOIN payment_orders o ON o.platform = $1 AND o.merchant_id = $2 AND o.out_trade_no = s.out_trade_no
	LEFT JOIN statement_lines p ON p.platform = $1 AND p.merchant_id = $2 AND p.bill_date = $3::date
		AND p.line_no = s.line_no AND p.kind = s.kind AND p.out_trade_no = s.out_trade_no AND p.amount_minor = s.amount_minor
), other_day AS (
	INSERT INTO statement_lines (platform, merchant_id, bill_date, line_no, kind, out_trade_no, platform_trade_no,
		refund_no, amount_minor, order_id, outcome, run_id)
	SELECT $1, $2, $3::date, line_no, kind, out_trade_no, platform_trade_no, refund_no, amount_minor, order_id, 'other_day', NULLIF($6::bigint, 0)
	FROM c WHERE matched AND prior IS NULL AND kind = 'payment' AND (order_paid_at < $4 OR order_paid_at >= $5)
	ON CONFLICT DO NOTHING
)
SELECT line_no, kind, out_trade_no, platform_trade_no, refund_no, currency, amount_minor, paid_at,
	COALESCE(prior, '') AS prior
FROM c WHERE prior IS NOT NULL OR NOT matched
ORDER BY kind, line_no`

// Classify returns the staged lines that are not plain matches (payments before refunds, so
// a payment and its refund on one day repair, then report, in that order).
func (t *StatementTx) Classify(ctx context.Context) ([]StatementLine, error) {
	rows, err := t.tx.QueryxContext(ctx, classifySQL, string(t.day.Account.Platform), t.day.Account.MerchantID,
		t.day.Date, t.day.Start, t.day.End, t.runID)
	if err != nil {
		return nil, fmt.Errorf("statement %s %s: classify: %w", t.day.Account, t.day.Date, err)
	}
	defer rows.Close()
	var out []StatementLine
	for rows.Next() {
		var l StatementLine
		var kind string
		var at sql.NullTime
		if err := rows.Scan(&l.No, &kind, &l.OutTradeNo, &l.PlatformTradeNo, &l.RefundNo, &l.Currency, &l.AmountMinor,
			&at, &l.Prior); err != nil {
			return nil, fmt.Errorf("statement %s %s: read classified line: %w", t.day.Account, t.day.Date, err)
		}
		l.Kind, l.At = statement.LineKind(kind), at.Time
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("statement %s %s: classify: %w", t.day.Account, t.day.Date, err)
	}
	return out, nil
}

// LineOutcome is what the apply path made of one line, remembered so that a re-run of the
// day neither applies it again nor adds a sighting.
type LineOutcome struct {
	Line     StatementLine
	OrderID  int64
	Outcome  string // repaired, mismatch or unchanged
	Mismatch reconcile.MismatchKind
}

// RecordLines remembers the applied lines, each pointing at its finding, in one statement.
func (t *StatementTx) RecordLines(ctx context.Context, ls []LineOutcome) error {
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
		outcomes[i], mkinds[i] = l.Outcome, string(l.Mismatch)
	}
	_, err := t.tx.ExecContext(ctx, `
		INSERT INTO statement_lines (platform, merchant_id, bill_date, line_no, kind, out_trade_no, platform_trade_no,
			refund_no, amount_minor, order_id, outcome, mismatch_kind, mismatch_id, run_id)
		SELECT $1, $2, $3::date, u.no, u.kind, u.out_trade_no, u.trade_no, u.refund_no, u.amount, NULLIF(u.order_id, 0),
			u.outcome, NULLIF(u.mkind, ''),
			(SELECT m.id FROM reconcile_mismatches m WHERE m.platform = $1 AND m.merchant_id = $2
				AND m.out_trade_no = u.out_trade_no AND m.kind = u.mkind),
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

// HoldUnlisted puts on the day's held list every PAID order of the account whose paid_at
// falls in the day but which the bill does not list as a payment (nor did another day's bill).
// It returns how many the day holds.
func (t *StatementTx) HoldUnlisted(ctx context.Context) (int, error) {
	p, m := string(t.day.Account.Platform), t.day.Account.MerchantID
	if _, err := t.tx.ExecContext(ctx, `
		INSERT INTO statement_held (platform, merchant_id, bill_date, order_id, out_trade_no)
		SELECT o.platform, o.merchant_id, $3::date, o.id, o.out_trade_no FROM payment_orders o
		WHERE o.platform = $1 AND o.merchant_id = $2 AND o.status = 'PAID' AND o.paid_at >= $4 AND o.paid_at < $5
			AND NOT EXISTS (SELECT 1 FROM statement_stage s WHERE s.kind = 'payment' AND s.out_trade_no = o.out_trade_no)
			AND NOT EXISTS (SELECT 1 FROM statement_lines l WHERE l.order_id = o.id AND l.kind = 'payment')
		ON CONFLICT DO NOTHING`, p, m, t.day.Date, t.day.Start, t.day.End); err != nil {
		return 0, fmt.Errorf("statement %s %s: hold unlisted paid orders: %w", t.day.Account, t.day.Date, err)
	}
	var n int
	if err := t.tx.GetContext(ctx, &n, `SELECT count(*) FROM statement_held
		WHERE platform = $1 AND merchant_id = $2 AND bill_date = $3::date`, p, m, t.day.Date); err != nil {
		return 0, fmt.Errorf("statement %s %s: count held orders: %w", t.day.Account, t.day.Date, err)
	}
	return n, nil
}

// HeldOrder is an order the previous day's bill did not list and this day's does not either.
type HeldOrder struct {
	OrderID    int64  `db:"order_id"`
	OutTradeNo string `db:"out_trade_no"`
}

// SettleHeld settles the previous day's held list against this day's bill: the orders this
// bill lists fell on the other side of midnight and leave the list; the rest are returned, to
// be reported (then MarkReported).
func (t *StatementTx) SettleHeld(ctx context.Context, prevDate string) ([]HeldOrder, error) {
	p, m := string(t.day.Account.Platform), t.day.Account.MerchantID
	if _, err := t.tx.ExecContext(ctx, `
		UPDATE statement_held h SET state = 'LISTED_NEXT_DAY', settled_on = $4::date
		WHERE h.platform = $1 AND h.merchant_id = $2 AND h.bill_date = $3::date AND h.state = 'HELD'
			AND EXISTS (SELECT 1 FROM statement_stage s WHERE s.kind = 'payment' AND s.out_trade_no = h.out_trade_no)`,
		p, m, prevDate, t.day.Date); err != nil {
		return nil, fmt.Errorf("statement %s %s: settle the held orders of %s: %w", t.day.Account, t.day.Date, prevDate, err)
	}
	var out []HeldOrder
	if err := t.tx.SelectContext(ctx, &out, `SELECT order_id, out_trade_no FROM statement_held
		WHERE platform = $1 AND merchant_id = $2 AND bill_date = $3::date AND state = 'HELD' ORDER BY order_id`,
		p, m, prevDate); err != nil {
		return nil, fmt.Errorf("statement %s %s: read the held orders of %s: %w", t.day.Account, t.day.Date, prevDate, err)
	}
	return out, nil
}

// MarkReported records that the previous day's held orders were reported, so no later run
// reports them again.
func (t *StatementTx) MarkReported(ctx context.Context, prevDate string, orderIDs []int64) error {
	if len(orderIDs) == 0 {
		return nil
	}
	_, err := t.tx.ExecContext(ctx, `UPDATE statement_held SET state = 'REPORTED', settled_on = $4::date
		WHERE platform = $1 AND merchant_id = $2 AND bill_date = $3::date AND order_id = ANY($5::bigint[])`,
		string(t.day.Account.Platform), t.day.Account.MerchantID, prevDate, t.day.Date, pq.Array(orderIDs))
	if err != nil {
		return fmt.Errorf("statement %s %s: mark %d held orders reported: %w", t.day.Account, t.day.Date, len(orderIDs), err)
	}
	return nil
}

// StatementFigures are what finance signs off for one account's day (statement_days).
type StatementFigures struct {
	Payments      int
	PaymentsMinor int64
	Refunds       int
	RefundsMinor  int64
	ReceivedMinor int64 // received for payments minus given back for refunds
	FeeMilliFen   int64
	NetMilliFen   int64 // received, less the fees
	Lines         int
	Matched       int
	Repaired      int
	Found         int
	Held          int
	BillSHA256    string
	BillLocation  string
}

// SaveDay writes the day's figures. Reconciling the same day again with the same outcome
// changes nothing (the row is left as it was, run id and time included).
func (t *StatementTx) SaveDay(ctx context.Context, f StatementFigures) error {
	_, err := t.tx.ExecContext(ctx, `
		INSERT INTO statement_days AS d (platform, merchant_id, bill_date, payments, payments_minor, refunds, refunds_minor,
			received_minor, fees_milli_fen, net_milli_fen, lines, lines_matched, lines_repaired, lines_found, held,
			bill_sha256, bill_location, run_id)
		VALUES ($1, $2, $3::date, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, NULLIF($18::bigint, 0))
		ON CONFLICT (platform, merchant_id, bill_date) DO UPDATE SET
			payments = EXCLUDED.payments, payments_minor = EXCLUDED.payments_minor, refunds = EXCLUDED.refunds,
			refunds_minor = EXCLUDED.refunds_minor, received_minor = EXCLUDED.received_minor,
			fees_milli_fen = EXCLUDED.fees_milli_fen, net_milli_fen = EXCLUDED.net_milli_fen, lines = EXCLUDED.lines,
			lines_matched = EXCLUDED.lines_matched, lines_repaired = EXCLUDED.lines_repaired,
			lines_found = EXCLUDED.lines_found, held = EXCLUDED.held, bill_sha256 = EXCLUDED.bill_sha256,
			bill_location = EXCLUDED.bill_location, run_id = EXCLUDED.run_id, reconciled_at = now()
		WHERE (d.payments, d.payments_minor, d.refunds, d.refunds_minor, d.received_minor, d.fees_milli_fen,
			d.net_milli_fen, d.lines, d.lines_matched, d.lines_repaired, d.lines_found, d.held, d.bill_sha256, d.bill_location)
			IS DISTINCT FROM
			(EXCLUDED.payments, EXCLUDED.payments_minor, EXCLUDED.refunds, EXCLUDED.refunds_minor, EXCLUDED.received_minor,
			EXCLUDED.fees_milli_fen, EXCLUDED.net_milli_fen, EXCLUDED.lines, EXCLUDED.lines_matched, EXCLUDED.lines_repaired,
			EXCLUDED.lines_found, EXCLUDED.held, EXCLUDED.bill_sha256, EXCLUDED.bill_location)`,
		string(t.day.Account.Platform), t.day.Account.MerchantID, t.day.Date, f.Payments, f.PaymentsMinor, f.Refunds,
		f.RefundsMinor, f.ReceivedMinor, f.FeeMilliFen, f.NetMilliFen, f.Lines, f.Matched, f.Repaired, f.Found, f.Held,
		f.BillSHA256, f.BillLocation, t.runID)
	if err != nil {
		return fmt.Errorf("statement %s %s: save the day's figures: %w", t.day.Account, t.day.Date, err)
	}
	return nil
}

// StatementDayRow is one saved day, for reports and tests.
type StatementDayRow struct {
	Platform      string    `db:"platform" json:"platform"`
	MerchantID    string    `db:"merchant_id" json:"merchant_id"`
	BillDate      string    `db:"bill_date" json:"bill_date"` // YYYY-MM-DD
	Payments      int       `db:"payments" json:"payments"`
	PaymentsMinor int64     `db:"payments_minor" json:"payments_minor"`
	Refunds       int       `db:"refunds" json:"refunds"`
	RefundsMinor  int64     `db:"refunds_minor" json:"refunds_minor"`
	ReceivedMinor int64     `db:"received_minor" json:"received_minor"`
	FeeMilliFen   int64     `db:"fees_milli_fen" json:"fees_milli_fen"`
	NetMilliFen   int64     `db:"net_milli_fen" json:"net_milli_fen"`
	Lines         int       `db:"lines" json:"lines"`
	Matched       int       `db:"lines_matched" json:"lines_matched"`
	Repaired      int       `db:"lines_repaired" json:"lines_repaired"`
	Found         int       `db:"lines_found" json:"lines_found"`
	Held          int       `db:"held" json:"held"`
	BillSHA256    string    `db:"bill_sha256" json:"bill_sha256"`
	BillLocation  string    `db:"bill_location" json:"bill_location"`
	ReconciledAt  time.Time `db:"reconciled_at" json:"reconciled_at"`
}

// StatementDays lists the saved days in [from, to) (dates), by day and account.
func (s *Store) StatementDays(ctx context.Context, from, to string) ([]StatementDayRow, error) {
	return statementDays(ctx, s.db, from, to)
}

func statementDays(ctx context.Context, q sqlx.QueryerContext, from, to string) ([]StatementDayRow, error) {
	out := []StatementDayRow{}
	err := sqlx.SelectContext(ctx, q, &out, `SELECT platform, merchant_id, to_char(bill_date, 'YYYY-MM-DD') AS bill_date, payments, payments_minor, refunds,
		refunds_minor, received_minor, fees_milli_fen, net_milli_fen, lines, lines_matched, lines_repaired, lines_found,
		held, bill_sha256, bill_location, reconciled_at
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
	if l.Kind == statement.Refund {
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
