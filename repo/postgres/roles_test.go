package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/lib/pq"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/repo/repotest"
)

// asRole opens a pool on the test database whose every session runs SET ROLE role (the
// startup option), so the real adapter code runs with exactly that role's privileges.
func asRole(t *testing.T, db *repotest.DB, role string) *sqlx.DB {
	t.Helper()
	u, err := url.Parse(db.URL)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("options", "-c role="+role)
	u.RawQuery = q.Encode()
	pool, err := postgres.Open(context.Background(), u.String())
	if err != nil {
		t.Fatalf("open as %s: %v", role, err)
	}
	t.Cleanup(func() { pool.Close() })
	var cur string
	if err := pool.Get(&cur, `SELECT current_user`); err != nil || cur != role {
		t.Fatalf("current_user = %q (%v), want %s", cur, err, role)
	}
	return pool
}

func setupRoles(t *testing.T, db *repotest.DB) {
	t.Helper()
	out, err := postgres.SetupRoles(context.Background(), db.DB)
	if err != nil || !out.Granted || out.SQL != "" {
		t.Fatalf("SetupRoles: %+v %v", out, err)
	}
}

func isDenied(err error) bool {
	var pqErr *pq.Error
	return errors.As(err, &pqErr) && pqErr.Code == "42501" // insufficient_privilege
}

// TestRolesCanDoExactlyWhatTheyMust runs each statement as each role: the worker writes
// orders and evidence but no review column and no audit row; the reviewer writes nothing
// directly and moves findings only through the review functions; read-only reads.
func TestRolesCanDoExactlyWhatTheyMust(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	setupRoles(t, db)
	oid := insertOrder(t, db, "alipay", "2021000000000001", "role-1", 1000, "PENDING")
	fid := insertFinding(t, db, seedFinding{orderID: oid, otn: "role-1", local: 1000, plat: 900})
	stmts := map[string]string{
		"read orders":           `SELECT count(*) FROM payment_orders`,
		"read findings":         `SELECT count(*) FROM reconcile_mismatches`,
		"read audit":            `SELECT count(*) FROM reconcile_mismatch_audit`,
		"read runs":             `SELECT count(*) FROM reconcile_runs`,
		"update an order":       fmt.Sprintf(`UPDATE payment_orders SET status = 'CLOSED' WHERE id = %d`, oid),
		"insert an event":       fmt.Sprintf(`INSERT INTO payment_events (order_id, platform, event_type, source) VALUES (%d, 'alipay', 'CLOSED', 'reconcile')`, oid),
		"insert a run":          `INSERT INTO reconcile_runs (mode) VALUES ('once')`,
		"record evidence":       fmt.Sprintf(`UPDATE reconcile_mismatches SET platform_amount_minor = 800, seen_count = seen_count + 1 WHERE id = %d`, fid),
		"insert a finding":      `INSERT INTO reconcile_mismatches (platform, merchant_id, out_trade_no, kind) VALUES ('alipay', 'm', 'x', 'UNKNOWN_ORDER')`,
		"insert a resolved one": `INSERT INTO reconcile_mismatches (platform, merchant_id, out_trade_no, kind, review_status) VALUES ('alipay', 'm', 'y', 'UNKNOWN_ORDER', 'RESOLVED')`,
		"resolve a finding":     fmt.Sprintf(`UPDATE reconcile_mismatches SET review_status = 'RESOLVED', resolved_by = 'x' WHERE id = %d`, fid),
		"write an audit row":    fmt.Sprintf(`INSERT INTO reconcile_mismatch_audit (mismatch_id, action, actor) VALUES (%d, 'resolve', 'x')`, fid),
		"delete a finding":      fmt.Sprintf(`DELETE FROM reconcile_mismatches WHERE id = %d`, fid),
		"create a table":        `CREATE TABLE sneaky (id int)`,
		"make a review move":    fmt.Sprintf(`SELECT payrecon_review_acknowledge(%d, 'ann@example.com', '', 0, '')`, fid),
	}
	allowed := map[string][]string{
		postgres.RoleWorker: {"read orders", "read findings", "read audit", "read runs", "update an order", "insert an event",
			"insert a run", "record evidence", "insert a finding"},
		// The reviewer writes nothing directly: its moves are the review functions'.
		postgres.RoleReviewer: {"read orders", "read findings", "read audit", "read runs", "make a review move"},
		postgres.RoleReadonly: {"read orders", "read findings", "read audit", "read runs"},
	}
	ctx := context.Background()
	for _, role := range postgres.Roles {
		pool := asRole(t, db, role)
		for name, stmt := range stmts {
			want := false
			for _, a := range allowed[role] {
				want = want || a == name
			}
			t.Run(role+"/"+name, func(t *testing.T) {
				tx, err := pool.BeginTxx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				defer tx.Rollback() //nolint:errcheck // every statement is undone
				_, err = tx.ExecContext(ctx, stmt)
				switch {
				case want && err != nil:
					t.Fatalf("%s may %s, got %v", role, name, err)
				case !want && !isDenied(err):
					t.Fatalf("%s must not %s: got %v, want permission denied", role, name, err)
				}
			})
		}
	}
}

