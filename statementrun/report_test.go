package statementrun

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/render"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/statement"
)

// TestReportShowsStatementFigures: `report` carries each reconciled day's settlement figures
// in the formats with more than one table (json, html; the xlsx is checked by the report
// command's tests), fees and net to the fifth decimal, and only the days of its period.
func TestReportShowsStatementFigures(t *testing.T) {
	e := setup(t)
	p := reconcile.WechatPay
	line := payLine("F-NONE", "FT-1", 12345, testDay.Start.Add(time.Hour))
	line.FeeMilliFen = 74070 // 0.74070 yuan
	path := writeBill(t, p, testDay, []statement.Line{line})
	if _, err := e.runFile(p, testDay, path, false); err != nil {
		t.Fatal(err)
	}
	next, _ := reconcile.ParseBusinessDay("2026-11-29", shanghai)
	err := postgres.NewReview(e.db.DB).Report(context.Background(), testDay.Start, next.Start, func(rep reconcile.Report) error {
		if len(rep.Statements) != 1 || rep.Statements[0].BillDate != "2026-11-28" || rep.Statements[0].FeeMilliFen != 74070 {
			t.Fatalf("report statements %+v", rep.Statements)
		}
		doc := render.ReportDoc{Report: rep, Loc: shanghai, Generated: testDay.End}
		for _, format := range render.ReportFormats {
			var b bytes.Buffer
			if err := doc.Write(&b, format); err != nil {
				t.Fatalf("%s: %v", format, err)
			}
			switch format {
			case "xlsx":
				continue // binary; the sheet list is checked by the report command's tests
			case "csv":
				continue // the findings alone: the statement days are in the other formats
			}
			// net = 123.45 received less 0.74070 in fees
			for _, want := range []string{"0.74070", "122.70930", "2026-11-28"} {
				if !strings.Contains(b.String(), want) {
					t.Errorf("%s report lacks %q", format, want)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A period that ends before the day starts shows no statement.
	err = postgres.NewReview(e.db.DB).Report(context.Background(), testDay.Start.Add(-time.Hour), testDay.Start, func(rep reconcile.Report) error {
		if len(rep.Statements) != 0 {
			t.Errorf("a period before the day shows %+v", rep.Statements)
		}
		return nil
	})
	if err != nil {
		t.Error(err)
	}
}
