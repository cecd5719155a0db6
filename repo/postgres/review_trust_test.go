package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/repotest"
)

// sqlState is the SQLSTATE of a PostgreSQL error, "" for any other error or none.
func sqlState(err error) string {
	var pqErr *pq.Error
	if errors.As(err, &pqErr) {
		return string(pqErr.Code)
	}
	return ""
}

// TestReviewerMovesOnlyThroughTheFunctions: with the reviewer's credential, every write that
// would bypass a rule is refused, and the functions themselves refuse every move the rules
// forbid, leaving no audit row behind.
func TestReviewerMovesOnlyThroughTheFunctions(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	setupRoles(t, db)
	ctx := context.Background()
	reviewer := asRole(t, db, postgres.RoleReviewer)
	proposed := insertFinding(t, db, seedFinding{otn: "trust-1"})
	if _, err := postgres.NewReview(db.DB).Resolve(ctx, proposed, reconcile.ReviewInput{By: "alice@example.com", Resolution: "written_off", Note: "below cost"}); err != nil {
		t.Fatal(err)
	}
	open := insertFinding(t, db, seedFinding{otn: "trust-2"})

	direct := []struct {
		name, sql string
	}{
		{"resolve by UPDATE", fmt.Sprintf(`UPDATE reconcile_mismatches SET review_status = 'RESOLVED', resolution = 'written_off', approved_by = 'bob' WHERE id = %d`, proposed)},
		{"approve by UPDATE of one column", fmt.Sprintf(`UPDATE reconcile_mismatches SET approved_by = 'bob' WHERE id = %d`, proposed)},
		{"fake an approval row", fmt.Sprintf(`INSERT INTO reconcile_mismatch_audit (mismatch_id, action, actor) VALUES (%d, 'approve', 'bob')`, proposed)},
		{"call the inner move", fmt.Sprintf(`SELECT payrecon_review_move(%d, 'approve', 'alice@example.com', '', NULL, NULL, 0)`, proposed)},
		{"change the resolution rules", `UPDATE reconcile_resolutions SET moves_money = false`},
		{"add a resolution", `INSERT INTO reconcile_resolutions VALUES ('gift', false)`},
		{"delete a finding", fmt.Sprintf(`DELETE FROM reconcile_mismatches WHERE id = %d`, open)},
		{"plant a function", `CREATE FUNCTION public.format(text) RETURNS text LANGUAGE sql AS 'SELECT 1::text'`},
	}
	for _, d := range direct {
		if _, err := reviewer.ExecContext(ctx, d.sql); !isDenied(err) {
			t.Errorf("reviewer could %s: %v, want permission denied", d.name, err)
		}
	}

	call := func(sql string, args ...any) error {
		var id int64
		return reviewer.GetContext(ctx, &id, sql, args...)
	}
	refused := []struct {
		name, sql string
		args      []any
		state     string
	}{
		{"approve own proposal", `SELECT payrecon_review_approve($1, $2, '', 0, '')`, []any{proposed, "alice@example.com"}, "PR003"},
		{"approve what is open", `SELECT payrecon_review_approve($1, $2, '', 0, '')`, []any{open, "bob@example.com"}, "PR001"},
		{"approve on a version never seen", `SELECT payrecon_review_approve($1, $2, '', 7, '')`, []any{proposed, "bob@example.com"}, "PR002"},
		{"reject without a reason", `SELECT payrecon_review_reject($1, $2, '', 0, '  ')`, []any{proposed, "bob@example.com"}, "PR004"},
		{"resolve with an unknown resolution", `SELECT payrecon_review_resolve($1, $2, '', 0, 'gift', '')`, []any{open, "bob@example.com"}, "PR004"},
		{"act as nobody", `SELECT payrecon_review_acknowledge($1, $2, '', 0, '')`, []any{open, " "}, "PR004"},
		{"act with a zero-width space", `SELECT payrecon_review_approve($1, $2, '', 0, '')`, []any{proposed, "alice@example.com\u200b"}, "PR004"},
		{"act with a fullwidth spelling", `SELECT payrecon_review_approve($1, $2, '', 0, '')`, []any{proposed, "ａlice@example.com"}, "PR004"},
		{"act with two @", `SELECT payrecon_review_approve($1, $2, '', 0, '')`, []any{proposed, "eve@evil.com@example.com"}, "PR004"},
		{"act on no finding", `SELECT payrecon_review_acknowledge($1, $2, '', 0, '')`, []any{int64(1 << 40), "bob@example.com"}, "PR005"},
	}
	for _, r := range refused {
		if err := call(r.sql, r.args...); sqlState(err) != r.state {
			t.Errorf("%s: %v, want SQLSTATE %s", r.name, err, r.state)
		}
	}
	// A proposal recorded before identities were normalised is still its proposer's.
	legacy := insertFinding(t, db, seedFinding{otn: "trust-3", status: reconcile.ReviewPendingApproval})
	db.MustExec(`UPDATE reconcile_mismatches SET proposed_by = ' Alice@Example.COM', proposed_version = 1,
		resolution = 'written_off' WHERE id = $1`, legacy)
	if err := call(`SELECT payrecon_review_approve($1, $2, '', 0, '')`, legacy, "alice@example.com"); sqlState(err) != "PR003" {
		t.Errorf("approving an old-spelling proposal of one's own: %v, want PR003", err)
	}
	if a := auditRows(t, db, proposed); len(a) != 1 {
		t.Fatalf("refused moves left audit rows: %+v", a)
	}
	if a := auditRows(t, db, open); len(a) != 0 {
		t.Fatalf("refused moves left audit rows: %+v", a)
	}

	// The same moves made properly go through the reviewer's credential, and the audit row
	// names the database login beside the person.
	rv := postgres.NewReview(reviewer)
	mv, err := rv.Approve(ctx, proposed, reconcile.ReviewInput{By: "bob@example.com", OSUser: "ops"})
	if err != nil {
		t.Fatalf("a second person approves: %v", err)
	}
	var login string
	if err := reviewer.GetContext(ctx, &login, `SELECT session_user`); err != nil {
		t.Fatal(err)
	}
	if mv.Finding.ReviewStatus != reconcile.ReviewResolved || mv.Finding.ApprovedBy != "bob@example.com" ||
		mv.Finding.ResolvedBy != "alice@example.com" || mv.Audit.Action != reconcile.AuditApprove ||
		mv.Audit.OSUser != "ops" || mv.Audit.DBUser != login || login == "" {
		t.Fatalf("approval: %+v (session_user %q)", mv, login)
	}
}

