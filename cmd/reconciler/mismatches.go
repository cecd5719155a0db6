package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"

	"github.com/payrecon/payrecon/cmd/reconciler/input"
	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/render"
	"github.com/payrecon/payrecon/repo/postgres"
)

// reviewGroups are the settings the review and report commands take; the moves also take
// the lists of who may review and approve.
const (
	reviewGroups = config.GroupDatabase | config.GroupLog | config.GroupTime
	moveGroups   = reviewGroups | config.GroupPeople | config.GroupApply // Redis: an accepted payment's claim
)

const mismatchesUsage = `Usage: reconciler mismatches <command> [flags]

The finance review workflow. Every move is recorded in the append-only audit trail with the
named reviewer (--by: their address, recorded in one spelling: case folded, invisible
characters removed), the operating-system user who ran the command, the time (the
database's clock) and the evidence version seen. Once RECONCILER_REVIEWERS or
RECONCILER_APPROVERS is set, the reviewer must be on one of them, and on
RECONCILER_APPROVERS (when set) to approve or reject.

Commands:
  list      list findings (default: OPEN, ACKNOWLEDGED, PENDING_APPROVAL); page with --after-id
  show ID   one finding in full: detail, evidence version, audit trail, the order and its events
  ack ID --by EMAIL [--note TEXT] [--version V]
            acknowledge an OPEN finding (OPEN -> ACKNOWLEDGED)
  resolve ID --by EMAIL --resolution R [--note TEXT] [--version V]
            resolve an OPEN or ACKNOWLEDGED finding. accepted and false_positive -> RESOLVED;
            refunded, adjusted, written_off and accept_payment move money -> PENDING_APPROVAL
            (a second person approves); adjusted and written_off need a --note saying why
            an approved accept_payment moves the order to PAID (event source review)
  approve ID --by EMAIL [--note TEXT] [--version V]
            approve a PENDING_APPROVAL resolution (-> RESOLVED); refused for its proposer
  reject ID --by EMAIL --note TEXT
            turn down a PENDING_APPROVAL resolution (-> ACKNOWLEDGED)
  withdraw ID --by EMAIL [--note TEXT]
            take your own PENDING_APPROVAL proposal back (-> ACKNOWLEDGED)

Exit codes: 0 done; 1 database failure, unknown id, a move the status does not allow (another
reviewer got there first), or evidence that changed since the version named (look again with
show); 2 bad usage, a reviewer not on the lists, or the proposer approving their own
resolution.

Run 'reconciler mismatches <command> --help' for its flags.
`

// cmdMismatches is `reconciler mismatches <list|show|ack|resolve|approve|reject>`.
func cmdMismatches(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, mismatchesUsage)
		return usagef("mismatches: name a command: list, show, ack, resolve, approve or reject")
	}
	switch args[0] {
	case "-h", "-help", "--help", "help":
		fmt.Fprint(stdout, mismatchesUsage)
		return nil
	}
	var run func(ctx context.Context, args []string, stdout, stderr io.Writer) error
	switch args[0] {
	case "list":
		run = mismatchesList
	case "show":
		run = mismatchesShow
	case "ack":
		run = func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return reviewMove(ctx, "ack", args, stdout, stderr)
		}
	case "resolve", "approve", "reject", "withdraw":
		name := args[0]
		run = func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
			return reviewMove(ctx, name, args, stdout, stderr)
		}
	default:
		return usagef("mismatches: unknown command %q (want list, show, ack, resolve, approve, reject or withdraw)", args[0])
	}
	return run(ctx, args[1:], stdout, stderr)
}

// parseWithID is parse for the commands that take an id: flags may come before or after it
// (`ack 42 --by ann` and `ack --by ann 42`). The flag package stops at the first non-flag,
// so a first pass over a throwaway flag set with the same flags separates the flags from
// the positional arguments; the real parse then sees the flags first and the rest after
// "--", where fs.Args() returns them.
func parseWithID(name string, groups config.Group, args []string, stderr io.Writer, extra func(*flag.FlagSet)) (config.Config, *flag.FlagSet, error) {
	dry := flag.NewFlagSet(name, flag.ContinueOnError)
	dry.SetOutput(io.Discard)
	config.Register(dry, groups, func(string) (string, bool) { return "", false })
	extra(dry)
	var flags, positional []string
	rest := args
	for {
		if err := dry.Parse(rest); err != nil {
			// A bad flag or --help: the real parse, given the same flags, reports it.
			return parse(name, rest, groups, stderr, extra)
		}
		consumed := rest[:len(rest)-dry.NArg()]
		flags = append(flags, consumed...)
		if dry.NArg() == 0 {
			break
		}
		if len(consumed) > 0 && consumed[len(consumed)-1] == "--" {
			flags = flags[:len(flags)-1]
			positional = append(positional, dry.Args()...)
			break
		}
		positional = append(positional, dry.Arg(0))
		rest = dry.Args()[1:]
	}
	if len(positional) > 0 {
		flags = append(append(flags, "--"), positional...)
	}
	return parse(name, flags, groups, stderr, extra)
}

