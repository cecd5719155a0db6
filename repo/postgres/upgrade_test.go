package postgres_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/repotest"
)

// previousRelease is the last migration the release before refunds shipped, as it is named
// now (that release recorded it as 0009_review_functions: see postgres.RenamedMigrations).
const previousRelease = "0010_review_functions"

// upgradeSeed puts rows in every table the previous release had.
var upgradeSeed = []string{
	`INSERT INTO payment_orders (platform, merchant_id, out_trade_no, amount_minor, status, created_at)
		VALUES ('alipay', '2021000000000001', 'up-pending', 1000, 'PENDING', now() - interval '1 hour')`,
	`INSERT INTO payment_orders (platform, merchant_id, out_trade_no, amount_minor, status, platform_trade_no,
		paid_amount_minor, paid_at, created_at)
		VALUES ('wechatpay', '1900000001', 'up-paid', 5000, 'PAID', 'wx-up-1', 5000, now(), now() - interval '1 hour')`,
	`INSERT INTO payment_events (order_id, platform, platform_trade_no, event_type, source, amount_minor)
		SELECT id, platform, platform_trade_no, 'PAID', 'notify', 5000 FROM payment_orders WHERE out_trade_no = 'up-paid'`,
	`INSERT INTO fulfillment_outbox (order_id, kind, payload)
		SELECT id, 'order.paid', '{"up":1}' FROM payment_orders WHERE out_trade_no = 'up-paid'`,
	`INSERT INTO reconcile_mismatches (order_id, platform, merchant_id, out_trade_no, kind, local_amount_minor, platform_amount_minor)
		SELECT id, platform, merchant_id, out_trade_no, 'AMOUNT_MISMATCH', 1000, 900 FROM payment_orders WHERE out_trade_no = 'up-pending'`,
	`SELECT payrecon_review_acknowledge((SELECT id FROM reconcile_mismatches LIMIT 1), 'ann@example.com', 'ops', 0, 'looking')`,
	`INSERT INTO reconcile_runs (mode, status, scanned, repaired) VALUES ('once', 'succeeded', 2, 1)`,
	`INSERT INTO statement_days (platform, merchant_id, bill_date, payments, payments_minor, run_id)
		VALUES ('wechatpay', '1900000001', '2026-11-28', 1, 5000, (SELECT max(id) FROM reconcile_runs))`,
	`INSERT INTO statement_lines (platform, merchant_id, bill_date, line_no, kind, out_trade_no, amount_minor, order_id, outcome)
		SELECT 'wechatpay', '1900000001', '2026-11-28', 1, 'payment', 'up-paid', 5000, id, 'unchanged'
		FROM payment_orders WHERE out_trade_no = 'up-paid'`,
	`INSERT INTO statement_held (platform, merchant_id, bill_date, order_id, out_trade_no)
		SELECT 'wechatpay', '1900000001', '2026-11-27', id, out_trade_no FROM payment_orders WHERE out_trade_no = 'up-paid'`,
}