// TestReviewRefusalsAreTheDomainsErrors: a move the database refuses reaches the caller as
// the error the domain names, so the CLI's exit codes and the console's pages do not change
// with who caught it.
func TestReviewRefusalsAreTheDomainsErrors(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	rv := postgres.NewReview(db.DB)
	ctx := context.Background()
	id := insertFinding(t, db, seedFinding{otn: "errs-1"})
	if _, err := rv.Resolve(ctx, id, reconcile.ReviewInput{By: "alice@example.com", Resolution: "Written-Off", Note: "below cost"}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		move func() error
		want error
	}{
		{"self approval", func() error {
			_, err := rv.Approve(ctx, id, reconcile.ReviewInput{By: "alice@example.com"})
			return err
		}, reconcile.ErrSelfApproval},
		{"stale version", func() error {
			_, err := rv.Approve(ctx, id, reconcile.ReviewInput{By: "bob@example.com", Version: 9})
			return err
		}, reconcile.ErrStaleEvidence},
		{"illegal move", func() error {
			_, err := rv.Acknowledge(ctx, id, reconcile.ReviewInput{By: "bob@example.com"})
			return err
		}, reconcile.ErrIllegalReview},
		{"identity the domain cannot see is wrong", func() error {
			_, err := rv.Approve(ctx, id, reconcile.ReviewInput{By: "bob@example.com\u200b"})
			return err
		}, reconcile.ErrBadReview},
		{"no finding", func() error {
			_, err := rv.Acknowledge(ctx, 1<<40, reconcile.ReviewInput{By: "bob@example.com"})
			return err
		}, reconcile.ErrNotFound},
	}
	for _, c := range cases {
		if err := c.move(); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
	f, err := rv.Get(ctx, id)
	if err != nil || f.ReviewStatus != reconcile.ReviewPendingApproval || f.Resolution != "written_off" {
		t.Fatalf("after refusals: %+v %v", f, err)
	}
}

// TestWorkerCannotTouchTheReview: the worker records evidence but may neither call a review
// function nor write a review column or an audit row.
func TestWorkerCannotTouchTheReview(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	setupRoles(t, db)
	worker := asRole(t, db, postgres.RoleWorker)
	id := insertFinding(t, db, seedFinding{otn: "worker-1"})
	for _, stmt := range []string{
		fmt.Sprintf(`SELECT payrecon_review_acknowledge(%d, 'w@example.com', '', 0, '')`, id),
		fmt.Sprintf(`SELECT payrecon_review_resolve(%d, 'w@example.com', '', 0, 'accepted', '')`, id),
		fmt.Sprintf(`SELECT payrecon_review_move(%d, 'acknowledge', 'w@example.com', '', NULL, NULL, 0)`, id),
		fmt.Sprintf(`UPDATE reconcile_mismatches SET review_status = 'RESOLVED' WHERE id = %d`, id),
		fmt.Sprintf(`INSERT INTO reconcile_mismatch_audit (mismatch_id, action, actor) VALUES (%d, 'resolve', 'w')`, id),
		`UPDATE reconcile_resolutions SET moves_money = false`,
		`CREATE TABLE public.sneaky (id int)`,
	} {
		if _, err := worker.Exec(stmt); !isDenied(err) {
			t.Errorf("worker: %s: %v, want permission denied", stmt, err)
		}
	}
}

// onePool is a pool of exactly one session, so a TEMP table made through it is seen by
// every later statement through it.
func onePool(t *testing.T, db *repotest.DB, role string) *sqlx.DB {
	t.Helper()
	pool := asRole(t, db, role)
	pool.SetMaxOpenConns(1)
	return pool
}

// TestTempTablesShadowNothing: a worker and a reviewer who create TEMP tables named like
// the tables the owner's functions write change nothing: the reopen's audit row and the
// review move's both land in the real trail, the real resolution rules decide, and the
// temporary copies stay empty. (A session that shadows the tables its own statements name
// only fools itself; the owner's code is what must not be fooled.)
func TestTempTablesShadowNothing(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	setupRoles(t, db)
	ctx := context.Background()
	shadow := func(pool *sqlx.DB, tables ...string) {
		for _, tbl := range tables {
			pool.MustExec(`CREATE TEMP TABLE ` + tbl + ` (LIKE public.` + tbl + ` INCLUDING DEFAULTS)`)
		}
	}
	tempRows := func(pool *sqlx.DB, tbl string) int {
		var n int
		if err := pool.Get(&n, `SELECT count(*) FROM pg_temp.`+tbl); err != nil {
			t.Fatal(err)
		}
		return n
	}

	// The worker's sighting reopens a resolved finding through a session whose audit table
	// is shadowed (the reported attack).
	workerPool := onePool(t, db, postgres.RoleWorker)
	shadow(workerPool, "reconcile_mismatch_audit")
	m := reconcile.Mismatch{Platform: reconcile.Alipay, MerchantID: "2021000000000001", OutTradeNo: "shadow-1",
		Kind: reconcile.MismatchUnknownOrder, PlatformAmountMinor: 500, PlatformStatus: "TRADE_SUCCESS"}
	if err := postgres.NewStore(db.DB).RecordMismatch(ctx, m); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := db.Get(&id, `SELECT id FROM reconcile_mismatches WHERE out_trade_no = 'shadow-1'`); err != nil {
		t.Fatal(err)
	}
	if _, err := postgres.NewReview(db.DB).Resolve(ctx, id, reconcile.ReviewInput{By: "ann@example.com", Resolution: "accepted"}); err != nil {
		t.Fatal(err)
	}
	m.PlatformAmountMinor = 600
	if err := postgres.NewStore(workerPool).RecordMismatch(ctx, m); err != nil {
		t.Fatalf("worker re-sights through a shadowed session: %v", err)
	}
	if a := auditRows(t, db, id); len(a) != 2 || a[1].Action != reconcile.AuditReopen {
		t.Fatalf("the reopen's audit row is not in the real trail: %+v", a)
	}
	if n := tempRows(workerPool, "reconcile_mismatch_audit"); n != 0 {
		t.Fatalf("the worker's shadow audit table took %d rows", n)
	}

	// The reviewer calls a review function from a session that shadows every table it
	// touches, with a resolution table that calls written_off harmless: the real rules
	// decide (written_off waits for a second person) and the real trail records it.
	reviewerPool := onePool(t, db, postgres.RoleReviewer)
	shadow(reviewerPool, "reconcile_mismatch_audit", "reconcile_mismatches", "reconcile_resolutions")
	reviewerPool.MustExec(`INSERT INTO pg_temp.reconcile_resolutions VALUES ('written_off', false)`)
	var auditID int64
	if err := reviewerPool.Get(&auditID, `SELECT payrecon_review_resolve($1, 'ann@example.com', '', 0, 'written_off', 'below cost')`, id); err != nil {
		t.Fatalf("reviewer resolves through a shadowed session: %v", err)
	}
	f, err := postgres.NewReview(db.DB).Get(ctx, id)
	if err != nil || f.ReviewStatus != reconcile.ReviewPendingApproval {
		t.Fatalf("the shadow's rules or rows were used: %+v %v", f, err)
	}
	if a := auditRows(t, db, id); len(a) != 3 || a[2].Action != reconcile.AuditPropose || a[2].ID != auditID {
		t.Fatalf("the proposal is not in the real trail: %+v", a)
	}
	for _, tbl := range []string{"reconcile_mismatch_audit", "reconcile_mismatches"} {
		if n := tempRows(reviewerPool, tbl); n != 0 {
			t.Fatalf("the reviewer's shadow %s took %d rows", tbl, n)
		}
	}
}

// TestPlantedFunctionsAreNeverCalled: functions planted in schema public that would beat
// the built-ins on argument types (the attack on a function whose search_path includes
// public) are never called by the triggers or the review functions, which run as the owner.
func TestPlantedFunctionsAreNeverCalled(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	ctx := context.Background()
	// Planted by a role that may still create in public (the superuser here: migrate has
	// taken CREATE from everybody else). Each one raises, so a call cannot go unnoticed.
	db.MustExec(`CREATE FUNCTION public.format(text, text, bigint, text, bigint, text, bigint, text, bigint) RETURNS text
		LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'planted format called'; END $$`)
	db.MustExec(`CREATE FUNCTION public.btrim(text) RETURNS text
		LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'planted btrim called'; END $$`)
	db.MustExec(`CREATE FUNCTION public.now() RETURNS timestamptz
		LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'planted now called'; END $$`)
	st := postgres.NewStore(db.DB)
	rv := postgres.NewReview(db.DB)
	m := reconcile.Mismatch{Platform: reconcile.WechatPay, MerchantID: "1900000001", OutTradeNo: "plant-1",
		Kind: reconcile.MismatchAmount, LocalAmountMinor: 1000, PlatformAmountMinor: 900, LocalStatus: reconcile.StatusPaid}
	if err := st.RecordMismatch(ctx, m); err != nil {
		t.Fatal(err)
	}
	var id int64
	if err := db.Get(&id, `SELECT id FROM reconcile_mismatches WHERE out_trade_no = 'plant-1'`); err != nil {
		t.Fatal(err)
	}
	if _, err := rv.Resolve(ctx, id, reconcile.ReviewInput{By: "ann@example.com", Resolution: "accepted", Note: "ok"}); err != nil {
		t.Fatalf("a review move called a planted function: %v", err)
	}
	m.PlatformAmountMinor = 800
	if err := st.RecordMismatch(ctx, m); err != nil {
		t.Fatalf("the reopen trigger called a planted function: %v", err)
	}
	if a := auditRows(t, db, id); len(a) != 2 || a[1].Action != reconcile.AuditReopen {
		t.Fatalf("audit: %+v", a)
	}
}

// TestResolutionRulesMatchTheDomain: the database's resolution table is reconcile's list,
// with the same maker-checker rule, so the functions and the console agree on what waits
// for a second person.
func TestResolutionRulesMatchTheDomain(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	type rule struct {
		MovesMoney bool   `db:"moves_money"`
		NeedsNote  bool   `db:"needs_note"`
		ForKinds   string `db:"for_kinds"`
	}
	var rows []struct {
		Name string `db:"name"`
		rule
	}
	if err := db.Select(&rows, `SELECT name, moves_money, needs_note, COALESCE(array_to_string(for_kinds, ','), '') AS for_kinds
		FROM reconcile_resolutions ORDER BY name`); err != nil {
		t.Fatal(err)
	}
	got := map[string]rule{}
	for _, r := range rows {
		got[r.Name] = r.rule
	}
	if len(got) != len(reconcile.Resolutions) {
		t.Fatalf("database resolutions %v, domain %v", got, reconcile.Resolutions)
	}
	for _, r := range reconcile.Resolutions {
		kinds := make([]string, 0)
		for _, k := range r.ForKinds() {
			kinds = append(kinds, string(k))
		}
		want := rule{MovesMoney: r.MovesMoney(), NeedsNote: r.NeedsNote(), ForKinds: strings.Join(kinds, ",")}
		if have, ok := got[string(r)]; !ok || have != want {
			t.Errorf("resolution %s: database says %+v (present %v), domain %+v", r, have, ok, want)
		}
	}
}

// TestMigrateTakesAnEarlierReleasesGrantsAway: a database whose reviewer was granted direct
// writes by an earlier release loses them when migrate runs; a migrating role that cannot
// revoke CREATE on schema public says so.
func TestMigrateTakesAnEarlierReleasesGrantsAway(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	setupRoles(t, db)
	db.MustExec(`GRANT UPDATE (review_status, resolution, approved_by) ON reconcile_mismatches TO payrecon_reviewer`)
	db.MustExec(`GRANT INSERT ON reconcile_mismatch_audit TO payrecon_reviewer`)
	db.MustExec(`GRANT EXECUTE ON FUNCTION payrecon_review_move(bigint, text, text, text, text, text, bigint) TO payrecon_reviewer`)
	db.MustExec(`GRANT CREATE ON SCHEMA public TO PUBLIC`)
	out, err := postgres.SetupRoles(context.Background(), db.DB)
	if err != nil || !out.Granted || out.PublicMayCreate {
		t.Fatalf("SetupRoles: %+v %v", out, err)
	}
	reviewer := asRole(t, db, postgres.RoleReviewer)
	id := insertFinding(t, db, seedFinding{otn: "upgrade-1"})
	for _, stmt := range []string{
		fmt.Sprintf(`UPDATE reconcile_mismatches SET review_status = 'RESOLVED' WHERE id = %d`, id),
		fmt.Sprintf(`INSERT INTO reconcile_mismatch_audit (mismatch_id, action, actor) VALUES (%d, 'approve', 'bob')`, id),
		fmt.Sprintf(`SELECT payrecon_review_move(%d, 'acknowledge', 'bob', '', NULL, NULL, 0)`, id),
		`CREATE TABLE public.sneaky (id int)`,
	} {
		if _, err := reviewer.Exec(stmt); !isDenied(err) {
			t.Errorf("after migrate the reviewer still may: %s: %v", stmt, err)
		}
	}
}

// TestAWriteOffNeedsANoteInTheDatabase: the review function itself refuses an adjustment or
// a write-off without a note, whoever calls it (here the reviewer role, directly), and takes
// one with a note.
func TestAWriteOffNeedsANoteInTheDatabase(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	setupRoles(t, db)
	reviewer := onePool(t, db, postgres.RoleReviewer)
	for _, res := range []string{"adjusted", "written_off"} {
		id := insertFinding(t, db, seedFinding{otn: "note-" + res})
		var audit int64
		err := reviewer.Get(&audit, `SELECT payrecon_review_resolve($1, 'ann@example.com', '', 0, $2, '  ')`, id, res)
		if err == nil || !strings.Contains(err.Error(), "needs a note") {
			t.Errorf("%s without a note: %v, want a refusal", res, err)
		}
		if err := reviewer.Get(&audit, `SELECT payrecon_review_resolve($1, 'ann@example.com', '', 0, $2, 'booked by hand')`, id, res); err != nil {
			t.Errorf("%s with a note: %v", res, err)
		}
	}
}

// TestOnlyTheProposerWithdraws: the proposer takes a pending proposal back (ACKNOWLEDGED,
// no proposal left, a withdraw audit row); anyone else is refused by the function itself.
func TestOnlyTheProposerWithdraws(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	rv := postgres.NewReview(db.DB)
	ctx := context.Background()
	id := insertFinding(t, db, seedFinding{otn: "withdraw-1"})
	if _, err := rv.Resolve(ctx, id, reconcile.ReviewInput{By: "ann@example.com", Resolution: "refunded"}); err != nil {
		t.Fatal(err)
	}
	if _, err := rv.Withdraw(ctx, id, reconcile.ReviewInput{By: "bob@example.com"}); !errors.Is(err, reconcile.ErrBadReview) {
		t.Fatalf("bob withdrawing ann's proposal: %v, want a refusal", err)
	}
	m, err := rv.Withdraw(ctx, id, reconcile.ReviewInput{By: "ann@example.com", Note: "refund not made after all"})
	if err != nil {
		t.Fatal(err)
	}
	f := m.Finding
	if f.ReviewStatus != reconcile.ReviewAcknowledged || f.ProposedBy != "" || f.Resolution != "" || m.Audit.Action != reconcile.AuditWithdraw ||
		m.Audit.Resolution != "refunded" {
		t.Fatalf("after withdrawing: %+v, audit %+v", f, m.Audit)
	}
	if _, err := rv.Withdraw(ctx, id, reconcile.ReviewInput{By: "ann@example.com"}); !errors.Is(err, reconcile.ErrIllegalReview) {
		t.Fatalf("withdrawing again: %v, want the status to refuse it", err)
	}
}
