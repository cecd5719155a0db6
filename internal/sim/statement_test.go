package sim_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jmoiron/sqlx"
	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/internal/sim"
	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/statement"
	"github.com/payrecon/payrecon/statementrun"
	"github.com/payrecon/payrecon/worker"
)

// billZone is the platforms' business day.
var billZone = platformclient.ChinaTime

// billDay is the business day the seed's trades fall in (when the clock jumps past midnight,
// later trades are the next day's and stay off this bill).
func (s *seedRun) billDay() reconcile.BusinessDay {
	d, err := reconcile.ParseBusinessDay(s.start.In(billZone).Format(time.DateOnly), billZone)
	if err != nil {
		panic(err)
	}
	return d
}

// startStatement reconciles the seed's day from both platforms' bills as they stand now
// (published early, as the sandbox does for the demo), written in the real file formats (the
// Alipay zip of GBK CSVs, the WeChat Pay gzip) and read back by the real readers, through
// statementrun and the shared apply path. It runs beside passes, callbacks and every fault;
// sometimes a signal interrupts it. A statement process is not crashed: its day is one
// transaction, which a killed session already rolls back.
func (s *seedRun) startStatement(interruptAfter time.Duration) {
	s.faults.Add("statement_run")
	runner, spec, cleanup, err := s.statementRun(1+s.rng.Intn(2), nil)
	if err != nil {
		s.w.t.Errorf("seed %d: write the bills: %v", s.seed, err)
		return
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer cleanup()
		ctx, cancel := context.WithTimeout(context.Background(), passDeadline)
		defer cancel()
		if interruptAfter > 0 {
			s.faults.Add("statement_interrupted")
			time.AfterFunc(interruptAfter, cancel)
		}
		runner.Run(ctx, spec) //nolint:errcheck // failures are part of the schedule
	}()
}

// statementRun writes today's bills of both accounts and builds the runner that reconciles
// them, over pool (nil: a pool of its own); cleanup removes the files (and its own pool).
func (s *seedRun) statementRun(concurrency int, pool *sqlx.DB) (*statementrun.Runner, statementrun.Spec, func(), error) {
	day := s.billDay()
	dir, err := os.MkdirTemp("", "sim-bills-")
	if err != nil {
		return nil, statementrun.Spec{}, nil, err
	}
	cleanup := func() { os.RemoveAll(dir) }
	spec := statementrun.Spec{Day: day}
	for _, pl := range []*sim.Platform{s.ali, s.wx} {
		path := filepath.Join(dir, string(pl.Platform()))
		if err := writeBill(path, pl, day); err != nil {
			cleanup()
			return nil, statementrun.Spec{}, nil, err
		}
		spec.Accounts = append(spec.Accounts, statementrun.Account{
			Key:    reconcile.AccountKey{Platform: pl.Platform(), MerchantID: pl.MerchantID()},
			Source: statementrun.FileSource{Platform: pl.Platform(), Path: path},
		})
	}
	if pool == nil {
		// A pool of its own, as the statement CronJob is a process of its own: the run holds
		// two sessions throughout (its liveness lock, the day's transaction) and its apply
		// workers need more. Sharing a small pool with another statement run waiting for the
		// same account's day lock would starve both.
		db, err := sqlx.Open("postgres", s.w.db.URL)
		if err != nil {
			cleanup()
			return nil, statementrun.Spec{}, nil, err
		}
		db.SetMaxOpenConns(2 + concurrency)
		cleanup = func() { db.Close(); os.RemoveAll(dir) }
		pool = db
	}
	store := postgres.NewStore(pool)
	applier := reconcile.NewApplier(store, s.claims, s.applierSettings(), zerolog.Nop())
	return statementrun.NewRunner(worker.StatementStore{Store: store}, store.Locker().WithWait(0), applier, store.Runs(), nil, concurrency, zerolog.Nop()), spec, cleanup, nil
}

// writeBill writes the platform's bill of day as its merchant portal would hand it out.
func writeBill(path string, pl *sim.Platform, day reconcile.BusinessDay) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	lines := billLines(pl, day)
	if pl.Platform() == reconcile.Alipay {
		_, err = statement.WriteAlipayZip(f, statement.AlipayFile{UserID: "20880000000000010156", Day: day.Start}, slices.Values(lines))
	} else {
		_, _, err = statement.WriteWeChatCSV(f, statement.WeChatFile{MchID: pl.MerchantID(), Gzip: true}, slices.Values(lines))
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("write %s bill: %w", pl.Platform(), err)
	}
	return nil
}

