package console

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/render"
)

// maxStatementDays bounds one statements page: a year of days is already more rows than a
// person reads, and an unbounded period would let one click scan the whole table.
const maxStatementDays = 366

// statementsPage is the settlement figures of the business days in a period, per account, as
// the statement runs saved them (statement_days): what finance signs off.
type statementsPage struct {
	page
	From, To string // the period's first and last bill dates, as the form sends them back
	Days     []reconcile.StatementDayRow
	Total    reconcile.StatementFigures // the sum of Days' figures
}

// Figures are the day's figures, the page's columns (reconcile.StatementFigureTable).
func (p statementsPage) Figures() []reconcile.StatementFigure { return reconcile.StatementFigureTable }

// Figure is one figure of f for people: money as ¥1,234.56, fees and net to five decimals
// (¥1,234.56789: a platform's per-line fee rounds away otherwise).
func (p statementsPage) Figure(sf reconcile.StatementFigure, f reconcile.StatementFigures) string {
	return render.Figure(sf, f)
}

// statementPeriod reads the page's from/to bill dates (both included; empty: the week ending
// today in the console's zone) into the half-open [first, end) the store takes.
func (h *handler) statementPeriod(from, to string) (string, string, string, string, error) {
	today := h.cfg.Now().In(h.cfg.Location)
	if from == "" {
		from = today.AddDate(0, 0, -6).Format(time.DateOnly)
	}
	if to == "" {
		to = today.Format(time.DateOnly)
	}
	first, err := time.Parse(time.DateOnly, from)
	if err != nil {
		return from, to, "", "", fmt.Errorf("from: want a date such as 2026-11-28, got %q", from)
	}
	last, err := time.Parse(time.DateOnly, to)
	if err != nil {
		return from, to, "", "", fmt.Errorf("to: want a date such as 2026-11-28, got %q", to)
	}
	end := last.AddDate(0, 0, 1)
	switch {
	case !first.Before(end):
		return from, to, "", "", fmt.Errorf("to: the period ends before it starts")
	case end.Sub(first) > maxStatementDays*24*time.Hour:
		return from, to, "", "", fmt.Errorf("to: at most %d days at a time", maxStatementDays)
	}
	return from, to, first.Format(time.DateOnly), end.Format(time.DateOnly), nil
}

func (h *handler) statements(w http.ResponseWriter, r *http.Request) {
	p := statementsPage{page: h.newPage(r)}
	q := r.URL.Query()
	from, to, first, end, err := h.statementPeriod(strings.TrimSpace(q.Get("from")), strings.TrimSpace(q.Get("to")))
	p.From, p.To = from, to
	if err != nil {
		p.Error = text(p.Lang, "bad_request") + " " + err.Error()
		h.render(w, http.StatusBadRequest, "statements", p)
		return
	}
	if p.Days, err = h.store.StatementDays(r.Context(), first, end); err != nil {
		h.serverError(w, r, err)
		return
	}
	p.Total = sumDays(p.Days)
	h.log.Info().Str("person", p.Viewer.Email).Str("from", from).Str("to", to).Int("days", len(p.Days)).
		Msg("review console: statement figures read")
	h.render(w, http.StatusOK, "statements", p)
}

// sumDays adds up the figures of days (the period's total row).
func sumDays(days []reconcile.StatementDayRow) reconcile.StatementFigures {
	var t reconcile.StatementFigures
	for _, d := range days {
		t.Add(d.StatementFigures)
	}
	return t
}
