package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/worker"
)

// consoleGroups are the settings `reconciler console` takes: the database (the reviewer
// role's URL), logging, the zone times are shown in, the admin port and the console's own,
// the accounts file among them (its structure only: who is whose service provider). No
// platform, Redis or pass setting: its pod holds none of their secrets.
const consoleGroups = config.GroupDatabase | config.GroupLog | config.GroupTime | config.GroupAdmin | config.GroupConsole

// cmdConsole serves the finance review console on the admin port until SIGTERM (exit 0).
func cmdConsole(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, _, err := parse("console", args, consoleGroups, stderr, nil)
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	c, err := worker.OpenConsole(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer c.Close()
	admin, err := worker.Listen(cfg.AdminListen, "RECONCILER_ADMIN_LISTEN", c.Handler())
	if err != nil {
		return err
	}
	log.Info().Str("admin_listen", admin.Addr().String()).Str("database", config.RedactURL(cfg.DatabaseURL)).
		Str("reviewers", strings.Join(cfg.Console.Reviewers, ",")).Str("approvers", strings.Join(cfg.Console.Approvers, ",")).
		Int("sub_merchants", cfg.Console.Accounts.SubMerchantCount()).Msg("serving the review console")
	fmt.Fprintf(stdout, "review console on %s/review/\n", admin.Addr())
	if err := worker.Serve(ctx, log, worker.ConsoleDrain, nil, admin); err != nil {
		return err
	}
	log.Info().Msg("stopped")
	return nil
}