// TestRolesRunTheRealPaths: the worker's apply path records and re-sights findings, the
// reviewer's moves go through, and neither can do the other's job through the real code.
func TestRolesRunTheRealPaths(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	setupRoles(t, db)
	ctx := context.Background()
	worker := postgres.NewStore(asRole(t, db, postgres.RoleWorker))
	m := reconcile.Mismatch{Platform: reconcile.Alipay, MerchantID: "2021000000000001", OutTradeNo: "real-1",
		Kind: reconcile.MismatchUnknownOrder, PlatformAmountMinor: 500, PlatformStatus: "TRADE_SUCCESS"}
	for range 2 {
		if err := worker.RecordMismatch(ctx, m); err != nil {
			t.Fatalf("worker records a finding: %v", err)
		}
	}
	var id int64
	db.Get(&id, `SELECT id FROM reconcile_mismatches WHERE out_trade_no = 'real-1'`) //nolint:errcheck // checked below
	reviewer := postgres.NewReview(asRole(t, db, postgres.RoleReviewer))
	if _, err := reviewer.Resolve(ctx, id, reconcile.ReviewInput{By: "ann", Resolution: "accepted", Version: 1}); err != nil {
		t.Fatalf("reviewer resolves: %v", err)
	}
	// New figures: the worker's sighting reopens the finding, and the database writes the
	// reopen's audit row although the worker may not write audit rows.
	m.PlatformAmountMinor = 600
	if err := worker.RecordMismatch(ctx, m); err != nil {
		t.Fatalf("worker re-sights with new figures: %v", err)
	}
	f, err := reviewer.Get(ctx, id)
	if err != nil || f.ReviewStatus != reconcile.ReviewOpen || f.EvidenceVersion != 2 || f.SeenCount != 3 {
		t.Fatalf("after new evidence: %+v %v", f, err)
	}
	audit := auditRows(t, db, id)
	if len(audit) != 2 || audit[1].Action != reconcile.AuditReopen || audit[1].EvidenceVersion == nil || *audit[1].EvidenceVersion != 2 {
		t.Fatalf("audit %+v", audit)
	}
	workerPass(t, db, worker)
	readonly := postgres.NewReview(asRole(t, db, postgres.RoleReadonly))
	if _, err := readonly.List(ctx, reconcile.FindingFilter{}); err != nil {
		t.Fatalf("read-only lists: %v", err)
	}
	if _, err := readonly.Details(ctx, id); err != nil {
		t.Fatalf("read-only shows a finding: %v", err)
	}
	if _, findings := readReport(t, readonly, time.Now().Add(-time.Hour), time.Now().Add(time.Hour)); len(findings) != 1 {
		t.Fatalf("read-only reports: %d findings", len(findings))
	}
	if _, err := readonly.Acknowledge(ctx, id, reconcile.ReviewInput{By: "eve"}); !isDenied(err) {
		t.Fatalf("read-only acknowledged: %v", err)
	}
}

