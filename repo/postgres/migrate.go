// Package postgres is payrecon's PostgreSQL adapter (sqlx + lib/pq): the orders, the work
// queue, the run log and the advisory locks, findings and their review, refunds, the outbox,
// the statement's staging, each implementing an interface its consumer declares, and the
// embedded schema migrations. Redis lives next door, in package redis.
package postgres

import (
	"context"
	"embed"
	"fmt"
	"io/fs"
	"sort"
	"strings"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
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

// renamedMigrations maps versions that releases before 2026-12-06 recorded to the names
// their files have now. Two migrations were both numbered 0005; the second and every one
// after it moved up by one, so that numbers are unique and say the order. A database those
// releases migrated holds the old names, and must not take the same steps again under the
// new ones.
var renamedMigrations = [][2]string{
	{"0005_outbox_relay", "0006_outbox_relay"},
	{"0006_run_takeover", "0007_run_takeover"},
	{"0007_review_trust", "0008_review_trust"},
	{"0008_statements", "0009_statements"},
	{"0009_review_functions", "0010_review_functions"},
	{"0010_refunds", "0011_refunds"},
	{"0011_refund_pass", "0012_refund_pass"},
	{"0012_statement_refunds", "0013_statement_refunds"},
	{"0013_outbox_notify_after_commit", "0014_outbox_notify_after_commit"},
}

// renameApplied records the applied migrations that renamedMigrations names under their
// new names, in one statement (no old name is a new one: the names after the number all
// differ). Run under the migration lock; a second run finds nothing to rename.
func renameApplied(ctx context.Context, conn *sqlx.Conn) error {
	olds, news := make([]string, len(renamedMigrations)), make([]string, len(renamedMigrations))
	for i, r := range renamedMigrations {
		olds[i], news[i] = r[0], r[1]
	}
	if _, err := conn.ExecContext(ctx, `UPDATE schema_migrations m SET version = r.new
		FROM unnest($1::text[], $2::text[]) AS r(old, new) WHERE m.version = r.old`, pq.Array(olds), pq.Array(news)); err != nil {
		return fmt.Errorf("migrate: rename the versions recorded before the renumbering: %w", err)
	}
	return nil
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
	if err := renameApplied(ctx, conn); err != nil {
		return nil, err
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
