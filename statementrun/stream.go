package statementrun

import (
	"context"
	"hash/fnv"
	"slices"
	"sync"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/reconcile"
)

// booksChunk is how many classified lines share one read of their orders and refunds: the
// first lines reach the apply path while the classification is still running, and a day's
// few thousand lines cost a few dozen reads.
const booksChunk = 64

// chunksAhead is how many chunks the classification may find ahead of the apply path (4,096
// lines, about a MiB): a classification that waits for the workers holds back its own end
// (the held list, the lines of other days) and every statement after it.
const chunksAhead = 64

// streamApplier applies a day's lines while the classification streams them in: the
// classification is one server-side join on one core, the apply path a commit per line, and
// the two overlap instead of following each other.
//
// Lines are read in chunks with their orders (DayTx.Books) and go to the workers
// as they come, all lines of one order to the same worker, in the order they were handed
// over. A refund line whose order was PENDING when the classification began is handed over
// after every payment line: a payment and its refund on the same day must repair, then
// refund, and the classification returns lines in no particular order. Any other refund line
// goes at once, as payment lines do: a payment line moves only a PENDING order, so none of
// the day's can change what such a refund finds. Lines an earlier run of the day settled are
// counted as that run counted them and not applied.
type streamApplier struct {
	r       *Runner
	ctx     context.Context
	log     zerolog.Logger
	acct    reconcile.AccountKey
	spec    Spec
	bill    Bill
	tx      DayTx
	chunk   []reconcile.ClassifiedLine
	chunks  chan []reconcile.ClassifiedLine
	queues  []chan bookedLine
	refunds []reconcile.ClassifiedLine
	handed  map[int]bool   // lines handed over before the classification (first)
	prior   Tally          // lines an earlier run settled
	unread  int            // lines whose books could not be read
	firsts  sync.WaitGroup // the sender of first's lines
	routed  sync.WaitGroup // the chunks' reader
	workers sync.WaitGroup
	outs    [][]reconcile.LineOutcome
	tallies []Tally
}

// bookedLine is a line with what our books held for its order when its chunk was read.
type bookedLine struct {
	line  reconcile.ClassifiedLine
	books *reconcile.LineBooks
}

func (r *Runner) newStreamApplier(ctx context.Context, log zerolog.Logger, acct reconcile.AccountKey, spec Spec, bill Bill,
	tx DayTx) *streamApplier {
	a := &streamApplier{r: r, ctx: ctx, log: log, acct: acct, spec: spec, bill: bill, tx: tx,
		chunks: make(chan []reconcile.ClassifiedLine, chunksAhead), queues: make([]chan bookedLine, r.concurrency),
		outs: make([][]reconcile.LineOutcome, r.concurrency), tallies: make([]Tally, r.concurrency)}
	for i := range a.queues {
		a.queues[i] = make(chan bookedLine, booksChunk)
		a.workers.Go(func() {
			for b := range a.queues[i] {
				if o, ok := r.applyLine(ctx, log, acct, spec, bill, b.line, *b.books, &a.tallies[i]); ok {
					a.outs[i] = append(a.outs[i], o)
				}
			}
		})
	}
	a.routed.Go(a.route)
	return a
}

// first hands over, ahead of the classification, payment lines known to need the apply
// path (pendingPicker): they are applied while the server still hashes the day's orders, a
// phase in which it keeps one core busy and leaves the other idle. The classification may
// return them again (its snapshot can predate their repair); add skips those.
func (a *streamApplier) first(lines []reconcile.ClassifiedLine) {
	a.handed = make(map[int]bool, len(lines))
	for _, l := range lines {
		a.handed[l.No] = true
	}
	// Sent from a goroutine of their own: the classification starts at once, not once the
	// workers have made room for them.
	a.firsts.Go(func() {
		for c := range slices.Chunk(lines, booksChunk) {
			a.chunks <- c
		}
	})
}

// add takes one classified line (ClassifyEach's callback): it never waits for the apply path
// beyond a full hand-over channel.
func (a *streamApplier) add(l reconcile.ClassifiedLine) {
	if !a.handed[l.No] {
		a.take(l)
	}
}

func (a *streamApplier) take(l reconcile.ClassifiedLine) {
	switch {
	case l.Prior != "":
		countPrior(&a.prior, l)
	case l.Kind == reconcile.BillRefund && l.OrderStatus == reconcile.StatusPending:
		a.refunds = append(a.refunds, l)
	default:
		if a.chunk = append(a.chunk, l); len(a.chunk) == booksChunk {
			a.chunks <- a.chunk
			a.chunk = nil
		}
	}
}

// route reads each chunk's orders and hands its lines to their workers. A chunk whose books
// cannot be read is not applied: its lines count as errors, and a re-run of the day applies
// them.
func (a *streamApplier) route() {
	defer func() {
		for _, q := range a.queues {
			close(q)
		}
	}()
	for chunk := range a.chunks {
		books, err := a.tx.Books(a.ctx, chunk)
		if err != nil {
			a.unread += len(chunk)
			a.log.Error().Err(err).Int("lines", len(chunk)).Msg("bill lines not applied: their orders and refunds could not be read")
			continue
		}
		for _, l := range chunk {
			a.queues[workerOf(l.OutTradeNo, len(a.queues))] <- bookedLine{line: l, books: &books}
		}
	}
}

// finish applies what is left once the classification has ended (or failed): the last
// chunk of lines, then the refund lines that waited for the payment lines. It returns every applied line's outcome and
// the lines' tally.
func (a *streamApplier) finish() ([]reconcile.LineOutcome, Tally) {
	a.firsts.Wait()
	if len(a.chunk) > 0 {
		a.chunks <- a.chunk
	}
	for c := range slices.Chunk(a.refunds, booksChunk) {
		a.chunks <- c
	}
	close(a.chunks)
	a.routed.Wait()
	a.workers.Wait()
	t := a.prior
	t.Errors += a.unread
	var out []reconcile.LineOutcome
	for i := range a.outs {
		out = append(out, a.outs[i]...)
		t.add(a.tallies[i])
	}
	return out, t
}

// workerOf is the worker all lines of an order go to.
func workerOf(outTradeNo string, workers int) int {
	h := fnv.New32a()
	h.Write([]byte(outTradeNo))
	return int(h.Sum32() % uint32(workers))
}
