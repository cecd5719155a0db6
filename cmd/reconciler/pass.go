package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/payrecon/payrecon/cmd/reconciler/input"
	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/worker"
)

// workerGroups are the settings of the commands that run passes.
const workerGroups = config.GroupDatabase | config.GroupLog | config.GroupApply | config.GroupWorker |
	config.GroupPlatforms | config.GroupTime

// cmdRun is the CronJob entry point: one pass over due PENDING orders, then exit.
func cmdRun(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, _, err := parse("run", args, workerGroups, stderr, nil)
	if err != nil {
		return err
	}
	return runPass(ctx, cfg, reconcile.PassSpec{Mode: reconcile.ModeOnce, Shard: cfg.Shard, DryRun: cfg.DryRun}, stdout, stderr)
}

// cmdBackfill re-checks every order created in [from, to) whatever its local status.
func cmdBackfill(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var fromS, toS string
	var resume int64
	cfg, _, err := parse("backfill", args, workerGroups, stderr, func(fs *flag.FlagSet) {
		fs.StringVar(&fromS, "from", "", "window start, inclusive: a date (midnight in RECONCILER_TIMEZONE) or an RFC 3339 time")
		fs.StringVar(&toS, "to", "", "window end, exclusive: a date or an RFC 3339 time; may lie in the future")
		fs.Int64Var(&resume, "resume", 0, "continue the interrupted backfill run with this id from its saved cursor")
	})
	if err != nil {
		return err
	}
	spec := reconcile.PassSpec{Mode: reconcile.ModeBackfill, Shard: cfg.Shard, DryRun: cfg.DryRun, Resume: resume}
	if resume == 0 {
		if fromS == "" || toS == "" {
			return usagef("backfill: --from and --to are required (or --resume RUN_ID)")
		}
		if spec.From, err = input.ParseWhen("from", fromS, cfg.Timezone); err != nil {
			return err
		}
		if spec.To, err = input.ParseWhen("to", toS, cfg.Timezone); err != nil {
			return err
		}
		if !spec.From.Before(spec.To) {
			return usagef("backfill: --from (%s) must be before --to (%s)", fromS, toS)
		}
	}
	return runPass(ctx, cfg, spec, stdout, stderr)
}

// runPass runs one pass and maps its end to the exit-code contract.
func runPass(ctx context.Context, cfg config.Config, spec reconcile.PassSpec, stdout, stderr io.Writer) error {
	// The pass names its shard on its own lines (with the run id): a second "shard" here
	// would give them the key twice, which log stores such as Elasticsearch reject.
	log := newLogger(cfg, stderr)
	a, err := worker.New(ctx, cfg, log, true)
	if err != nil {
		return err
	}
	defer a.Close()
	if pacedRuntime {
		a.PaceRuntime(pacedExecErr)
	}
	out := worker.PassOutput{Out: stdout}
	if isTerminal(stderr) {
		out.Progress = stderr
	}
	run, err := a.RunPass(ctx, spec, out)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, reconcile.ErrLockHeld):
		log.Info().Str("shard", spec.Shard.String()).Msg("another pass holds this shard's lock; nothing to do")
		fmt.Fprintf(stdout, "another pass holds the lock for shard %s; exiting\n", spec.Shard)
		return nil
	case errors.Is(err, reconcile.ErrInterrupted):
		hint := "the next run carries on"
		if spec.Mode == reconcile.ModeBackfill {
			hint = fmt.Sprintf("continue with: reconciler backfill --resume %d", run.ID)
		}
		return &exitError{code: exitInterrupted, err: fmt.Errorf("interrupted after draining (run %d); %s", run.ID, hint)}
	case errors.Is(err, reconcile.ErrCannotResume):
		return usagef("backfill: %v", err)
	case reconcile.PlatformErrorKindOf(err) == reconcile.KindConfig:
		// Our credentials or account settings are wrong: no retry can help.
		return usagef("pass stopped: %v", err)
	}
	return err
}
