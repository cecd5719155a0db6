package sim

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
)

// ErrCrashed is what a crashed process's calls return: after a crash nothing it does
// reaches PostgreSQL or Redis any more.
var ErrCrashed = errors.New("sim: process crashed")

// Process is one simulated worker process: its own connection pool, its own claimer view,
// and a crash switch. Before the crash every call goes through to the real store; after
// it, every call fails and the process's lock session is terminated by the caller, as the
// server would drop it when the kernel closes a killed process's sockets.
type Process struct {
	store   *postgres.Store
	claims  reconcile.Claimer
	crashed atomic.Bool

	mu      sync.Mutex
	session reconcile.Session
	unlock  func()
	// crashAt counts down the transitions (order or refund) left before the process dies
	// right after one commits; 0: no such crash. crash is what dying means to the harness.
	crashAt atomic.Int64
	crash   func()
}

// NewProcess wraps a store (over the process's own pool) and a claimer.
func NewProcess(store *postgres.Store, claims reconcile.Claimer) *Process {
	return &Process{store: store, claims: claims}
}

// Crash stops every further call and returns the session holding the process's lock
// (zero if none), for the caller to terminate.
func (p *Process) Crash() reconcile.Session {
	p.crashed.Store(true)
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.session
}

func (p *Process) dead() bool { return p.crashed.Load() }

// CrashAtTransition makes the process die right after its nth transition commits (an
// order's or a refund's), before it can mark the claim done, release anything or record
// the check: crash is called (it must call Crash and end the lock session) and the
// transition returns ErrCrashed. A crash at a random moment rarely lands in that gap, where
// the outcome is durable but everything around it is left behind.
func (p *Process) CrashAtTransition(n int, crash func()) {
	p.mu.Lock()
	p.crash = crash
	p.mu.Unlock()
	p.crashAt.Store(int64(n))
}

// afterTransition counts a committed transition and says whether the process died there.
func (p *Process) afterTransition() bool {
	if p.crashAt.Load() <= 0 || p.crashAt.Add(-1) != 0 {
		return false
	}
	p.mu.Lock()
	crash := p.crash
	p.mu.Unlock()
	crash()
	return true
}

// Reap runs after the crashed process's lock session was terminated: the real unlock then
// fails and closes that connection, as the kernel closes a dead process's sockets, so a
// pool shared by the simulated processes gets its slot back.
func (p *Process) Reap() {
	p.mu.Lock()
	unlock := p.unlock
	p.unlock = nil
	p.mu.Unlock()
	if unlock != nil {
		unlock()
	}
}

// Store is the process's reconcile.Store, RefundStore, WorkQueue, RefundQueue and RunLog.
func (p *Process) Store() *ProcessStore { return &ProcessStore{p: p} }

// Claimer is the process's claimer.
func (p *Process) Claimer() reconcile.Claimer { return processClaimer{p: p} }

// Locker is the process's shard locker.
func (p *Process) Locker() reconcile.Locker { return processLocker{p: p} }

// ProcessStore implements reconcile.Store, reconcile.RefundStore, reconcile.WorkQueue,
// reconcile.RefundQueue and reconcile.RunLog over the real store until the process crashes
// (the refund half is in process_refunds.go).
type ProcessStore struct{ p *Process }

// FindOrder implements reconcile.Store.
func (s *ProcessStore) FindOrder(ctx context.Context, pl reconcile.Platform, m, otn string) (reconcile.Order, error) {
	if s.p.dead() {
		return reconcile.Order{}, ErrCrashed
	}
	return s.p.store.FindOrder(ctx, pl, m, otn)
}

// OutTradeNoExists implements reconcile.Store.
func (s *ProcessStore) OutTradeNoExists(ctx context.Context, pl reconcile.Platform, otn string) (bool, error) {
	if s.p.dead() {
		return false, ErrCrashed
	}
	return s.p.store.OutTradeNoExists(ctx, pl, otn)
}

// ApplyTransition implements reconcile.Store.
func (s *ProcessStore) ApplyTransition(ctx context.Context, t reconcile.Transition) (bool, error) {
	if s.p.dead() {
		return false, ErrCrashed
	}
	changed, err := s.p.store.ApplyTransition(ctx, t)
	if err == nil && s.p.afterTransition() {
		return false, ErrCrashed
	}
	return changed, err
}

// RecordMismatch implements reconcile.Store.
func (s *ProcessStore) RecordMismatch(ctx context.Context, m reconcile.Mismatch) error {
	if s.p.dead() {
		return ErrCrashed
	}
	return s.p.store.RecordMismatch(ctx, m)
}

// Take implements reconcile.WorkQueue.
func (s *ProcessStore) Take(ctx context.Context, q reconcile.TakeQuery) ([]reconcile.Order, error) {
	if s.p.dead() {
		return nil, ErrCrashed
	}
	return s.p.store.Take(ctx, q)
}

// DueAccounts implements reconcile.WorkQueue.
func (s *ProcessStore) DueAccounts(ctx context.Context, q reconcile.TakeQuery) ([]reconcile.DueAccount, error) {
	if s.p.dead() {
		return nil, ErrCrashed
	}
	return s.p.store.DueAccounts(ctx, q)
}

// Checked implements reconcile.WorkQueue.
func (s *ProcessStore) Checked(ctx context.Context, c reconcile.CheckRecord) error {
	if s.p.dead() {
		return ErrCrashed
	}
	return s.p.store.Checked(ctx, c)
}

