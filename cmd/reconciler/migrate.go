package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/jmoiron/sqlx"
	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/repo/postgres"
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
	return setupRoles(ctx, db, stdout, log)
}

// setupRoles creates the least-privilege roles and grants their rights. Without the right
// to create roles it prints the SQL for an administrator and still succeeds: the schema is
// migrated, and the roles are a one-off step someone else may have to take.
func setupRoles(ctx context.Context, db *sqlx.DB, stdout io.Writer, log zerolog.Logger) error {
	out, err := postgres.SetupRoles(ctx, db)
	if err != nil {
		return err
	}
	if out.PublicMayCreate {
		log.Warn().Msg("PUBLIC may still create objects in schema public: this role does not own the schema")
		fmt.Fprintf(stdout, "-- Every role may still create objects in schema public (this role does not own it).\n"+
			"-- A planted function or table is how the review functions would be attacked: run this as the schema's owner:\n%s;\n",
			postgres.RevokePublicCreateSQL)
	}
	if out.SQL != "" {
		log.Warn().Strs("roles", postgres.Roles).Msg("cannot create database roles (no CREATEROLE): printing the SQL to run as an administrator")
		fmt.Fprintf(stdout, "-- The database roles %s are missing and this role may not create them.\n"+
			"-- Run this as a role with CREATEROLE (then set each role's password), then run migrate again.\n"+
			"-- (reconciler migrate --roles-sql prints the SQL alone.)\n%s",
			strings.Join(postgres.Roles, ", "), out.SQL)
		return nil
	}
	if len(out.Created) > 0 {
		log.Info().Strs("roles", out.Created).Msg("database roles created")
		fmt.Fprintf(stdout, "created roles %s (set their passwords: ALTER ROLE ... PASSWORD ...)\n", strings.Join(out.Created, ", "))
	}
	fmt.Fprintf(stdout, "granted %s\n", strings.Join(postgres.Roles, ", "))
	return nil
}
