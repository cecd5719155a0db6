package reconcile

import (
	"context"
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"time"
)

// RunMode is reconcile_runs.mode.
type RunMode string

const (
	ModeOnce      RunMode = "once"
	ModeScheduled RunMode = "scheduled"
	ModeBackfill  RunMode = "backfill"
	ModeStatement RunMode = "statement"
)

// RunStatus is reconcile_runs.status.
type RunStatus string

const (
	RunRunning     RunStatus = "running"
	RunSucceeded   RunStatus = "succeeded"
	RunFailed      RunStatus = "failed"
	RunInterrupted RunStatus = "interrupted"
)

// Shard is one slice of the orders, by a stable hash of their identity.
type Shard struct {
	Index, Count int
}

func (s Shard) String() string { return fmt.Sprintf("%d/%d", s.Index, s.Count) }

// Owns reports whether the shard owns an order with the given hash.
func (s Shard) Owns(hash uint32) bool {
	return s.Count <= 1 || int(hash%uint32(s.Count)) == s.Index
}

// ShardOf is the stable hash orders are sharded by: the first four bytes of
// md5("platform:merchant_id:out_trade_no"), big-endian. The database computes the same value
// (payment_orders.shard_hash), so a shard's query never needs to look at other rows.
func ShardOf(p Platform, merchantID, outTradeNo string) uint32 {
	sum := md5.Sum([]byte(string(p) + ":" + merchantID + ":" + outTradeNo))
	return binary.BigEndian.Uint32(sum[:4])
}

// Cursor is a keyset position in (created_at, id) order.
type Cursor struct {
	CreatedAt time.Time
	ID        int64
}

// IsZero reports whether the cursor is the start.
func (c Cursor) IsZero() bool { return c.ID == 0 }

// String renders the cursor as saved in reconcile_runs.cursor.
func (c Cursor) String() string {
	if c.IsZero() {
		return ""
	}
	return c.CreatedAt.UTC().Format(time.RFC3339Nano) + "/" + fmt.Sprint(c.ID)
}

// Before reports whether c comes before d in (created_at, id) order.
func (c Cursor) Before(d Cursor) bool {
	if !c.CreatedAt.Equal(d.CreatedAt) {
		return c.CreatedAt.Before(d.CreatedAt)
	}
	return c.ID < d.ID
}

// ParseCursor reads a saved cursor.
func ParseCursor(s string) (Cursor, error) {
	if s == "" {
		return Cursor{}, nil
	}
	var c Cursor
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == '/' {
			t, err := time.Parse(time.RFC3339Nano, s[:i])
			if err != nil {
				break
			}
			if _, err := fmt.Sscan(s[i+1:], &c.ID); err != nil {
				break
			}
			c.CreatedAt = t
			return c, nil
		}
	}
	return Cursor{}, fmt.Errorf("bad cursor %q", s)
}

// Cursors are a backfill's resume points, one per merchant account: the accounts advance
// independently, so one shared position would either skip orders of the slower account or
// check the faster one's again. The zero AccountKey holds a position that applies to every
// account (a cursor saved before accounts had their own).
type Cursors map[AccountKey]Cursor

// For is where account k resumes.
func (cs Cursors) For(k AccountKey) Cursor {
	if c, ok := cs[k]; ok {
		return c
	}
	return cs[AccountKey{}]
}

// Min is the earliest resume point: every order before it is done.
func (cs Cursors) Min() Cursor {
	var out Cursor
	for _, c := range cs {
		if out.IsZero() || c.Before(out) {
			out = c
		}
	}
	return out
}

// String renders the cursors as saved in reconcile_runs.cursor:
// "alipay:2021...=2026-11-29T13:54:23.0226Z/4;wechatpay:1900...=...", sorted by account.
func (cs Cursors) String() string {
	parts := make([]string, 0, len(cs))
	for k, c := range cs {
		if c.IsZero() {
			continue
		}
		if k == (AccountKey{}) {
			parts = append(parts, c.String())
			continue
		}
		parts = append(parts, k.String()+"="+c.String())
	}
	sort.Strings(parts)
	return strings.Join(parts, ";")
}

