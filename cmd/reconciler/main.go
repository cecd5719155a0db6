// Command reconciler is payrecon's one binary: migrate, run, serve, console, backfill,
// mismatches, report, relay, statement, sandbox and demo. main only wires signals, the
// runtime of a paced pass, and maps errors to exit codes; every command is a function of
// (ctx, args, stdout, stderr) so tests can call it.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/payrecon/payrecon/worker"
)

// pacedRuntime, set by main alone, lets a pass tune the process's scheduler to its call
// budget (App.PaceRuntime); tests call Main inside their own process, whose scheduler
// is not a pass's to change. pacedExecErr is why the re-exec for the pass failed, if it did.
var (
	pacedRuntime bool
	pacedExecErr error
)

func main() {
	if len(os.Args) > 1 && (os.Args[1] == "run" || os.Args[1] == "backfill") {
		// First, before the process opens anything; returns only when it did not exec.
		worker.RestoreStderr()
		pacedExecErr = worker.ExecPacedRuntime()
		pacedRuntime = true
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	code := Main(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
