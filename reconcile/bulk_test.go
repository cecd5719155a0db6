package reconcile_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/payrecon/payrecon/reconcile"
)

func TestMoveBatch(t *testing.T) {
	var mu sync.Mutex
	calls := map[int64]int{}
	down := errors.New("connection refused")
	move := func(_ context.Context, id int64, in reconcile.ReviewInput) (reconcile.ReviewMove, error) {
		mu.Lock()
		calls[id]++
		mu.Unlock()
		switch {
		case id == 3:
			return reconcile.ReviewMove{}, reconcile.ErrIllegalReview
		case id == 4 && in.Version != 9:
			return reconcile.ReviewMove{}, reconcile.ErrStaleEvidence
		case id == 99:
			return reconcile.ReviewMove{}, down
		}
		return reconcile.ReviewMove{Finding: reconcile.Finding{ID: id}}, nil
	}
	items := []reconcile.BatchItem{{ID: 1}, {ID: 2}, {ID: 3}, {ID: 4, Version: 8}, {ID: 2}, {ID: 5}}
	res, err := reconcile.MoveBatch(context.Background(), move, items, reconcile.ReviewInput{By: "ann@example.com"}, 3)
	if err != nil {
		t.Fatal(err)
	}
	var moved []int64
	for _, m := range res.Moved {
		moved = append(moved, m.Finding.ID)
	}
	if len(moved) != 3 || moved[0] != 1 || moved[1] != 2 || moved[2] != 5 || calls[2] != 1 {
		t.Fatalf("moved %v (finding 2 moved %d times): want 1, 2, 5 in order, each once", moved, calls[2])
	}
	if len(res.Refused) != 2 || !errors.Is(res.Refused[0].Err, reconcile.ErrIllegalReview) || !errors.Is(res.Refused[1].Err, reconcile.ErrStaleEvidence) {
		t.Fatalf("refused %+v: want 3 illegal, 4 stale (its own version named)", res.Refused)
	}

	// A failure to ask is no refusal: it stops the batch and is the batch's error.
	res, err = reconcile.MoveBatch(context.Background(), move, []reconcile.BatchItem{{ID: 99}, {ID: 7}, {ID: 8}}, reconcile.ReviewInput{}, 1)
	if !errors.Is(err, down) || len(res.Moved)+len(res.Refused) != 3 {
		t.Fatalf("%v, %+v: want the database error, every item accounted for", err, res)
	}

	for _, c := range []struct {
		in   string
		want reconcile.BatchItem
		ok   bool
	}{{"12.3", reconcile.BatchItem{ID: 12, Version: 3}, true}, {"12", reconcile.BatchItem{ID: 12}, true}, {"x.1", reconcile.BatchItem{}, false}, {"0.1", reconcile.BatchItem{}, false}, {"5.-1", reconcile.BatchItem{}, false}} {
		got, err := reconcile.ParseBatchItem(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseBatchItem(%q) = %+v, %v", c.in, got, err)
		}
	}
}
