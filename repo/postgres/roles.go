package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"
)

// The least-privilege roles every deployment runs under. The migrating role owns the tables
// (and could alter the audit trail's triggers): no runtime process should use it.
const (
	RoleWorker   = "payrecon_worker"   // run, backfill, serve, statement, relay
	RoleReviewer = "payrecon_reviewer" // mismatches ack/resolve/approve/reject, the review console
	RoleReadonly = "payrecon_readonly" // mismatches list/show, report, dashboards
)

// Roles lists the roles in the order RolesSQL creates them.
var Roles = []string{RoleWorker, RoleReviewer, RoleReadonly}

// evidenceColumns are the reconcile_mismatches columns the apply path's upsert writes. The
// review columns are written only by the review functions (migration 0010); the evidence
// version and a reopen are the database's triggers'.
var evidenceColumns = []string{"order_id", "platform_trade_no", "local_amount_minor", "platform_amount_minor",
	"local_status", "platform_status", "detail", "last_seen_at", "seen_count"}

// protectedTables are the tables no runtime role writes as a whole: the findings (the
// worker writes their evidence columns only), the audit trail and the resolution rules
// (written only by the owner's functions and migrations).
var protectedTables = []string{"reconcile_mismatches", "reconcile_mismatch_audit", "reconcile_resolutions"}

// ReviewFunctions are the review moves payrecon_reviewer may make, each a SECURITY DEFINER
// function that checks the rules and writes the audit row in the same statement. Their
// argument lists are part of the signature a GRANT names.
var ReviewFunctions = []string{
	"payrecon_review_acknowledge(bigint, text, text, bigint, text)",
	"payrecon_review_resolve(bigint, text, text, bigint, text, text)",
	"payrecon_review_approve(bigint, text, text, bigint, text)",
	"payrecon_review_reject(bigint, text, text, bigint, text)",
	"payrecon_review_withdraw(bigint, text, text, bigint, text)",
}

// createRolesSQL creates the roles that do not exist yet, as LOGIN roles without a password
// (an operator sets one, or maps a certificate or IAM identity). Two migrations racing on
// one server are fine: the loser's duplicate is ignored.
func createRolesSQL() string {
	var b strings.Builder
	for _, r := range Roles {
		fmt.Fprintf(&b, `DO $$ BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '%s') THEN
        CREATE ROLE %s LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT;
    END IF;
EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
END $$;
`, r, pq.QuoteIdentifier(r))
	}
	return b.String()
}

// grantsSQL is the privileges of each role in this database, given the schema's tables.
// It first takes every privilege the roles hold here away, so that what a role may do is
// exactly this list, also on a database an earlier release granted more (the reviewer used
// to write review columns and audit rows directly). The worker writes every table but the
// protected ones, so tables added later are covered by running migrate again. Run as one
// multi-statement string, it applies in one transaction: no moment without the grants.
func grantsSQL(tables []string) string {
	q := pq.QuoteIdentifier
	all := strings.Join([]string{q(RoleWorker), q(RoleReviewer), q(RoleReadonly)}, ", ")
	var b strings.Builder
	w := func(format string, a ...any) { fmt.Fprintf(&b, format+";\n", a...) }
	w("REVOKE ALL ON ALL TABLES IN SCHEMA public FROM %s", all)
	w("REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM %s", all)
	w("REVOKE ALL ON ALL FUNCTIONS IN SCHEMA public FROM %s", all)
	w("GRANT USAGE ON SCHEMA public TO %s", all)
	w("GRANT SELECT ON ALL TABLES IN SCHEMA public TO %s", all)
	var workerTables []string
	for _, t := range tables {
		if !slices.Contains(protectedTables, t) {
			workerTables = append(workerTables, q(t))
		}
	}
	if len(workerTables) > 0 {
		w("GRANT INSERT, UPDATE ON %s TO %s", strings.Join(workerTables, ", "), q(RoleWorker))
	}
	w("GRANT INSERT (platform, merchant_id, out_trade_no, kind, out_refund_no, %s) ON public.reconcile_mismatches TO %s",
		strings.Join(evidenceColumns, ", "), q(RoleWorker))
	w("GRANT UPDATE (%s) ON public.reconcile_mismatches TO %s", strings.Join(evidenceColumns, ", "), q(RoleWorker))
	w("GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO %s", q(RoleWorker))
	for _, fn := range ReviewFunctions {
		w("GRANT EXECUTE ON FUNCTION public.%s TO %s", fn, q(RoleReviewer))
	}
	return b.String()
}

// revokePublicCreateSQL stops any role from creating objects in the schema the owner's
// functions live in (PostgreSQL 14 and older let everyone). A planted function or table is
// how a SECURITY DEFINER function gets subverted; search_path pinning is the first guard,
// this the second.
const revokePublicCreateSQL = `REVOKE CREATE ON SCHEMA public FROM PUBLIC`

