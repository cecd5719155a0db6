package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/statement"
	"github.com/payrecon/payrecon/statementrun"
	"github.com/payrecon/payrecon/worker"
)

// cmdStatement reconciles one business day's trade bill of every configured account (or one).
func cmdStatement(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f worker.StatementSelection
	var date string
	cfg, _, err := parse("statement", args, workerGroups, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&f.Platform, "platform", "", "only this platform's accounts: alipay or wechatpay (required with --file)")
		fs.StringVar(&f.Merchant, "merchant", "", "only this account: the Alipay app_id or WeChat Pay mchid (required with --file)")
		fs.StringVar(&date, "date", "", "the business day YYYY-MM-DD, midnight to midnight in RECONCILER_TIMEZONE (default: yesterday)")
		fs.StringVar(&f.File, "file", "", "reconcile this downloaded bill instead (Alipay: the zip or its detail CSV; WeChat Pay: the CSV, plain or gzip)")
		fs.StringVar(&f.Keep, "keep-bills", "", "keep each downloaded bill under this directory (<dir>/<platform>/<merchant>/); default: only its SHA-256 is kept")
	})
	if err != nil {
		return err
	}
	day, err := statementDay(date, cfg.Timezone)
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	// The bill clients are built below, one per account; the query clients are not needed.
	a, err := worker.New(ctx, cfg, log, false)
	if err != nil {
		return err
	}
	defer a.Close()
	accounts, err := a.StatementAccounts(f)
	if err != nil {
		return err
	}
	// Its own registry: the push carries the statement's figures, not the pass metrics at zero.
	reg := prometheus.NewRegistry()
	res, err := a.StatementRunner(reg).Run(ctx, statementrun.Spec{Day: day, Accounts: accounts, DryRun: cfg.DryRun})
	if res.Run.ID != 0 {
		statementrun.WriteSummary(stdout, res)
	}
	a.PushStatementMetrics(reg, err == nil)
	return statementExit(err)
}

func statementDay(v string, loc *time.Location) (reconcile.BusinessDay, error) {
	if v == "" {
		return reconcile.PreviousBusinessDay(time.Now(), loc), nil
	}
	d, err := reconcile.ParseBusinessDay(v, loc)
	if err != nil {
		return d, usagef("--date: %v", err)
	}
	return d, nil
}

// statementExit maps the run's end to the exit codes: a rejected or unpublished bill, or
// lines that could not be applied, is exit 1 with the reason (and the time to retry).
func statementExit(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, reconcile.ErrInterrupted):
		return &exitError{code: exitInterrupted, err: fmt.Errorf("interrupted: %w; run the day again (each account's day was finished whole or not started, and a re-run repeats nothing)", err)}
	case reconcile.PlatformErrorKindOf(err) == reconcile.KindConfig:
		return usagef("statement stopped: %v", err)
	case errors.Is(err, platformclient.ErrBillNotReady), errors.Is(err, statement.ErrRejected):
		return &exitError{code: exitFailed, err: err}
	}
	return err
}
