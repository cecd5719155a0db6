package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/payrecon/payrecon/render"
	"github.com/payrecon/payrecon/repo"
)

// cmdReport is `reconciler report --from T --to T --format csv|json|xlsx|html [--out FILE]`.
func cmdReport(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var from, to, format, out, lang string
	cfg, fs, err := parse("report", args, reviewGroups, stderr, func(fs *flag.FlagSet) {
		setReviewUsage(fs, "reconciler report [--from T] [--to T] [--format csv|json|xlsx|html] [--out FILE]",
			"The mismatch and run report of the half-open period [from, to): a summary by kind and review status\n"+
				"with the amounts at stake, the findings first or last seen in the period, and the runs that started in it.\n"+
				"T is a date (2026-11-28, midnight in --timezone) or an RFC 3339 time. Default period: the last 24 hours.")
		fs.StringVar(&from, "from", "", "start of the period, included (default: --to minus 24h)")
		fs.StringVar(&to, "to", "", "end of the period, excluded; may lie in the future (default: now)")
		fs.StringVar(&format, "format", "", "csv, json, xlsx or html (default: from --out's extension, else csv)")
		fs.StringVar(&out, "out", "", "write the report to this file instead of stdout (required for xlsx on a terminal)")
		fs.StringVar(&lang, "lang", "en", "language of the labels in html and xlsx: en or zh (Simplified Chinese); csv and json keep column names")
	})
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usagef("report: unexpected argument %q", fs.Arg(0))
	}
	if format == "" {
		format = reportFormatFromExt(out)
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
	start, end, err := reportPeriod(from, to, now, cfg.Timezone)
	if err != nil {
		return err
	}

	db, err := repo.Open(ctx, cfg.DatabaseURL)
	if err != nil {
		return err
	}
	defer db.Close()
	rep, err := repo.NewReview(db).Report(ctx, start, end)
	if err != nil {
		return err
	}
	doc := render.ReportDoc{Report: rep, Loc: cfg.Timezone, Generated: now, Lang: labels}
	write := func(w io.Writer) error { return doc.Write(w, format) }
	if out == "" {
		if err := write(stdout); err != nil {
			return fmt.Errorf("report: write %s: %w", format, err)
		}
		return nil
	}
	if err := writeReportFile(out, write); err != nil {
		return fmt.Errorf("report: write %s: %w", out, err)
	}
	fmt.Fprintf(stderr, "report: wrote %s (%s, %d findings, %d runs)\n", out, format, len(rep.Findings), len(rep.Runs))
	return nil
}

// reportPeriod reads --from/--to: both default to the 24 hours before now; one given, the
// other is 24h away from it (--from alone runs to now when now is later).
func reportPeriod(from, to string, now time.Time, loc *time.Location) (time.Time, time.Time, error) {
	var start, end time.Time
	var err error
	if to != "" {
		if end, err = parseWhen("to", to, loc); err != nil {
			return start, end, err
		}
	}
	if from != "" {
		if start, err = parseWhen("from", from, loc); err != nil {
			return start, end, err
		}
	}
	switch {
	case from == "" && to == "":
		end = now
		start = now.Add(-24 * time.Hour)
	case from == "":
		start = end.Add(-24 * time.Hour)
	case to == "":
		end = now
		if !start.Before(end) {
			end = start.Add(24 * time.Hour)
		}
	}
	if !start.Before(end) {
		return start, end, usagef("report: --from (%s) must be before --to (%s)", start.Format(time.RFC3339), end.Format(time.RFC3339))
	}
	return start, end, nil
}

func reportFormatFromExt(path string) string {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".json":
		return "json"
	case ".xlsx":
		return "xlsx"
	case ".html", ".htm":
		return "html"
	}
	return "csv"
}

// writeReportFile writes path through a temporary file in the same folder, renamed into
// place only when complete: a failed report never leaves half a file behind.
func writeReportFile(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name()) //nolint:errcheck // gone after the rename
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
