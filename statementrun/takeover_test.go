package statementrun

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

// TestDeadStatementRunIsTakenOver: a statement run that stopped without recording its end
// (SIGKILL, OOM, or its last write failed) leaves its row "running"; the next statement run
// can take that run's liveness lock, so it marks the row interrupted and names itself. A
// run that is alive holds its lock and is left alone, as are other kinds of run, and the run
// itself records its own lock and ends by releasing it.
func TestDeadStatementRunIsTakenOver(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := context.Background()
	row := func(mode, lock string) int64 {
		t.Helper()
		var id int64
		if err := e.db.DB.Get(&id, `INSERT INTO reconcile_runs (mode, started_at, status, shard, lock_name)
			VALUES ($1, now() - interval '1 hour', 'running', '0/1', $2) RETURNING id`, mode, lock); err != nil {
			t.Fatal(err)
		}
		return id
	}
	dead := row("statement", "payrecon:statement:00000000000000aa")
	live := row("statement", "payrecon:statement:00000000000000bb")
	pass := row("once", "payrecon:run:0/1")
	held, ok, err := e.store.Locker().WithWait(0).TryLock(ctx, "payrecon:statement:00000000000000bb")
	if err != nil || !ok {
		t.Fatalf("hold the live run's lock: %v %v", ok, err)
	}
	defer held.Unlock()

	path := writeBill(t, reconcile.Alipay, testDay, nil)
	res, err := e.runFile(reconcile.Alipay, testDay, path, false)
	if err != nil {
		t.Fatal(err)
	}
	status := func(id int64) (st, msg string) {
		t.Helper()
		if err := e.db.DB.QueryRow(`SELECT status, COALESCE(error, '') FROM reconcile_runs WHERE id = $1`, id).Scan(&st, &msg); err != nil {
			t.Fatal(err)
		}
		return st, msg
	}
	if st, msg := status(dead); st != "interrupted" || !strings.Contains(msg, "taken over by run") || !strings.HasSuffix(msg, " "+strconv.FormatInt(res.Run.ID, 10)) {
		t.Errorf("dead statement run: %s %q, want interrupted and taken over by run %d", st, msg, res.Run.ID)
	}
	if st, _ := status(live); st != "running" {
		t.Errorf("a statement run whose lock is held was marked %s", st)
	}
	if st, _ := status(pass); st != "running" {
		t.Errorf("a pass's row was marked %s by a statement run: passes take over their own", st)
	}
	var lock string
	if err := e.db.DB.Get(&lock, `SELECT lock_name FROM reconcile_runs WHERE id = $1`, res.Run.ID); err != nil || !strings.HasPrefix(lock, "payrecon:statement:") {
		t.Fatalf("the run recorded lock %q (%v)", lock, err)
	}
	// Finished, the run no longer holds its lock: the lock can be taken at once.
	after, ok, err := e.store.Locker().WithWait(time.Second).TryLock(ctx, lock)
	if err != nil || !ok {
		t.Errorf("the finished run still holds its lock %s: %v %v", lock, ok, err)
	} else {
		after.Unlock()
	}
}
