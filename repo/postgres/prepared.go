package postgres

import (
	"context"
	"fmt"
	"sync"

	"github.com/jmoiron/sqlx"
)

// statements are a Store's prepared statements, one per query text, each prepared on the
// first connection that runs it and then on every other one as it comes (database/sql keeps
// track of which connection has which).
//
// The statements every check sends (a transition, a take, a lookup) were planned afresh each
// time as unnamed statements: PostgreSQL spent more on parsing and planning the transition's
// CTE than on running it (0.5 ms of planning per order transition, 1.0 ms per refund
// transition under a pass's load). A prepared statement is parsed once per connection, and
// its plan is cached once a generic one proves as good.
//
// A Store that is dropped closes its statements (runtime.AddCleanup in NewStore): a
// simulation that builds a Store per process over one long-lived pool must not leave the
// server a statement per Store on every session.
type statements struct {
	db      *sqlx.DB
	byQuery sync.Map // query text -> *sqlx.Stmt
}

func newStatements(db *sqlx.DB) *statements { return &statements{db: db} }

// get returns query's statement, preparing it if this Store has not yet. Two callers
// preparing the same query at once keep the first; the other's is closed.
func (c *statements) get(ctx context.Context, query string) (*sqlx.Stmt, error) {
	if st, ok := c.byQuery.Load(query); ok {
		return st.(*sqlx.Stmt), nil
	}
	st, err := c.db.PreparexContext(ctx, query)
	if err != nil {
		return nil, fmt.Errorf("prepare: %w", err)
	}
	if first, lost := c.byQuery.LoadOrStore(query, st); lost {
		st.Close()
		return first.(*sqlx.Stmt), nil
	}
	return st, nil
}

func (c *statements) close() {
	c.byQuery.Range(func(q, st any) bool {
		st.(*sqlx.Stmt).Close()
		c.byQuery.Delete(q)
		return true
	})
}

// getPrepared is GetContext through query's prepared statement.
func (s *Store) getPrepared(ctx context.Context, dest any, query string, args ...any) error {
	st, err := s.stmts.get(ctx, query)
	if err != nil {
		return err
	}
	return st.GetContext(ctx, dest, args...)
}

// selectPrepared is SelectContext through query's prepared statement.
func (s *Store) selectPrepared(ctx context.Context, dest any, query string, args ...any) error {
	st, err := s.stmts.get(ctx, query)
	if err != nil {
		return err
	}
	return st.SelectContext(ctx, dest, args...)
}

// execPrepared is ExecContext through query's prepared statement.
func (s *Store) execPrepared(ctx context.Context, query string, args ...any) error {
	st, err := s.stmts.get(ctx, query)
	if err != nil {
		return err
	}
	_, err = st.ExecContext(ctx, args...)
	return err
}
