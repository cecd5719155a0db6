package postgres

import (
	"context"
	"fmt"
	"net/url"

	"github.com/lib/pq"
)

// CreateDatabase creates database name on the server adminURL points at, migrates it, and
// returns its URL and a function that drops it (best effort, connections forced off). The
// demo uses it to run against a database of its own.
func CreateDatabase(ctx context.Context, adminURL, name string) (string, func(), error) {
	u, err := url.Parse(adminURL)
	if err != nil {
		return "", nil, fmt.Errorf("parse the admin database URL: %w", err)
	}
	admin, err := Open(ctx, adminURL)
	if err != nil {
		return "", nil, err
	}
	if _, err := admin.ExecContext(ctx, `CREATE DATABASE `+pq.QuoteIdentifier(name)); err != nil {
		admin.Close()
		return "", nil, fmt.Errorf("create database %s: %w", name, err)
	}
	u.Path = "/" + name
	drop := func() {
		admin.Exec(`DROP DATABASE IF EXISTS ` + pq.QuoteIdentifier(name) + ` WITH (FORCE)`) //nolint:errcheck // best effort
		admin.Close()
	}
	db, err := Open(ctx, u.String())
	if err != nil {
		drop()
		return "", nil, err
	}
	defer db.Close()
	if _, err := Migrate(ctx, db); err != nil {
		drop()
		return "", nil, err
	}
	return u.String(), drop, nil
}