// TestSetupRolesWithoutCreateRole: a migrating role that owns the database but may not
// create roles still grants when the roles exist; the SQL it would print creates them all.
func TestSetupRolesWithoutCreateRole(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	setupRoles(t, db) // the roles exist (cluster-wide)
	owner := fmt.Sprintf("payrecon_t_%s", strings.TrimPrefix(db.Name, "payrecon_test_"))
	db.MustExec(`CREATE ROLE ` + owner + ` NOCREATEROLE NOSUPERUSER`)
	t.Cleanup(func() {
		db.Exec(`REASSIGN OWNED BY ` + owner + ` TO postgres`) //nolint:errcheck // best effort
		db.Exec(`DROP OWNED BY ` + owner)                      //nolint:errcheck
		db.Exec(`DROP ROLE ` + owner)                          //nolint:errcheck
	})
	// Every table, those later migrations add included: the owner of the schema's tables.
	var tables []string
	if err := db.Select(&tables, `SELECT tablename FROM pg_tables WHERE schemaname = 'public'`); err != nil {
		t.Fatal(err)
	}
	for _, tbl := range tables {
		db.MustExec(`ALTER TABLE ` + tbl + ` OWNER TO ` + owner)
	}
	// ... and of its functions, which the migrating role created.
	var funcs []string
	if err := db.Select(&funcs, `SELECT p.oid::regprocedure::text FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
		WHERE n.nspname = 'public'`); err != nil {
		t.Fatal(err)
	}
	for _, fn := range funcs {
		db.MustExec(`ALTER FUNCTION ` + fn + ` OWNER TO ` + owner)
	}
	// Everybody may create in public again (as PostgreSQL 14 and older let them), and this
	// role does not own the schema: it cannot take that away, and must say so.
	db.MustExec(`GRANT CREATE ON SCHEMA public TO PUBLIC`)
	pool := asRole(t, db, owner)
	out, err := postgres.SetupRoles(context.Background(), pool)
	if err != nil || !out.Granted || len(out.Created) != 0 || !out.PublicMayCreate {
		t.Fatalf("SetupRoles as a table owner without CREATEROLE: %+v %v", out, err)
	}
	sql, err := postgres.RolesSQL(context.Background(), pool)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"CREATE ROLE \"payrecon_worker\" LOGIN", "CREATE ROLE \"payrecon_reviewer\" LOGIN",
		"CREATE ROLE \"payrecon_readonly\" LOGIN", "GRANT EXECUTE ON FUNCTION public.payrecon_review_approve(", "TO \"payrecon_reviewer\"",
		"REVOKE CREATE ON SCHEMA public FROM PUBLIC"} {
		if !strings.Contains(sql, want) {
			t.Errorf("roles SQL lacks %q:\n%s", want, sql)
		}
	}
}

// TestAuditTrailIsAppendOnly: not even the table owner (a superuser here) can change or
// remove an audit row, also with replication-role triggers off; times are the database's.
func TestAuditTrailIsAppendOnly(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	id := insertFinding(t, db, seedFinding{otn: "audit-1"})
	db.MustExec(`INSERT INTO reconcile_mismatch_audit (mismatch_id, action, actor, created_at)
		VALUES ($1, 'acknowledge', 'ann', '2000-01-01T00:00:00Z')`, id)
	var stamped bool
	if err := db.Get(&stamped, `SELECT created_at > now() - interval '1 hour' FROM reconcile_mismatch_audit WHERE mismatch_id = $1`, id); err != nil || !stamped {
		t.Fatalf("a client-chosen time was kept (%v)", err)
	}
	for _, stmt := range []string{
		`UPDATE reconcile_mismatch_audit SET actor = 'mallory'`,
		`DELETE FROM reconcile_mismatch_audit`,
		`TRUNCATE reconcile_mismatch_audit`,
		`TRUNCATE reconcile_mismatches CASCADE`,
		`SET LOCAL session_replication_role = replica; DELETE FROM reconcile_mismatch_audit`,
	} {
		tx := db.MustBegin()
		_, err := tx.Exec(stmt)
		tx.Rollback() //nolint:errcheck
		if err == nil || !strings.Contains(err.Error(), "append-only") {
			t.Errorf("%s: %v, want refused as append-only", stmt, err)
		}
	}
	var n int
	if err := db.Get(&n, `SELECT count(*) FROM reconcile_mismatch_audit WHERE actor = 'ann'`); err != nil || n != 1 {
		t.Fatalf("audit rows: %d (%v)", n, err)
	}
}

// TestEvidenceVersion: the same figures again keep the version, different ones bump it.
func TestEvidenceVersion(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	st := postgres.NewStore(db.DB)
	ctx := context.Background()
	m := reconcile.Mismatch{Platform: reconcile.WechatPay, MerchantID: "1900000001", OutTradeNo: "ev-1",
		Kind: reconcile.MismatchAmount, LocalAmountMinor: 1000, PlatformAmountMinor: 900, LocalStatus: reconcile.StatusPaid}
	version := func() int64 {
		var v int64
		if err := db.Get(&v, `SELECT evidence_version FROM reconcile_mismatches WHERE out_trade_no = 'ev-1'`); err != nil {
			t.Fatal(err)
		}
		return v
	}
	steps := []struct {
		change func()
		want   int64
	}{
		{func() {}, 1},
		{func() {}, 1},
		{func() { m.PlatformAmountMinor = 800 }, 2},
		{func() { m.PlatformTradeNo = "wx-9" }, 3},
		{func() { m.Detail = map[string]any{"note": "detail only"} }, 3},
	}
	for i, s := range steps {
		s.change()
		if err := st.RecordMismatch(ctx, m); err != nil {
			t.Fatal(err)
		}
		if got := version(); got != s.want {
			t.Fatalf("step %d: version %d, want %d", i, got, s.want)
		}
	}
	// Nobody sets the version by hand.
	db.MustExec(`UPDATE reconcile_mismatches SET evidence_version = 99 WHERE out_trade_no = 'ev-1'`)
	if got := version(); got != 3 {
		t.Fatalf("a hand-set version stuck: %d", got)
	}
}

