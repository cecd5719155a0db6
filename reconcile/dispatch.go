package reconcile

import (
	"context"
	"sync"
	"sync/atomic"
)

// MaxActiveAccounts is how many accounts' taking loops a pass runs at once. Each has its own
// workers, so up to this many accounts never wait for one another; past it (a service
// provider's thousands of sub-merchants, all with work due) an account's loop starts when
// another's has drained, and the pass's goroutines stay bounded.
const MaxActiveAccounts = 256

// dispatcher starts the loops of a pass's due accounts: at most MaxActiveAccounts at once
// and, where the settings can read the call budgets' queues (RunnerSettings.Budgets), in
// each budget's group only while that budget can use more callers.
//
// Without the second rule a service provider's pass at Q=100 would start 256 sub-merchants'
// loops at once: 2.5 s of calls taken from the database, leased and parked in the budget's
// queue, which a signal's drain then waits out (at a low qps, for the whole drain timeout).
// Held to about two bunches waiting, the same calls go out at the same pace with 16-24
// orders taken instead of 256. It never caps a slow platform: while checks spend their time
// at the platform rather than in the queue, the queue stays short and more loops start.
type dispatcher struct {
	p            *pass
	ctx, workCtx context.Context
	fatal        *fatalLatch
	active       chan struct{} // one per running loop
	wg           sync.WaitGroup

	groups map[AccountKey]*budgetGroup // read and written by run's walk only
	mu     sync.Mutex                  // guards each group's held and logged
}

// budgetGroup is the accounts whose calls one budget bounds.
type budgetGroup struct {
	owner AccountKey // the account whose budget it is
	queue BudgetQueue
	// arriving counts the calls on their way to the queue: one for each loop whose first
	// take is still out, one for each check started that has not yet asked the budget. The
	// queue sees them only once they wait; without them, loops started in one go would all
	// find it empty.
	arriving atomic.Int64
	// wake is told when arriving drops without the queue growing (a take came back short).
	wake   chan struct{}
	held   []DueAccount // accounts waiting for room, in order (dispatcher.mu)
	logged bool         // the pass has said it holds this group's accounts (dispatcher.mu)
}

func newDispatcher(p *pass, ctx, workCtx context.Context) *dispatcher {
	return &dispatcher{p: p, ctx: ctx, workCtx: workCtx, fatal: &fatalLatch{stop: make(chan struct{})},
		active: make(chan struct{}, MaxActiveAccounts), groups: map[AccountKey]*budgetGroup{}}
}

// run starts every account's loop, in order within each group, and returns once all have
// ended; a signal or a fatal error ends the starting early.
func (d *dispatcher) run(due []DueAccount) {
	for _, a := range due {
		if !waitForSlot(d.ctx, d.active, d.fatal) {
			break
		}
		g := d.group(a.AccountKey)
		if g != nil && d.hold(g, a) {
			<-d.active
			continue
		}
		d.start(a, g)
	}
	d.wg.Wait()
}

// group is the budget group of acct, nil when its budget has no queue to read.
func (d *dispatcher) group(acct AccountKey) *budgetGroup {
	if d.p.settings.Budgets == nil {
		return nil
	}
	key, q := d.p.settings.Budgets.Queue(acct)
	if q == nil {
		return nil
	}
	g := d.groups[key]
	if g == nil {
		g = &budgetGroup{owner: key, queue: q, wake: make(chan struct{}, 1)}
		d.groups[key] = g
	}
	return g
}

// hold queues a behind its group's held accounts when there are any, or when the group's
// budget has callers enough; the first held account starts the group's releaser.
func (d *dispatcher) hold(g *budgetGroup, a DueAccount) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(g.held) == 0 && !g.full() {
		return false
	}
	g.held = append(g.held, a)
	if len(g.held) == 1 {
		d.wg.Add(1)
		go d.release(g)
	}
	if !g.logged {
		// Once per group and pass: why a provider's sub-merchants start over time.
		g.logged = true
		d.p.log.Info().Str("platform", string(g.owner.Platform)).Str("budget_owner", g.owner.MerchantID).
			Msg("call budget has callers enough: the accounts it bounds start as it frees up")
	}
	return true
}

// release starts a group's held accounts, one each time its budget has room, until none is
// left, a signal comes or a fatal error stops the pass.
func (d *dispatcher) release(g *budgetGroup) {
	defer d.wg.Done()
	for {
		// Moved before full: a caller leaving the queue in between still wakes this.
		moved := g.queue.Moved()
		if g.full() {
			select {
			case <-moved:
			case <-g.wake:
			case <-d.ctx.Done():
				return
			case <-d.fatal.stop:
				return
			}
			continue
		}
		if !waitForSlot(d.ctx, d.active, d.fatal) {
			return
		}
		d.mu.Lock()
		if g.full() { // filled up while this waited for a slot
			d.mu.Unlock()
			<-d.active
			continue
		}
		a := g.held[0]
		g.held = g.held[1:]
		last := len(g.held) == 0
		d.mu.Unlock()
		d.start(a, g)
		if last {
			return // an account held after this starts a releaser of its own
		}
	}
}

// start runs a's loop on the slot the caller holds.
func (d *dispatcher) start(a DueAccount, g *budgetGroup) {
	g.coming() // until the loop's first take is back
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer func() { <-d.active }()
		d.p.takeLoop(d.ctx, d.workCtx, a, g, d.fatal)
	}()
}

// coming counts one more call on its way to the group's queue.
func (g *budgetGroup) coming() {
	if g != nil {
		g.arriving.Add(1)
	}
}

// full reports whether the group's budget has callers enough, counting those on their way.
func (g *budgetGroup) full() bool {
	waiting, enough := g.queue.Waiting()
	return waiting+int(g.arriving.Load()) >= enough
}

// arrived takes a call off the way to the queue; seen says the queue gains it. A drop the
// queue will not see (nothing taken, or a loop that ended) wakes the group's releaser.
func (g *budgetGroup) arrived(seen bool) {
	if g == nil {
		return
	}
	g.arriving.Add(-1)
	if !seen {
		select {
		case g.wake <- struct{}{}:
		default:
		}
	}
}