// TestMigrateUpgradesThePreviousReleaseWithData: a database the previous release migrated,
// with rows in every table, takes this release's migrations; every row survives, and the new
// rules hold on the old rows.
func TestMigrateUpgradesThePreviousReleaseWithData(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	ctx := context.Background()
	db.MustExec(`DROP SCHEMA public CASCADE; CREATE SCHEMA public`)
	db.MustExec(`CREATE TABLE schema_migrations (version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`)
	migs, err := postgres.Migrations()
	if err != nil {
		t.Fatal(err)
	}
	// The previous release recorded its steps under the names they had then.
	oldName := map[string]string{}
	for _, r := range postgres.RenamedMigrations {
		oldName[r[1]] = r[0]
	}
	for _, m := range migs {
		if m.Version > previousRelease {
			break
		}
		db.MustExec(m.SQL)
		v := m.Version
		if old, ok := oldName[v]; ok {
			v = old
		}
		db.MustExec(`INSERT INTO schema_migrations (version) VALUES ($1)`, v)
	}
	for _, stmt := range upgradeSeed {
		db.MustExec(stmt)
	}
	var tables []string
	if err := db.Select(&tables, `SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'schema_migrations'`); err != nil {
		t.Fatal(err)
	}
	for _, tbl := range tables {
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM `+tbl); err != nil || n == 0 {
			t.Fatalf("the seed leaves %s empty: add a row for it to upgradeSeed (%v)", tbl, err)
		}
	}

	applied, err := postgres.Migrate(ctx, db.DB)
	if err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	// Only what came after: none of the renamed steps again under its new name.
	if want := []string{"0011_refunds", "0012_refund_pass", "0013_statement_refunds", "0014_outbox_notify_after_commit",
		"0015_finding_search", "0016_review_notes_and_withdraw", "0017_accept_payment", "0018_finding_events"}; !slices.Equal(applied, want) {
		t.Fatalf("upgrade applied %v, want %v", applied, want)
	}
	var recorded []string
	if err := db.Select(&recorded, `SELECT version FROM schema_migrations ORDER BY version`); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, m := range migs {
		names = append(names, m.Version)
	}
	if !slices.Equal(recorded, names) {
		t.Fatalf("after the upgrade schema_migrations holds %v, want every migration under its name now: %v", recorded, names)
	}
	counts := map[string]int{"payment_orders": 2, "payment_events": 1, "fulfillment_outbox": 1, "reconcile_mismatches": 1,
		"reconcile_mismatch_audit": 1, "reconcile_runs": 1, "statement_days": 1, "statement_lines": 1, "statement_held": 1}
	for tbl, want := range counts {
		var n int
		if err := db.Get(&n, `SELECT count(*) FROM `+tbl); err != nil || n != want {
			t.Errorf("%s: %d rows after the upgrade (%v), want %d", tbl, n, err, want)
		}
	}
	// The old rows under the new rules: the paid order takes a refund (its identity filled
	// in), its existing PAID event and outbox row still may not repeat, the finding still
	// may not repeat, and the run has a refunds_repaired of 0.
	db.MustExec(`INSERT INTO payment_refunds (order_id, out_refund_no, amount_minor, status, created_at)
		SELECT id, 'up-refund-1', 2000, 'PROCESSING', now() FROM payment_orders WHERE out_trade_no = 'up-paid'`)
	var filled int
	if err := db.Get(&filled, `SELECT count(*) FROM payment_refunds WHERE platform = 'wechatpay' AND merchant_id = '1900000001'
		AND out_trade_no = 'up-paid' AND currency = 'CNY'`); err != nil || filled != 1 {
		t.Fatalf("the refund's identity was not filled from the old order: %d %v", filled, err)
	}
	for _, dup := range []string{
		`INSERT INTO payment_events (order_id, platform, event_type, source) SELECT id, platform, 'PAID', 'reconcile' FROM payment_orders WHERE out_trade_no = 'up-paid'`,
		`INSERT INTO fulfillment_outbox (order_id, kind) SELECT id, 'order.paid' FROM payment_orders WHERE out_trade_no = 'up-paid'`,
		`INSERT INTO reconcile_mismatches (platform, merchant_id, out_trade_no, kind) VALUES ('alipay', '2021000000000001', 'up-pending', 'AMOUNT_MISMATCH')`,
	} {
		if _, err := db.Exec(dup); err == nil || !strings.Contains(err.Error(), "duplicate key") {
			t.Errorf("a duplicate of an old row was accepted: %s: %v", dup, err)
		}
	}
	var repaired int
	if err := db.Get(&repaired, `SELECT refunds_repaired FROM reconcile_runs`); err != nil || repaired != 0 {
		t.Fatalf("refunds_repaired of an old run: %d %v", repaired, err)
	}
	if out, err := postgres.SetupRoles(ctx, db.DB); err != nil || !out.Granted {
		t.Fatalf("roles after the upgrade: %+v %v", out, err)
	}
}