// publicMayCreateSQL says whether PUBLIC still holds CREATE on the schema: a REVOKE by a
// role that does not own the schema only warns.
const publicMayCreateSQL = `SELECT EXISTS (SELECT 1 FROM pg_namespace n,
	aclexplode(COALESCE(n.nspacl, acldefault('n', n.nspowner))) a
	WHERE n.nspname = 'public' AND a.grantee = 0 AND a.privilege_type = 'CREATE')`

// RolesOutcome says what SetupRoles did.
type RolesOutcome struct {
	Created []string // roles this call created
	Granted bool     // the grants are in place in this database
	// SQL, when not empty, is what a role with CREATEROLE must run (then migrate again):
	// the connected role may not create roles and some are missing.
	SQL string
	// PublicMayCreate: PUBLIC still holds CREATE on schema public, because the connected
	// role does not own the schema and its REVOKE had no effect. The schema's owner must run
	// RevokePublicCreateSQL.
	PublicMayCreate bool
}

// RevokePublicCreateSQL is what the schema's owner runs when migrate could not.
const RevokePublicCreateSQL = revokePublicCreateSQL

// RolesSQL is the whole setup for this database (roles, then grants) as an administrator
// would run it.
func RolesSQL(ctx context.Context, db *sqlx.DB) (string, error) {
	tables, err := publicTables(ctx, db)
	if err != nil {
		return "", err
	}
	return createRolesSQL() + grantsSQL(tables) + revokePublicCreateSQL + ";\n", nil
}

// SetupRoles creates the roles where the connected role may (superuser or CREATEROLE) and
// grants their privileges in this database. Where it may not and a role is missing, nothing
// is granted and the outcome carries the SQL to hand to an administrator: that is not an
// error (a managed database's migrating role often lacks CREATEROLE).
func SetupRoles(ctx context.Context, db *sqlx.DB) (RolesOutcome, error) {
	// Two migrates at once would GRANT on the same tables at once, which PostgreSQL refuses
	// ("tuple concurrently updated"): the migrate lock serialises them here too.
	conn, err := db.Connx(ctx)
	if err != nil {
		return RolesOutcome{}, fmt.Errorf("roles: connect: %w", err)
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, migrateLockKey); err != nil {
		return RolesOutcome{}, fmt.Errorf("roles: take the migrate lock: %w", err)
	}
	defer conn.ExecContext(context.WithoutCancel(ctx), `SELECT pg_advisory_unlock($1)`, migrateLockKey) //nolint:errcheck // the session ends with the connection anyway
	return setupRoles(ctx, db)
}

func setupRoles(ctx context.Context, db *sqlx.DB) (RolesOutcome, error) {
	var out RolesOutcome
	var err error
	if out.PublicMayCreate, err = revokePublicCreate(ctx, db); err != nil {
		return out, err
	}
	var may bool
	if err := db.GetContext(ctx, &may, `SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user`); err != nil {
		return out, fmt.Errorf("roles: read own privileges: %w", err)
	}
	missing, err := missingRoles(ctx, db)
	if err != nil {
		return out, err
	}
	if len(missing) > 0 && !may {
		out.SQL, err = RolesSQL(ctx, db)
		return out, err
	}
	if len(missing) > 0 {
		if _, err := db.ExecContext(ctx, createRolesSQL()); err != nil {
			return out, fmt.Errorf("roles: create: %w", err)
		}
		out.Created = missing
	}
	tables, err := publicTables(ctx, db)
	if err != nil {
		return out, err
	}
	if _, err := db.ExecContext(ctx, grantsSQL(tables)); err != nil {
		return out, fmt.Errorf("roles: grant: %w", err)
	}
	out.Granted = true
	return out, nil
}

// revokePublicCreate takes CREATE on schema public from PUBLIC and reports whether PUBLIC
// still has it (the connected role does not own the schema: PostgreSQL only warns).
func revokePublicCreate(ctx context.Context, db *sqlx.DB) (bool, error) {
	if _, err := db.ExecContext(ctx, revokePublicCreateSQL); err != nil {
		return false, fmt.Errorf("roles: revoke CREATE on schema public from PUBLIC: %w", err)
	}
	var may bool
	if err := db.GetContext(ctx, &may, publicMayCreateSQL); err != nil {
		return false, fmt.Errorf("roles: read schema public's privileges: %w", err)
	}
	return may, nil
}

func missingRoles(ctx context.Context, db *sqlx.DB) ([]string, error) {
	var have []string
	if err := db.SelectContext(ctx, &have, `SELECT rolname FROM pg_roles WHERE rolname = ANY($1)`, pq.Array(Roles)); err != nil {
		return nil, fmt.Errorf("roles: look up: %w", err)
	}
	var missing []string
	for _, r := range Roles {
		if !slices.Contains(have, r) {
			missing = append(missing, r)
		}
	}
	return missing, nil
}

func publicTables(ctx context.Context, db *sqlx.DB) ([]string, error) {
	var tables []string
	err := db.SelectContext(ctx, &tables, `SELECT tablename FROM pg_tables WHERE schemaname = 'public'
		AND tablename <> 'schema_migrations' ORDER BY tablename`)
	if err != nil {
		return nil, fmt.Errorf("roles: list tables: %w", err)
	}
	return tables, nil
}
