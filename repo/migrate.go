// Package repo holds payrecon's adapters: the PostgreSQL store (sqlx + lib/pq) and the Redis
// claimer (go-redis) implementing the interfaces package reconcile consumes, and the embedded
// schema migrations.
package repo

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/jmoiron/sqlx"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// migrateLockKey is the advisory lock that serialises concurrent `reconciler migrate` runs.
const migrateLockKey = 0x70617972 // "payr"

// Migration is one embedded schema step.
type Migration struct {
	Version string // file name without .sql, ordered lexically
	SQL     string
}

// Migrations returns the embedded migrations in the order they apply.
func Migrations() ([]Migration, error) {
	names, err := fs.Glob(migrationFiles, "migrations/*.sql")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	out := make([]Migration, 0, len(names))
	for _, n := range names {
		b, err := migrationFiles.ReadFile(n)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", n, err)
		}
		v := strings.TrimSuffix(strings.TrimPrefix(n, "migrations/"), ".sql")
		out = append(out, Migration{Version: v, SQL: string(b)})
	}
	return out, nil
}

// Migrate applies every embedded migration not applied yet, each in its own transaction.
// It holds an advisory lock for the duration so that two processes migrating at once
// serialise instead of racing; it is safe to repeat. It returns the versions it applied.
func Migrate(ctx context.Context, db *sqlx.DB) ([]string, error) {
	migs, err := Migrations()
	if err != nil {
		return nil, err
	}
	conn, err := db.Connx(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrate: connect: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, migrateLockKey); err != nil {
		return nil, fmt.Errorf("migrate: take advisory lock: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrateLockKey) //nolint:errcheck // the session ends with the connection anyway

	if _, err := conn.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`); err != nil {
		return nil, fmt.Errorf("migrate: create schema_migrations: %w", err)
	}
	var done []string
	if err := conn.SelectContext(ctx, &done, `SELECT version FROM schema_migrations`); err != nil {
		return nil, fmt.Errorf("migrate: read applied versions: %w", err)
	}
	applied := make(map[string]bool, len(done))
	for _, v := range done {
		applied[v] = true
	}
	var now []string
	for _, m := range migs {
		if applied[m.Version] {
			continue
		}
		tx, err := conn.BeginTxx(ctx, nil)
		if err != nil {
			return now, fmt.Errorf("migrate %s: begin: %w", m.Version, err)
		}
		if _, err := tx.ExecContext(ctx, m.SQL); err != nil {
			tx.Rollback() //nolint:errcheck // the exec error is the one worth reporting
			return now, fmt.Errorf("migrate %s: %w", m.Version, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version) VALUES ($1)`, m.Version); err != nil {
			tx.Rollback() //nolint:errcheck
			return now, fmt.Errorf("migrate %s: record version: %w", m.Version, err)
		}
		if err := tx.Commit(); err != nil {
			return now, fmt.Errorf("migrate %s: commit: %w", m.Version, err)
		}
		now = append(now, m.Version)
	}
	return now, nil
}
