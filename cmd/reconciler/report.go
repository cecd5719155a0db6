package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/payrecon/payrecon/cmd/reconciler/input"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/render"
	"github.com/payrecon/payrecon/repo/postgres"
)

// cmdReport is `reconciler report --from T --to T --format csv|json|xlsx|html [--out FILE]`.
func cmdReport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var from, to, format, out, lang string
	cfg, fs, err := parse("report", args, reviewGroups, stderr, func(fs *flag.FlagSet) {
		setReviewUsage(fs, "reconciler report [--from T] [--to T] [--format csv|json|xlsx|html] [--out FILE]",
			"The mismatch and run report of a period: a summary by kind and review status with the amounts at stake,\n"+
				"the findings first or last seen in the period, the runs that started in it, the statement days and the\n"+
				"review moves made in it. T is a date (2026-11-28) or an RFC 3339 time. Dates are whole days in --timezone,\n"+
				"both included, as in the console: --from 2026-11-28 --to 2026-11-28 is that one day. An RFC 3339 --to is an\n"+
				"exact end, excluded. Default period: the last 24 hours.")
		fs.StringVar(&from, "from", "", "start of the period, included: a date (from its midnight) or an RFC 3339 time (default: a date --to's day, else --to minus 24h)")
		fs.StringVar(&to, "to", "", "end of the period: a date is its last day, included; an RFC 3339 time is excluded; may lie in the future (default: now)")
		fs.StringVar(&format, "format", "", "csv, json, xlsx or html (default: from --out's extension, else csv)")
		fs.StringVar(&out, "out", "", "write the report to this file instead of stdout (required for xlsx on a terminal)")
		fs.StringVar(&lang, "lang", "en", "language of the headings and coded values (kinds, statuses, resolutions) in csv, html and xlsx: en or zh (Simplified Chinese); json keeps field names and codes")
	})
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("report: unexpected argument %q", fs.Arg(0))
	}
	if format == "" {
		format = input.ReportFormatFromExt(out)
	}
	format = strings.ToLower(format)
	if !slices.Contains(render.ReportFormats, format) {
		return usagef("report: --format must be one of %s, got %q", strings.Join(render.ReportFormats, ", "), format)
	}
	labels, err := render.ParseLang(lang)
	if err != nil {
		return usagef("report: --lang: %v", err)
	}
	if format == "xlsx" && out == "" {
		if isTerminal(stdout) {
			return usagef("report: an xlsx report is a binary file: give --out FILE or redirect stdout")
		}
	}
	now := time.Now().Truncate(time.Second)
	start, end, err := input.ReportPeriod(from, to, now, cfg.Timezone)
	if err != nil {
		return err
	}
	// Refused here, before connecting, as well as by the repository, which refuses it to
	// anyone.
	if err := reconcile.CheckReportPeriod(start, end); err != nil {
		return err
	}

	db, err := postgres.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	// The findings stream from the database to the output inside Report's snapshot.
	return postgres.NewReview(db).Report(ctx, start, end, func(rep reconcile.Report) error {
		doc := render.ReportDoc{Report: rep, Loc: cfg.Timezone, Generated: now, Lang: labels}
		write := func(w io.Writer) error { return doc.Write(w, format) }
		if out == "" {
			if err := write(stdout); err != nil {
				return fmt.Errorf("report: write %s: %w", format, err)
			}
			return nil
		}
		if err := writeFileWhole(out, write); err != nil {
			return fmt.Errorf("report: write %s: %w", out, err)
		}
		fmt.Fprintf(stderr, "report: wrote %s (%s, %d findings, %d runs)\n", out, format, rep.Totals.Count, len(rep.Runs))
		return nil
	})
}