// billLines are the platform's payments and refunds of day as bill lines: a 0.6% fee, the
// whole amount received, a refund giving the fee back.
func billLines(pl *sim.Platform, day reconcile.BusinessDay) []statement.Line {
	var lines []statement.Line
	for _, m := range pl.Movements(day.Start, day.End) {
		l := statement.Line{Kind: reconcile.BillPayment, OutTradeNo: m.OutTradeNo, PlatformTradeNo: m.TradeNo,
			MerchantID: pl.MerchantID(), Currency: "CNY", AmountMinor: m.Amount, ReceivedMinor: m.Amount,
			FeeMilliFen: m.Amount * 6, At: m.At.In(billZone), CreatedAt: m.At.Add(-time.Minute).In(billZone)}
		if m.Refund {
			l.Kind, l.RefundNo, l.PlatformRefundNo, l.FeeMilliFen = reconcile.BillRefund, m.RefundNo, m.RefundID, -l.FeeMilliFen
			if m.RefundNo == "" {
				l.RefundNo = wholeTradeRefundNo(m.OutTradeNo)
			}
		}
		lines = append(lines, l)
	}
	return lines
}

// wholeTradeRefundNo is the refund number the bill gives a whole-trade refund
// (sim.Platform.Refund). The merchant's app never recorded it: a statement that matches
// refund lines reports it as an UNKNOWN_REFUND.
func wholeTradeRefundNo(otn string) string { return "RF" + otn }

// rerunChangesNothing reconciles the day again once the world has converged, until a run
// leaves no line to a claim held elsewhere (a claim that a crashed process left runs out
// first): such a run may still settle lines an interrupted run left, and the run after it
// must change nothing at all (no order, no finding, no sighting). With the faults over, no
// line may fail.
func (s *seedRun) rerunChangesNothing(ctx context.Context) []string {
	var tallies []string
	before := ""
	for i := 1; i <= 4; i++ {
		runner, spec, cleanup, err := s.statementRun(2, s.w.cleanPool)
		if err != nil {
			return []string{fmt.Sprintf("write the bills: %v", err)}
		}
		res, err := runner.Run(ctx, spec)
		cleanup()
		if err != nil {
			return []string{fmt.Sprintf("statement of %s after the clean rounds (run %d): %v", spec.Day.Date, i, err)}
		}
		after, err := s.fingerprint(ctx)
		if err != nil {
			return []string{fmt.Sprintf("read the world after statement run %d: %v", i, err)}
		}
		claimed, failed := 0, 0
		for _, d := range res.Days {
			tallies = append(tallies, fmt.Sprintf("run %d %s: %+v", i, d.Account, d.Tally))
			claimed, failed = claimed+d.Tally.ClaimedElsewhere, failed+d.Tally.Errors
		}
		if failed > 0 {
			return []string{fmt.Sprintf("statement run %d after the clean rounds failed on %d lines:\n    %s",
				i, failed, strings.Join(tallies, "\n    "))}
		}
		if before != "" {
			if before != after {
				return []string{fmt.Sprintf("reconciling the day again changed the world:\n    before %s\n    after  %s\n    %s",
					before, after, strings.Join(tallies, "\n    "))}
			}
			return nil
		}
		if claimed == 0 {
			before = after
		} else {
			time.Sleep(claimLease) // the holder of a claim may have crashed: it runs out
		}
	}
	return []string{fmt.Sprintf("the day's lines were still not all settled after four runs:\n    %s", strings.Join(tallies, "\n    "))}
}

// fingerprint is every order's and refund's state, every finding with its sightings, and the
// event and outbox counts: what a no-op must leave as it found it.
func (s *seedRun) fingerprint(ctx context.Context) (string, error) {
	var out string
	err := s.w.db.GetContext(ctx, &out, `SELECT concat_ws(' | ',
		(SELECT string_agg(out_trade_no || '=' || status || '/' || COALESCE(platform_trade_no, '-'), ',' ORDER BY id) FROM payment_orders),
		(SELECT string_agg(out_trade_no || ':' || kind || 'x' || seen_count || 'v' || evidence_version, ',' ORDER BY id) FROM reconcile_mismatches),
		(SELECT string_agg(out_refund_no || '=' || status, ',' ORDER BY id) FROM payment_refunds),
		'events=' || (SELECT count(*) FROM payment_events), 'outbox=' || (SELECT count(*) FROM fulfillment_outbox))`)
	return out, err
}
