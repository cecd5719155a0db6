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

// statementFlags are the statement command's own flags.
type statementFlags struct {
	platform, merchant, date, file, keep string
}

// cmdStatement reconciles one business day's trade bill of every configured account (or one).
func cmdStatement(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var f statementFlags
	cfg, _, err := parse("statement", args, workerGroups, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&f.platform, "platform", "", "only this platform's accounts: alipay or wechatpay (required with --file)")
		fs.StringVar(&f.merchant, "merchant", "", "only this account: the Alipay app_id or WeChat Pay mchid (required with --file)")
		fs.StringVar(&f.date, "date", "", "the business day YYYY-MM-DD, midnight to midnight in RECONCILER_TIMEZONE (default: yesterday)")
		fs.StringVar(&f.file, "file", "", "reconcile this downloaded bill instead (Alipay: the zip or its detail CSV; WeChat Pay: the CSV, plain or gzip)")
		fs.StringVar(&f.keep, "keep-bills", "", "keep each downloaded bill under this directory (<dir>/<platform>/<merchant>/); default: only its SHA-256 is kept")
	})
	if err != nil {
		return err
	}
	day, err := statementDay(f.date, cfg.Timezone)
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
	accounts, err := statementAccounts(a, f)
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

func statementDay(v string, loc *time.Location) (statementrun.Day, error) {
	if v == "" {
		return statementrun.Yesterday(time.Now(), loc), nil
	}
	d, err := statementrun.ParseDay(v, loc)
	if err != nil {
		return d, usagef("--date: %v", err)
	}
	return d, nil
}

// statementAccounts picks the accounts to reconcile and where each one's bill comes from.
func statementAccounts(a *worker.App, f statementFlags) ([]statementrun.Account, error) {
	if f.platform != "" {
		if _, err := reconcile.ParsePlatform(f.platform); err != nil {
			return nil, usagef("--platform: %v", err)
		}
	}
	if f.file != "" {
		if f.platform == "" || f.merchant == "" {
			return nil, usagef("statement: --file needs --platform and --merchant (the account the bill belongs to)")
		}
		p := reconcile.Platform(f.platform)
		return []statementrun.Account{{Key: reconcile.AccountKey{Platform: p, MerchantID: f.merchant},
			Source: statementrun.FileSource{Platform: p, Path: f.file}}}, nil
	}
	all, err := a.BillAccounts(f.keep)
	if err != nil {
		return nil, err
	}
	var out []statementrun.Account
	for _, acct := range all {
		k := acct.Key
		if (f.platform == "" || string(k.Platform) == f.platform) && (f.merchant == "" || k.MerchantID == f.merchant) {
			out = append(out, acct)
		}
	}
	if len(out) == 0 {
		return nil, usagef("statement: no configured account matches --platform %q --merchant %q", f.platform, f.merchant)
	}
	return out, nil
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
		return &usageError{msg: fmt.Sprintf("statement stopped: %v", err)}
	case errors.Is(err, platformclient.ErrBillNotReady), errors.Is(err, statement.ErrRejected):
		return &exitError{code: exitFailed, err: err}
	}
	return err
}
