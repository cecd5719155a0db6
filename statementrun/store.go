package statementrun

import (
	"context"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/statement"
)

// Store is what a statement run needs of the database. repo/postgres's Store is one once
// wired (worker.StatementStore): its BeginStatement returns its own transaction type, which
// Go does not let stand for a method returning DayTx.
type Store interface {
	// BeginStatement opens the day's transaction, waits for the account's statement lock
	// and makes the staging table ready.
	BeginStatement(ctx context.Context, day reconcile.StatementDay, runID int64) (DayTx, error)
	// WarmConns opens up to n pooled connections for the apply workers ahead of need.
	WarmConns(ctx context.Context, n int)
	// LastStatementDay is the newest day reconciled for the account ("" when none).
	LastStatementDay(ctx context.Context, acct reconcile.AccountKey) (string, error)
	// TakeOverStatementRuns marks interrupted the runs whose liveness lock nobody holds.
	TakeOverStatementRuns(ctx context.Context, by int64) ([]int64, error)
}

// DayTx is one account's day in one transaction: nothing it writes is seen before Commit,
// so a rejected bill or a dry run leaves nothing behind. A line walks it one way: Stage
// (the reader's lines in), ClassifyEach (the lines that are more than a plain match out),
// Books (their orders and refunds, for the apply path), RecordLines (what became of them).
type DayTx interface {
	// PendingTrades is the account's PENDING orders when they are at most limit (ok false:
	// more), so their lines can be applied while the classification runs.
	PendingTrades(ctx context.Context, limit int) (map[string]struct{}, bool, error)
	Stage(ctx context.Context, r statement.Reader) (reconcile.StagedBill, error)
	// ClassifyEach calls each on the caller's goroutine for every line that is not a plain
	// match, and holds the day's PAID orders no line names.
	ClassifyEach(ctx context.Context, each func(reconcile.ClassifiedLine)) error
	Books(ctx context.Context, lines []reconcile.ClassifiedLine) (reconcile.LineBooks, error)
	RecordLines(ctx context.Context, outcomes []reconcile.LineOutcome) error
	// HoldUnlisted holds the day's SUCCESS refunds the bill does not list.
	HoldUnlisted(ctx context.Context) (int, error)
	// SettleHeld is what stays held of the previous day's list after this day's bill;
	// MarkReported records which of those were reported.
	SettleHeld(ctx context.Context, prevDate string) ([]reconcile.HeldEntry, error)
	MarkReported(ctx context.Context, prevDate string, held []reconcile.HeldEntry) error
	SaveDay(ctx context.Context, f reconcile.StatementFigures) error
	Commit() error
	Rollback()
}
