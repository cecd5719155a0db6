package reconcile

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// MaxBatch is the most findings one bulk move takes: an incident's worth, and what a
// person can still have read the count of before confirming.
const MaxBatch = 1000

// BatchItem is one finding of a batch and the evidence version the person saw of it (0: not
// named, as for a single move).
type BatchItem struct {
	ID      int64
	Version int64
}

// ParseBatchItem reads "<id>.<version>", the form a page writes a finding it shows in.
func ParseBatchItem(s string) (BatchItem, error) {
	ids, vs, _ := strings.Cut(s, ".")
	id, err := strconv.ParseInt(ids, 10, 64)
	if err != nil || id <= 0 {
		return BatchItem{}, Inputf("a selected finding %q is not <id>.<version>", s)
	}
	v, err := strconv.ParseInt(vs, 10, 64)
	if vs != "" && (err != nil || v < 0) {
		return BatchItem{}, Inputf("a selected finding %q is not <id>.<version>", s)
	}
	return BatchItem{ID: id, Version: v}, nil
}

// String is the item as ParseBatchItem reads it.
func (b BatchItem) String() string { return fmt.Sprintf("%d.%d", b.ID, b.Version) }

// Mover makes one review move (the review store's Acknowledge, Resolve, Approve or Reject).
type Mover func(ctx context.Context, id int64, in ReviewInput) (ReviewMove, error)

// BatchRefusal is a finding of a batch the move was refused for, and why.
type BatchRefusal struct {
	ID  int64
	Err error
}

// BatchResult is what a bulk move did: the findings moved, in the order given, and those
// refused.
type BatchResult struct {
	Moved   []ReviewMove
	Refused []BatchRefusal
}

// MoveBatch makes one move, with one input, on every item: each finding is its own move (its
// own audit row, its own version check, maker-checker for each), so a refusal refuses that
// finding alone. workers moves go at once (1 when below it). Duplicate ids move once. An
// error that is not a review refusal (the database gone) stops the batch: the moves made
// stay made, the rest are refused with it.
func MoveBatch(ctx context.Context, move Mover, items []BatchItem, in ReviewInput, workers int) (BatchResult, error) {
	if len(items) > MaxBatch {
		return BatchResult{}, Inputf("a batch is at most %d findings, got %d: narrow the filter", MaxBatch, len(items))
	}
	seen := map[int64]bool{}
	items = slices.DeleteFunc(slices.Clone(items), func(b BatchItem) bool {
		dup := seen[b.ID]
		seen[b.ID] = true
		return dup
	})
	workers = max(1, min(workers, len(items)))
	moved := make([]*ReviewMove, len(items))
	refused := make([]error, len(items))
	var (
		mu    sync.Mutex
		fatal error
		wg    sync.WaitGroup
	)
	next := make(chan int)
	for range workers {
		wg.Go(func() {
			for i := range next {
				one := in
				one.Version = items[i].Version
				m, err := move(ctx, items[i].ID, one)
				switch {
				case err == nil:
					moved[i] = &m
				case IsReviewRefusal(err):
					refused[i] = err
				default:
					mu.Lock()
					fatal = cmp.Or(fatal, err)
					mu.Unlock()
					refused[i] = err
				}
			}
		})
	}
	for i := range items {
		mu.Lock()
		stop := cmp.Or(fatal, ctx.Err()) // read under the lock: a worker may be setting it
		mu.Unlock()
		if stop != nil {
			refused[i] = stop
			continue
		}
		next <- i
	}
	close(next)
	wg.Wait()
	var res BatchResult
	for i, it := range items {
		if moved[i] != nil {
			res.Moved = append(res.Moved, *moved[i])
		} else {
			res.Refused = append(res.Refused, BatchRefusal{ID: it.ID, Err: refused[i]})
		}
	}
	return res, fatal
}

// IsReviewRefusal says whether err is the review rules refusing a move (the finding's
// status, its evidence, maker-checker, a bad request, an unknown id), not a failure to ask.
func IsReviewRefusal(err error) bool {
	for _, sentinel := range []error{ErrNotFound, ErrStaleEvidence, ErrSelfApproval, ErrIllegalReview, ErrBadReview} {
		if errors.Is(err, sentinel) {
			return true
		}
	}
	return false
}
