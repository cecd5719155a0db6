package worker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/robfig/cron/v3"
	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/reconcile"
)

// Scheduler runs passes on a schedule. SkipIfStillRunning keeps passes from overlapping,
// Recover keeps a panicking pass from taking the server down. Passes run on ctx, so SIGTERM
// drains a running pass like `run` does.
func (a *App) Scheduler(ctx context.Context, sched cron.Schedule) *cron.Cron {
	logger := cronLogger{a.log}
	c := cron.New(cron.WithLocation(a.cfg.Timezone), cron.WithLogger(logger),
		cron.WithChain(cron.Recover(logger), cron.SkipIfStillRunning(logger)))
	c.Schedule(sched, cron.FuncJob(func() {
		// The same road as `run`: the run record, the metrics, the backlog and the success
		// mark are RunPass's. A scheduled pass prints nothing; it logs.
		run, err := a.RunPass(ctx, reconcile.PassSpec{Mode: reconcile.ModeScheduled, Shard: a.cfg.Shard, DryRun: a.cfg.DryRun},
			PassOutput{Out: io.Discard})
		switch {
		case err == nil:
		case errors.Is(err, reconcile.ErrLockHeld):
			a.log.Info().Msg("scheduled pass skipped: another pass holds this shard's lock")
		default:
			a.log.Error().Err(err).Int64("run_id", run.ID).Msg("scheduled pass failed")
		}
	}))
	a.metrics.ServeLastSuccess()
	return c
}

// scheduleParser reads five-field specs, descriptors (@every 5m, @daily) and a CRON_TZ= (or
// TZ=) prefix naming the zone of that spec.
var scheduleParser = cron.NewParser(cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// ParseSchedule reads a --schedule spec whose times are in loc unless the spec names its own
// zone. Every error is a spec that does not parse, with the reason: robfig/cron panics
// on some (a bare "TZ=UTC"), so those are caught here too.
func ParseSchedule(spec string, loc *time.Location) (sched cron.Schedule, err error) {
	fail := func(reason any) error { return fmt.Errorf("%v", reason) }
	defer func() {
		if r := recover(); r != nil {
			sched, err = nil, fail("not a schedule")
		}
	}()
	sched, err = scheduleParser.Parse(spec)
	if err != nil {
		return nil, fail(err)
	}
	// Without a zone of its own a spec would follow the process's local zone; dates in
	// payrecon are read in TIMEZONE, so its schedules are too.
	if s, ok := sched.(*cron.SpecSchedule); ok && s.Location == time.Local {
		s.Location = loc
	}
	return sched, nil
}

// cronLogger adapts zerolog to robfig/cron's logger.
type cronLogger struct{ log zerolog.Logger }

func (l cronLogger) Info(msg string, kv ...any) {
	l.log.Debug().Fields(kv).Msg("cron: " + msg)
}

func (l cronLogger) Error(err error, msg string, kv ...any) {
	l.log.Error().Err(err).Fields(kv).Msg("cron: " + msg)
}