// TestReviewRacingApprovers: two checkers approving (or one approving while another
// rejects) the same proposal at once, in real concurrent transactions: one wins, the other
// is told the finding moved.
func TestReviewRacingApprovers(t *testing.T) {
	t.Parallel()
	db := repotest.NewDB(t)
	rv := postgres.NewReview(db.DB)
	ctx := context.Background()
	for round := range 4 {
		id := insertFinding(t, db, seedFinding{otn: fmt.Sprintf("race-%d", round)})
		if _, err := rv.Resolve(ctx, id, reconcile.ReviewInput{By: "maker", Resolution: "refunded"}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		errs := make([]error, 2)
		for i := range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				in := reconcile.ReviewInput{By: fmt.Sprintf("checker-%d", i), Note: "no"}
				if round%2 == 1 && i == 1 {
					_, errs[i] = rv.Reject(ctx, id, in)
				} else {
					_, errs[i] = rv.Approve(ctx, id, in)
				}
			}()
		}
		close(start)
		wg.Wait()
		wins := 0
		for _, err := range errs {
			if err == nil {
				wins++
			} else if !errors.Is(err, reconcile.ErrIllegalReview) || !strings.Contains(err.Error(), "PENDING_APPROVAL") {
				t.Fatalf("round %d: the loser was told %v", round, err)
			}
		}
		if wins != 1 {
			t.Fatalf("round %d: %d winners (%v)", round, wins, errs)
		}
		if a := auditRows(t, db, id); len(a) != 2 {
			t.Fatalf("round %d: %d audit rows, want propose + one decision", round, len(a))
		}
	}
}

// workerPass runs a pass's database work as the worker: start a run, take a due order under
// a lease, pay it (event and outbox in one transaction), record the check, finish the run.
func workerPass(t *testing.T, db *repotest.DB, worker *postgres.Store) {
	t.Helper()
	ctx := context.Background()
	oid := insertOrder(t, db, "alipay", "2021000000000001", "pass-1", 1000, "PENDING")
	run := &reconcile.Run{Mode: reconcile.ModeOnce, Status: reconcile.RunRunning, Shard: reconcile.Shard{Index: 0, Count: 1}}
	if err := worker.Runs().StartRun(ctx, run); err != nil {
		t.Fatalf("worker starts a run: %v", err)
	}
	now := time.Now()
	taken, err := worker.Take(ctx, reconcile.TakeQuery{Mode: reconcile.ModeOnce, Now: now, PassStart: now,
		Lookback: 1000 * time.Hour, Shard: reconcile.Shard{Index: 0, Count: 1}, Limit: 10, Lease: time.Minute, Owner: "t",
		Account: reconcile.AccountKey{Platform: reconcile.Alipay, MerchantID: "2021000000000001"}})
	if err != nil || len(taken) == 0 {
		t.Fatalf("worker takes orders: %d %v", len(taken), err)
	}
	ok, err := worker.ApplyTransition(ctx, reconcile.Transition{OrderID: oid, From: reconcile.StatusPending, To: reconcile.StatusPaid,
		Platform: reconcile.Alipay, PlatformTradeNo: "T-pass-1", AmountMinor: 1000, PaidAt: now, Source: reconcile.SourceReconcile,
		Outbox: &reconcile.OutboxMessage{Kind: reconcile.OutboxKindPaid, Payload: map[string]any{"order_id": oid}}})
	if err != nil || !ok {
		t.Fatalf("worker pays an order: %v %v", ok, err)
	}
	run.Status = reconcile.RunSucceeded
	if err := worker.Runs().FinishRun(ctx, *run); err != nil {
		t.Fatalf("worker finishes the run: %v", err)
	}
}
