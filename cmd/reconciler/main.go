// Command reconciler is payrecon's one binary: migrate, run, serve, console, backfill,
// mismatches, report, relay, statement, sandbox and demo. main only wires signals and maps
// errors to exit codes; every command is a function of (ctx, args, stdout, stderr) so tests
// can call it.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
