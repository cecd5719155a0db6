package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/repo"
)

func cmdMigrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, _, err := parse("migrate", args, config.GroupDatabase|config.GroupLog, stderr, nil)
	if err != nil {
		return err
	}
	log := newLogger(cfg, stderr)
	db, err := repo.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	applied, err := repo.Migrate(ctx, db)
	if err != nil {
		return err
	}
	if len(applied) == 0 {
		log.Info().Msg("schema up to date")
		fmt.Fprintln(stdout, "schema up to date")
		return nil
	}
	log.Info().Strs("applied", applied).Msg("migrations applied")
	fmt.Fprintf(stdout, "applied %s\n", strings.Join(applied, ", "))
	return nil
}
