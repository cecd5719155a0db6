package console

import (
	"html/template"
	"net/http"
	"net/url"
	"slices"
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
	// Missing are the days of the period, up to yesterday, for which an account that has
	// statement days has none: not reconciled (a day without trades is saved, with zeros).
	Missing []missingDay
}

// missingDay is one account's business day no statement run saved.
type missingDay struct {
	Date    string
	Account reconcile.AccountKey
}

// Figures are the day's figures, the page's columns (reconcile.StatementFigureTable).
func (p statementsPage) Figures() []reconcile.StatementFigure { return reconcile.StatementFigureTable }

// Figure is one figure of f for people: money as ¥1,234.56; fees and net, which the bills
// give to five decimals, rounded to the fen (Exact shows all five beside them).
func (p statementsPage) Figure(sf reconcile.StatementFigure, f reconcile.StatementFigures) string {
	if sf.Unit == reconcile.FigureMilliFen {
		return render.Yuan(reconcile.MilliFenToFen(sf.Value(f)))
	}
	return render.Figure(sf, f)
}

// Exact is a fee's or a net's five decimals as the bill gives them ("" for other figures).
func (p statementsPage) Exact(sf reconcile.StatementFigure, f reconcile.StatementFigures) string {
	if sf.Unit != reconcile.FigureMilliFen {
		return ""
	}
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
	// Bill dates name days, not instants: the period rule read in UTC, where every day has
	// 24 hours, gives the bill dates back as they were typed.
	first, end, err := reconcile.DayPeriod(from, to, time.UTC)
	if err != nil {
		return from, to, "", "", err
	}
	if end.Sub(first) > maxStatementDays*24*time.Hour {
		return from, to, "", "", problemf("period_max_days", word("field.to"), maxStatementDays)
	}
	return from, to, first.Format(time.DateOnly), end.Format(time.DateOnly), nil
}

func (h *handler) statements(w http.ResponseWriter, r *http.Request) {
	p := statementsPage{page: h.newPage(r)}
	q := r.URL.Query()
	from, to, first, end, err := h.statementPeriod(strings.TrimSpace(q.Get("from")), strings.TrimSpace(q.Get("to")))
	p.From, p.To = from, to
	if err != nil {
		p.Error = incomplete(asProblem(err)).in(p.Lang)
		h.render(w, http.StatusBadRequest, "statements", p)
		return
	}
	if p.Days, err = h.store.StatementDays(r.Context(), first, end); err != nil {
		h.serverError(w, r, err)
		return
	}
	p.Total = sumDays(p.Days)
	accounts, err := h.store.StatementAccounts(r.Context())
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	p.Missing = missingDays(p.Days, accounts, first, end, h.cfg.Now().In(h.cfg.Location).Format(time.DateOnly))
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

// missingDays are the dates of [first, end) before today on which an account of accounts
// has no saved day.
func missingDays(days []reconcile.StatementDayRow, accounts []reconcile.AccountKey, first, end, today string) []missingDay {
	saved := map[string]bool{}
	for _, d := range days {
		saved[d.BillDate+"|"+d.Platform+":"+d.MerchantID] = true
	}
	var out []missingDay
	start, _ := time.Parse(time.DateOnly, first)
	stop, _ := time.Parse(time.DateOnly, end)
	for t := start; t.Before(stop); t = t.AddDate(0, 0, 1) {
		date := t.Format(time.DateOnly)
		if date >= today {
			break // today's bill is not published yet
		}
		for _, a := range accounts {
			if !saved[date+"|"+a.String()] {
				out = append(out, missingDay{Date: date, Account: a})
			}
		}
	}
	return out
}

// figureResults are the line results a figure of the day counts, for its link to the lines.
var figureResults = map[string]reconcile.LineResult{"repaired": reconcile.LineRepaired, "found": reconcile.LineMismatch, "lines": ""}

// FigureLink is the day's remembered lines a figure counts ("" for a figure that counts none
// of them: money, or the plain matches, which are not remembered).
func (p statementsPage) FigureLink(sf reconcile.StatementFigure, d reconcile.StatementDayRow) template.URL {
	result, ok := figureResults[sf.Key]
	if !ok {
		return ""
	}
	return linesLink(reconcile.AccountKey{Platform: reconcile.Platform(d.Platform), MerchantID: d.MerchantID}, d.BillDate, result)
}

func linesLink(acct reconcile.AccountKey, date string, result reconcile.LineResult) template.URL {
	u := "/review/statements/" + url.PathEscape(string(acct.Platform)) + "/" + url.PathEscape(acct.MerchantID) + "/" + url.PathEscape(date)
	if result != "" {
		u += "?result=" + url.QueryEscape(string(result))
	}
	return template.URL(u) //nolint:gosec // every part escaped
}

// linesPage is the bill lines a statement run remembered for one account's day.
type linesPage struct {
	page
	Account reconcile.AccountKey
	Date    string
	Result  reconcile.LineResult
	Lines   []reconcile.RecordedLine
}

// Results are the line results the page filters by, "" (all) first.
func (p linesPage) Results() []reconcile.LineResult {
	return append([]reconcile.LineResult{""}, reconcile.LineResults...)
}

// Link is this day's lines of one result.
func (p linesPage) Link(result reconcile.LineResult) template.URL {
	return linesLink(p.Account, p.Date, result)
}

func (h *handler) statementLines(w http.ResponseWriter, r *http.Request) {
	p := linesPage{page: h.newPage(r), Date: r.PathValue("date"), Result: reconcile.LineResult(r.URL.Query().Get("result"))}
	platform, err := reconcile.ParsePlatform(r.PathValue("platform"))
	_, derr := time.Parse(time.DateOnly, p.Date)
	if err != nil || derr != nil || (p.Result != "" && !slices.Contains(reconcile.LineResults, p.Result)) {
		notFound(w, r)
		return
	}
	p.Account = reconcile.AccountKey{Platform: platform, MerchantID: r.PathValue("merchant")}
	if p.Lines, err = h.store.StatementLines(r.Context(), p.Account, p.Date, p.Result); err != nil {
		h.serverError(w, r, err)
		return
	}
	h.render(w, http.StatusOK, "lines", p)
}
