package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/mattn/go-isatty"
	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/sandbox"
)

// Exit codes: the contract in README.md ("Exit codes").
const (
	exitOK          = 0
	exitFailed      = 1
	exitUsage       = 2
	exitInterrupted = 3
)

// usagef is bad usage or configuration: exit 2 with the message. It is a
// reconcile.InputError, the one error that means exit 2 wherever it is found.
func usagef(format string, a ...any) error { return reconcile.Inputf(format, a...) }

// exitError carries a specific exit code with its cause.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

type command struct {
	summary string
	run     func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

func commands() map[string]command {
	return map[string]command{
		"migrate":    {"apply the embedded schema migrations; safe to repeat", cmdMigrate},
		"mismatches": {"finance review: list, show, ack, resolve, approve and reject findings (append-only audit trail)", cmdMismatches},
		"report":     {"mismatch and run report for a period as csv, json, xlsx or html", cmdReport},
		"run":        {"one reconciliation pass over due PENDING orders, then exit (the CronJob entry point)", cmdRun},
		"serve":      {"callback endpoints and probes; /metrics on the admin port; with --schedule, passes on a cron spec", cmdServe},
		"console":    {"the finance review console (/review/) with /metrics and probes on the admin port, as the reviewer role", cmdConsole},
		"demo":       {"the whole story on this machine: sandbox, seeded orders, a pass racing callbacks, findings, the next morning's bills", cmdDemo},
		"sandbox":    {"run the platform simulator (Alipay + WeChat Pay v3) on a local port, for staging and demos", sandbox.Main},
		"backfill":   {"re-check every order created in [--from, --to) against the platform; resumable", cmdBackfill},
		"relay":      {"publish the fulfilment outbox to NATS JetStream (once, or --follow)", cmdRelay},
		"statement":  {"reconcile a day's trade bill from the platform (or a downloaded --file) against our orders", cmdStatement},
	}
}

// Main runs one command and returns the process exit code.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmds := commands()
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		printUsage(stdout, cmds)
		if len(args) == 0 {
			return exitUsage
		}
		return exitOK
	}
	c, ok := cmds[args[0]]
	if !ok {
		fmt.Fprintf(stderr, "reconciler: unknown command %q\n\n", args[0])
		printUsage(stderr, cmds)
		return exitUsage
	}
	err := c.run(ctx, args[1:], stdout, stderr)
	return exitCode(err, stderr)
}

func exitCode(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	var ie *reconcile.InputError
	var ee *exitError
	switch {
	case errors.As(err, &ie), config.IsConfigError(err):
		fmt.Fprintf(stderr, "reconciler: %v\n", err)
		return exitUsage
	case errors.As(err, &ee):
		if ee.err != nil {
			fmt.Fprintf(stderr, "reconciler: %v\n", ee.err)
		}
		return ee.code
	}
	fmt.Fprintf(stderr, "reconciler: %v\n", err)
	return exitFailed
}

func printUsage(w io.Writer, cmds map[string]command) {
	fmt.Fprintln(w, "Usage: reconciler <command> [flags]\n\nCommands:")
	names := make([]string, 0, len(cmds))
	for n := range cmds {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "  %-12s %s\n", n, cmds[n].summary)
	}
	fmt.Fprintln(w, "\nEvery flag also reads RECONCILER_<FLAG> (upper case, dashes to underscores); flags win.\nRun 'reconciler <command> --help' for its flags.")
}

// parse builds a command's flag set over the chosen setting groups, parses args and loads
// the configuration. extra registers command-specific flags.
func parse(name string, args []string, groups config.Group, stderr io.Writer, extra func(*flag.FlagSet)) (config.Config, *flag.FlagSet, error) {
	return parseWithLoader(name, args, groups, stderr, func(fs *flag.FlagSet, _ *config.Loader) {
		if extra != nil {
			extra(fs)
		}
	})
}

// parseWithLoader is parse for a command that also tunes the loader (serve: private keys
// optional when it only verifies callbacks).
func parseWithLoader(name string, args []string, groups config.Group, stderr io.Writer, extra func(*flag.FlagSet, *config.Loader)) (config.Config, *flag.FlagSet, error) {
	fs := flag.NewFlagSet("reconciler "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { printFlags(fs) }
	loader := config.Register(fs, groups, nil)
	settings := map[string]bool{}
	fs.VisitAll(func(f *flag.Flag) { settings[f.Name] = true })
	extra(fs, loader)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return config.Config{}, fs, err
		}
		return config.Config{}, fs, usagef("%s: %v", name, err)
	}
	// The command's own flags (--from, --schedule, ...) read RECONCILER_<FLAG> too; the
	// settings' flags are resolved by the loader, which names the setting in its errors.
	if err := flagsFromEnv(fs, func(n string) bool { return !settings[n] }); err != nil {
		return config.Config{}, fs, err
	}
	cfg, err := loader.Load()
	return cfg, fs, err
}

// printFlags is a command's --help: each flag in GNU form with its default and env var.
func printFlags(fs *flag.FlagSet) {
	w := fs.Output()
	fmt.Fprintf(w, "Usage: %s [flags]\n\nFlags (each also read from RECONCILER_<FLAG>; flags win):\n", fs.Name())
	fs.VisitAll(func(f *flag.Flag) {
		arg := " VALUE"
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			arg = ""
		}
		usage := f.Usage
		if !strings.Contains(usage, "[RECONCILER_") {
			usage += " [" + config.EnvName(f.Name) + "]"
		}
		def := ""
		if f.DefValue != "" && f.DefValue != "0" && f.DefValue != "false" {
			def = " (default " + f.DefValue + ")"
		}
		fmt.Fprintf(w, "  --%s%s\n        %s%s\n", f.Name, arg, usage, def)
	})
}

// flagsFromEnv gives every flag that was not set on the command line (and that want selects)
// the value of its RECONCILER_<FLAG> variable: flags win over the environment.
func flagsFromEnv(fs *flag.FlagSet, want func(name string) bool) error {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		if err != nil || set[f.Name] || !want(f.Name) {
			return
		}
		env := config.EnvName(f.Name)
		if v, ok := os.LookupEnv(env); ok {
			if e := fs.Set(f.Name, v); e != nil {
				err = usagef("%s: %v", env, e)
			}
		}
	})
	return err
}

// newLogger builds the process logger: JSON by default, console on a terminal.
func newLogger(cfg config.Config, w io.Writer) zerolog.Logger {
	format := cfg.LogFormat
	if format == "" {
		format = "json"
		if isTerminal(w) {
			format = "console"
		}
	}
	var out io.Writer = w
	if format == "console" {
		out = zerolog.ConsoleWriter{Out: w, TimeFormat: "15:04:05"}
	}
	level, err := zerolog.ParseLevel(strings.ToLower(cfg.LogLevel))
	if err != nil || cfg.LogLevel == "" {
		level = zerolog.InfoLevel
	}
	return zerolog.New(out).Level(level).With().Timestamp().Logger()
}

// isTerminal reports whether w is a terminal: the logger, the progress bar and the refusal
// to print xlsx to a screen all decide by it.
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}