func setReviewUsage(fs *flag.FlagSet, synopsis, about string) {
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: %s\n\n%s\n\nFlags:\n", synopsis, about)
		fs.PrintDefaults()
	}
}

func openReview(ctx context.Context, cfg config.Config) (*postgres.Review, func(), error) {
	db, err := postgres.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return nil, nil, err
	}
	return postgres.NewReview(db), func() { db.Close() }, nil
}

// ---- list ----

func mismatchesList(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var o input.ListQuery
	var format string
	cfg, fs, err := parse("mismatches list", args, reviewGroups, stderr, func(fs *flag.FlagSet) {
		setReviewUsage(fs, "reconciler mismatches list [flags]",
			"Lists findings in id order, one page at a time: pass the last id shown as --after-id for the next page.")
		fs.StringVar(&o.Status, "status", "", "OPEN, ACKNOWLEDGED, PENDING_APPROVAL, RESOLVED (comma-separated) or all (default: all but RESOLVED)")
		fs.StringVar(&o.Query, "q", "", "only the finding with this id, or those whose out_trade_no, platform trade number or out_refund_no starts with this")
		fs.StringVar(&o.Kind, "kind", "", "only this kind, e.g. AMOUNT_MISMATCH")
		fs.StringVar(&o.Platform, "platform", "", "only this platform: alipay or wechatpay")
		fs.StringVar(&o.Since, "since", "", "only findings first or last seen at or after this date (2026-11-28, midnight in --timezone) or RFC 3339 time")
		fs.StringVar(&o.Until, "until", "", "only findings first or last seen up to this date, included (its whole day in --timezone), or before this RFC 3339 time")
		fs.IntVar(&o.Limit, "limit", reconcile.DefaultListLimit, "findings per page (1 to 10000)")
		fs.Int64Var(&o.AfterID, "after-id", 0, "list findings with an id above this one (the next page)")
		fs.StringVar(&format, "format", "table", "table, json or csv")
	})
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("mismatches list: unexpected argument %q", fs.Arg(0))
	}
	filter, err := o.Filter(cfg.Timezone)
	if err != nil {
		return err
	}
	if !slices.Contains(render.FindingFormats, format) {
		return usagef("mismatches list: --format must be table, json or csv, got %q", format)
	}

	rv, done, err := openReview(ctx, cfg)
	if err != nil {
		return err
	}
	defer done()
	findings, err := rv.List(ctx, filter)
	if err != nil {
		return err
	}
	err = render.WriteFindings(stdout, format, findings, cfg.Timezone)
	if err != nil {
		return fmt.Errorf("mismatches list: write output: %w", err)
	}
	if len(findings) == filter.Limit {
		fmt.Fprintf(stderr, "more findings may follow: add --after-id %d for the next page\n", findings[len(findings)-1].ID)
	} else if len(findings) == 0 {
		fmt.Fprintln(stderr, "no findings match")
	}
	return nil
}

// ---- formatting shared by list, show and report ----

func mismatchesShow(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var format string
	cfg, fs, err := parseWithID("mismatches show", reviewGroups, args, stderr, func(fs *flag.FlagSet) {
		setReviewUsage(fs, "reconciler mismatches show ID|NUMBER [flags]",
			"Shows one finding in full: every column, the detail, the audit trail, and the order's current state and payment events.\n"+
				"Name it by its id, or by the start of its out_trade_no, platform trade number or out_refund_no (an id wins).")
		fs.StringVar(&format, "format", "text", "text or json")
	})
	if err != nil {
		return err
	}
	ref, err := input.FindingRef("show", fs.Args())
	if err != nil {
		return err
	}
	if format != "text" && format != "json" {
		return usagef("mismatches show: --format must be text or json, got %q", format)
	}
	rv, done, err := openReview(ctx, cfg)
	if err != nil {
		return err
	}
	defer done()
	d, err := reconcile.FindingByRef(ctx, rv, ref)
	if err != nil {
		return err
	}
	if format == "json" {
		return render.WriteJSON(stdout, render.DetailsView(d, cfg.Timezone))
	}
	return render.WriteDetails(stdout, d, cfg.Timezone)
}
