package main

import (
	"strings"
	"testing"

	"github.com/payrecon/payrecon/repo/repotest"
)

// TestMigrateSetsUpRoles: migrate (as a superuser here) grants the three roles, and
// --roles-sql prints the SQL an administrator runs where migrate may not create roles.
func TestMigrateSetsUpRoles(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	code, out, errOut := reviewCLI(t, "migrate", "--database-url", db.URL)
	if code != 0 || !strings.Contains(out, "schema up to date") || !strings.Contains(out, "granted payrecon_worker, payrecon_reviewer, payrecon_readonly") {
		t.Fatalf("migrate: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
	var ok bool
	// The reviewer moves findings only through the review functions; nobody writes the
	// review columns directly.
	if err := db.Get(&ok, `SELECT has_function_privilege('payrecon_reviewer', 'payrecon_review_approve(bigint, text, text, bigint, text)', 'EXECUTE')
		AND NOT has_column_privilege('payrecon_reviewer', 'reconcile_mismatches', 'review_status', 'UPDATE')
		AND NOT has_function_privilege('payrecon_worker', 'payrecon_review_approve(bigint, text, text, bigint, text)', 'EXECUTE')
		AND NOT has_column_privilege('payrecon_worker', 'reconcile_mismatches', 'review_status', 'UPDATE')
		AND NOT has_table_privilege('payrecon_readonly', 'payment_orders', 'UPDATE')`); err != nil || !ok {
		t.Fatalf("grants after migrate: %v %v", ok, err)
	}
	code, out, errOut = reviewCLI(t, "migrate", "--database-url", db.URL, "--roles-sql")
	if code != 0 || !strings.HasPrefix(out, "DO $$") || !strings.Contains(out, `CREATE ROLE "payrecon_readonly" LOGIN`) ||
		!strings.Contains(out, "GRANT SELECT ON ALL TABLES IN SCHEMA public") {
		t.Fatalf("--roles-sql: exit %d\nstdout: %s\nstderr: %s", code, out, errOut)
	}
}