// Unconfigured implements reconcile.WorkQueue.
func (s *ProcessStore) Unconfigured(ctx context.Context, from, to time.Time, sh reconcile.Shard, c []reconcile.AccountKey) ([]reconcile.AccountCount, error) {
	if s.p.dead() {
		return nil, ErrCrashed
	}
	return s.p.store.Unconfigured(ctx, from, to, sh, c)
}

// StartRun implements reconcile.RunLog.
func (s *ProcessStore) StartRun(ctx context.Context, r *reconcile.Run) error {
	if s.p.dead() {
		return ErrCrashed
	}
	return s.p.store.Runs().StartRun(ctx, r)
}

// SaveProgress implements reconcile.RunLog.
func (s *ProcessStore) SaveProgress(ctx context.Context, r reconcile.Run) error {
	if s.p.dead() {
		return ErrCrashed
	}
	return s.p.store.Runs().SaveProgress(ctx, r)
}

// FinishRun implements reconcile.RunLog.
func (s *ProcessStore) FinishRun(ctx context.Context, r reconcile.Run) error {
	if s.p.dead() {
		return ErrCrashed
	}
	return s.p.store.Runs().FinishRun(ctx, r)
}

// LoadRun implements reconcile.RunLog.
func (s *ProcessStore) LoadRun(ctx context.Context, id int64) (reconcile.Run, error) {
	if s.p.dead() {
		return reconcile.Run{}, ErrCrashed
	}
	return s.p.store.Runs().LoadRun(ctx, id)
}

// TakeOver implements reconcile.RunLog.
func (s *ProcessStore) TakeOver(ctx context.Context, by reconcile.Run) ([]reconcile.TakenOver, error) {
	if s.p.dead() {
		return nil, ErrCrashed
	}
	return s.p.store.Runs().TakeOver(ctx, by)
}

type processClaimer struct{ p *Process }

func (c processClaimer) Peek(ctx context.Context, key string) reconcile.ClaimState {
	if c.p.dead() {
		return reconcile.ClaimUnavailable
	}
	return c.p.claims.Peek(ctx, key)
}

func (c processClaimer) Claim(ctx context.Context, key string, lease time.Duration) reconcile.ClaimState {
	if c.p.dead() {
		return reconcile.ClaimUnavailable
	}
	return c.p.claims.Claim(ctx, key, lease)
}

func (c processClaimer) MarkDone(ctx context.Context, key string, ttl time.Duration) {
	if !c.p.dead() {
		c.p.claims.MarkDone(ctx, key, ttl)
	}
}

func (c processClaimer) Release(ctx context.Context, key string) {
	if !c.p.dead() {
		c.p.claims.Release(ctx, key)
	}
}

type processLocker struct{ p *Process }

// TryLock takes the real lock and remembers its session, so a crash can end it. After a
// crash the unlock does nothing: a dead process unlocks nothing.
func (l processLocker) TryLock(ctx context.Context, name string) (reconcile.HeldLock, bool, error) {
	if l.p.dead() {
		return reconcile.HeldLock{}, false, ErrCrashed
	}
	// No wait: a crash here ends its lock session before the next pass starts.
	lock, ok, err := l.p.store.Locker().WithWait(0).TryLock(ctx, name)
	if err != nil || !ok {
		return lock, ok, err
	}
	l.p.mu.Lock()
	if l.p.dead() {
		// The crash came while the lock was being taken: Crash found no session to end, so
		// end it here, as a dead process's socket closes. Checked under the mutex Crash reads
		// the session under, so one of the two always ends it.
		l.p.mu.Unlock()
		lock.Unlock()
		return reconcile.HeldLock{}, false, ErrCrashed
	}
	l.p.session, l.p.unlock = lock.Session, lock.Unlock
	l.p.mu.Unlock()
	lock.Unlock = func() {
		if !l.p.dead() {
			l.p.Reap()
		}
	}
	return lock, true, nil
}

// Switch is the claim store as the faults leave it: Redis up, or down (a client pointed at
// a closed port, so the real claimer's failure path runs).
type Switch struct {
	up, down reconcile.Claimer
	isDown   atomic.Bool
}

// NewSwitch builds the switch over a working and a broken claimer.
func NewSwitch(up, down reconcile.Claimer) *Switch { return &Switch{up: up, down: down} }

// SetDown turns Redis off or on.
func (s *Switch) SetDown(down bool) { s.isDown.Store(down) }

func (s *Switch) pick() reconcile.Claimer {
	if s.isDown.Load() {
		return s.down
	}
	return s.up
}

// Peek implements reconcile.Claimer.
func (s *Switch) Peek(ctx context.Context, key string) reconcile.ClaimState {
	return s.pick().Peek(ctx, key)
}

// Claim implements reconcile.Claimer.
func (s *Switch) Claim(ctx context.Context, key string, lease time.Duration) reconcile.ClaimState {
	return s.pick().Claim(ctx, key, lease)
}

// MarkDone implements reconcile.Claimer.
func (s *Switch) MarkDone(ctx context.Context, key string, ttl time.Duration) {
	s.pick().MarkDone(ctx, key, ttl)
}

// Release implements reconcile.Claimer.
func (s *Switch) Release(ctx context.Context, key string) { s.pick().Release(ctx, key) }
