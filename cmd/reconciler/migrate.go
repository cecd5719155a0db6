package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/worker"
)

func cmdMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var rolesSQL bool
	cfg, _, err := parse("migrate", args, config.GroupDatabase|config.GroupLog, stderr, func(fs *flag.FlagSet) {
		fs.BoolVar(&rolesSQL, "roles-sql", false, "print the SQL that creates the database roles and grants their rights (for an administrator), apply nothing")
	})
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	db, err := postgres.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	if rolesSQL {
		sql, err := postgres.RolesSQL(ctx, db)
		if err != nil {
			return err
		}
		fmt.Fprint(stdout, sql)
		return nil
	}
	applied, err := postgres.Migrate(ctx, db)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		log.Info().Msg("schema up to date")
		fmt.Fprintln(stdout, "schema up to date")
	} else {
		log.Info().Strs("applied", applied).Msg("migrations applied")
		fmt.Fprintf(stdout, "applied %s\n", strings.Join(applied, ", "))
	}
	return worker.SetupRoles(ctx, db, stdout, log)
}
