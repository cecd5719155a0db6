package main

import (
	"context"
	"flag"
	"io"
	"os"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/demo"
)

// cmdDemo is `reconciler demo`: the whole story on this machine (make demo).
func cmdDemo(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("reconciler demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	opts := demo.Options{NATSURL: envOr("RECONCILER_TEST_NATS_URL", "nats://127.0.0.1:4222"), Log: zerolog.New(io.Discard)}
	fs.StringVar(&opts.AdminDatabaseURL, "admin-database-url", envOr("RECONCILER_TEST_DATABASE_URL", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"),
		"PostgreSQL server to create the demo database on [RECONCILER_TEST_DATABASE_URL]")
	fs.StringVar(&opts.RedisURL, "redis-url", envOr("RECONCILER_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"), "Redis for claims; empty: database-only [RECONCILER_TEST_REDIS_URL]")
	fs.BoolVar(&opts.Keep, "keep", false, "keep the demo database afterwards (its name is printed)")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return err
		}
		return usagef("demo: %v", err)
	}
	if os.Getenv("RECONCILER_LOG_LEVEL") == "debug" {
		opts.Log = zerolog.New(zerolog.ConsoleWriter{Out: stderr})
	}
	return demo.Run(ctx, opts, stdout)
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}
