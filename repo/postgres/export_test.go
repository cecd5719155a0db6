package postgres

import (
	"context"

	"github.com/jmoiron/sqlx"

	"github.com/payrecon/payrecon/reconcile"
)

// UnlockOn lets the external tests drive an unlock that fails (a bad query stands for any
// failure that leaves the session usable and the lock held).
func UnlockOn(ctx context.Context, conn *sqlx.Conn, query string, key int64) {
	unlockOn(ctx, conn, query, key)
}

// LockKey is lockKey.
func LockKey(name string) int64 { return lockKey(name) }

// AtStakeSQL is atStakeSQL, the money rule in SQL.
const AtStakeSQL = atStakeSQL

// RenamedMigrations is renamedMigrations: versions as earlier releases recorded them.
var RenamedMigrations = renamedMigrations

// SearchWhere is searchWhere over every account: the WHERE clause of a filter and its
// arguments.
func SearchWhere(f reconcile.FindingFilter) (string, []any) { return searchWhere(f, nil) }