// ParseCursors reads what Cursors.String wrote, or a single cursor (for every account).
func ParseCursors(s string) (Cursors, error) {
	out := Cursors{}
	if s == "" {
		return out, nil
	}
	for _, part := range strings.Split(s, ";") {
		key := AccountKey{}
		if acct, pos, ok := strings.Cut(part, "="); ok {
			p, m, ok := strings.Cut(acct, ":")
			if !ok || m == "" {
				return nil, fmt.Errorf("bad cursor %q: account %q is not platform:merchant_id", s, acct)
			}
			key, part = AccountKey{Platform: Platform(p), MerchantID: m}, pos
		}
		c, err := ParseCursor(part)
		if err != nil {
			return nil, err
		}
		out[key] = c
	}
	return out, nil
}

// Counters are the reconcile_runs counters, safe for concurrent increments.
type Counters struct {
	Scanned, Repaired, Closed, Unchanged, StillPending, Mismatches, ClaimedElsewhere, Errors, RefundsRepaired atomic.Int64
}

// CounterValues is a plain copy of Counters; its JSON names are the reconcile_runs columns.
type CounterValues struct {
	Scanned          int64 `json:"scanned"`
	Repaired         int64 `json:"repaired"`
	Closed           int64 `json:"closed"`
	Unchanged        int64 `json:"unchanged"`
	StillPending     int64 `json:"still_pending"`
	Mismatches       int64 `json:"mismatches"`
	ClaimedElsewhere int64 `json:"claimed_elsewhere"`
	Errors           int64 `json:"errors"`
	RefundsRepaired  int64 `json:"refunds_repaired"`
}

// Run is one pass as recorded in reconcile_runs.
type Run struct {
	ID         int64
	Mode       RunMode
	Status     RunStatus
	StartedAt  time.Time
	FinishedAt time.Time
	WindowFrom time.Time
	WindowTo   time.Time
	Shard      Shard
	Cursor     Cursors
	// RefundCursor is where each account's refunds resume: a pass walks an account's
	// refunds apart from its orders, each kind in its own keyset order (see TakeRefunds).
	RefundCursor Cursors
	DryRun       bool
	Error        string
	Counts       CounterValues
	// Unconfigured lists the pending orders in the run's window that wait for an account
	// this process does not have (not stored; for the log and the gauge).
	Unconfigured []AccountCount
	// LockName and Session are the shard lock the run holds and the database session that
	// holds it: a later pass taking the same lock tells from them whether this run's
	// process is still alive.
	LockName string
	Session  Session
	// TakenOver lists the dead runs whose leases this run freed when it started (not
	// stored on this row; each of them is marked interrupted), and finished runs whose
	// leftover leases it freed.
	TakenOver []TakenOver
}

// Session names one database session: its server pid and when that backend started, so a
// pid reused by a later session is not mistaken for it.
type Session struct {
	PID   int
	Start time.Time
}

// TakenOver is a dead run whose leases a new pass freed at once, or (Finished) a run that
// had ended but whose release of some leases had failed.
type TakenOver struct {
	RunID    int64
	Finished bool
	// Orders and Refunds are the orders and refunds whose leases it still held.
	Orders  []int64
	Refunds []int64
}

// TakeQuery selects the next orders (or refunds) of a pass.
type TakeQuery struct {
	Mode      RunMode
	Now       time.Time
	PassStart time.Time // an order checked since then is not taken again in this pass
	Grace     time.Duration
	Lookback  time.Duration
	// From and To bound created_at for a backfill: [From, To).
	From, To time.Time
	After    Cursor
	Shard    Shard
	// Account is the merchant account whose orders are taken: a pass dispatches per account
	// so a slow or throttled account never holds the workers another needs.
	Account AccountKey
	Limit   int
	Lease   time.Duration
	Owner   string
	// DryRun reads without taking a lease: a dry run writes nothing.
	DryRun bool
}

// CheckRecord is what a pass writes back about one checked order.
type CheckRecord struct {
	OrderID int64
	Owner   string
	Now     time.Time
	// NextCheck is when a still-pending order is due again.
	NextCheck time.Time
	// Backoff says the check counts toward the re-check backoff (an answer, not an error).
	Backoff bool
}

// WorkQueue is where a pass takes its orders from and writes back when each is due again.
type WorkQueue interface {
	// Take leases up to q.Limit orders in (created_at, id) order after q.After, in ONE
	// statement (FOR UPDATE SKIP LOCKED), so overlapping passes never check the same order.
	Take(ctx context.Context, q TakeQuery) ([]Order, error)
	// Checked releases the lease and schedules the next check of a still-pending order.
	Checked(ctx context.Context, c CheckRecord) error
	// Unconfigured counts the PENDING orders created in [from, to) of this shard whose
	// account is not among the given ones: orders no pass of this process can check.
	Unconfigured(ctx context.Context, from, to time.Time, shard Shard, configured []AccountKey) ([]AccountCount, error)
	// DueAccounts lists the accounts with orders or refunds that a take of q's mode, window
	// and shard may return (q's account, cursor and limit aside; leases and next checks
	// not looked at: a superset), and of which kinds, read from the due work itself, so
	// that what a pass costs to start follows its work, not how many accounts are
	// configured.
	DueAccounts(ctx context.Context, q TakeQuery) ([]DueAccount, error)
}

// DueAccount is an account with due work, and which kinds: a pass takes only those, so a
// service provider's sub-merchant with orders and no refunds due costs one take, not two.
type DueAccount struct {
	AccountKey
	Orders, Refunds bool
}

// AccountKey names one merchant account: an order's (platform, merchant_id).
type AccountKey struct {
	Platform   Platform
	MerchantID string
}

func (k AccountKey) String() string { return string(k.Platform) + ":" + k.MerchantID }

// AccountCount is how many orders one account has.
type AccountCount struct {
	Account AccountKey
	Orders  int64
}

// RunLog records passes in reconcile_runs.
type RunLog interface {
	StartRun(ctx context.Context, r *Run) error
	SaveProgress(ctx context.Context, r Run) error
	FinishRun(ctx context.Context, r Run) error
	LoadRun(ctx context.Context, id int64) (Run, error)
	// TakeOver is called by a run that holds its shard lock: no other run can hold it, so
	// every other run still "running" under it stopped without recording its end (its
	// process died, or lost its lock). Each is marked interrupted and its leases are freed, in one transaction, with the leases
	// finished runs of any lock failed to release.
	TakeOver(ctx context.Context, by Run) ([]TakenOver, error)
}

// HeldLock is a shard lock this process holds.
type HeldLock struct {
	Unlock func()
	// Session holds the lock; the run records it.
	Session Session
}

// Locker takes the per-shard lock that keeps two passes of the same kind off one shard.
type Locker interface {
	// TryLock returns ok=false when another live session holds name.
	TryLock(ctx context.Context, name string) (lock HeldLock, ok bool, err error)
}

// ParseShard reads a shard written as "i/n" with 0 <= i < n, exactly as Shard.String writes it,
// so a setting and a stored run record agree on one spelling.
func ParseShard(v string) (Shard, error) {
	var i, n int
	if _, err := fmt.Sscanf(v, "%d/%d", &i, &n); err != nil || n < 1 || i < 0 || i >= n || (Shard{Index: i, Count: n}).String() != v {
		return Shard{}, fmt.Errorf("shard must be i/n with 0 <= i < n, got %q", v)
	}
	return Shard{Index: i, Count: n}, nil
}

// Tally names what a check counts as: one of the run counters bar Scanned. The pass, the
// metrics and the dry-run printer all classify a check through Check.Tally, so the mapping
// lives here once.
type Tally string

const (
	TallyRepaired         Tally = "repaired"
	TallyClosed           Tally = "closed"
	TallyUnchanged        Tally = "unchanged"
	TallyStillPending     Tally = "still_pending"
	TallyMismatch         Tally = "mismatch"
	TallyClaimedElsewhere Tally = "claimed_elsewhere"
	TallyError            Tally = "error"
	// TallyRefundRepaired: a refund moved (to SUCCESS, CLOSED or ABNORMAL).
	TallyRefundRepaired Tally = "refund_repaired"
)

// Tally says which counter the check adds to. An error wins over whatever was applied: a
// check that failed did not decide anything.
func (c Check) Tally() Tally {
	switch {
	case c.Err != nil:
		return TallyError
	case c.Applied.Outcome == OutcomeApplied && c.Applied.RefundTo != "":
		return TallyRefundRepaired
	case c.Applied.Outcome == OutcomeApplied && c.Applied.To == StatusPaid:
		return TallyRepaired
	case c.Applied.Outcome == OutcomeApplied:
		return TallyClosed
	case c.Applied.Outcome == OutcomeMismatch:
		return TallyMismatch
	case c.Applied.Outcome == OutcomeClaimedElsewhere:
		return TallyClaimedElsewhere
	case c.Applied.Outcome == OutcomeStillPending:
		return TallyStillPending
	}
	return TallyUnchanged
}
