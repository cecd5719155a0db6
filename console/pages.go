package console

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/render"
)

// pageSize is the findings per list page.
const pageSize = 50

// page is what every template sees: the viewer, the language and the formatting helpers.
type page struct {
	Lang   string
	Viewer viewer
	Zone   string
	loc    *time.Location
	Flash  string // what was just done
	Error  string // why the last action failed
	// providers names the sub-merchants' providers beside them (Via).
	providers Providers
}

func (p page) T(key string) string       { return text(p.Lang, key) }
func (p page) language() string          { return p.Lang }
func (p page) N(word any) string         { return text(p.Lang, fmt.Sprint(word)) }
func (p page) A(action string) string    { return auditName(p.Lang, action) }
func (p page) Yuan(minor int64) string   { return yuan(minor) }
func (p page) YuanP(minor *int64) string { return yuanPtr(minor) }
func (p page) Time(t time.Time) string   { return clock(t, p.loc) }
func (p page) TimeP(t *time.Time) string {
	if t == nil {
		return "—"
	}
	return clock(*t, p.loc)
}
func (p page) RoleLabel() string {
	if p.Viewer.CanApprove() {
		return p.T("role_approver")
	}
	return p.T("role_reviewer")
}

func (h *handler) newPage(r *http.Request) page {
	return page{Lang: lang(r), Viewer: viewerFrom(r.Context()), Zone: h.cfg.Location.String(), loc: h.cfg.Location, providers: h.cfg.Providers}
}

// listPage is the findings list.
type listPage struct {
	page
	Now        time.Time
	OverdueAt  time.Time // a finding first seen before it and not resolved is overdue
	SLA        string    // RECONCILER_REVIEW_SLA as people read it
	Q          listQuery
	Result     reconcile.FindingPage
	AtStake    int64
	Page, Last int
	// Prev and Next link the neighbouring pages with every filter and the sort kept ("" at
	// an end). Whole paths, typed as URLs: html/template would escape a query string put
	// after a "?" in an href as one query value, "&" and "=" included.
	Prev, Next  template.URL
	Kinds       []reconcile.MismatchKind
	Statuses    []reconcile.ReviewStatus
	Platforms   []reconcile.Platform
	Resolutions []reconcile.Resolution
	Sorts       []reconcile.FindingSort
	Providers   []providerChoice // the provider filter's choices; none: no filter shown
	ReportFrom  string
	ReportTo    string
}

// listQuery is the list's filter as the form sends it back (strings, to refill the form).
type listQuery struct {
	Query                         string // the search box: an id or the start of a number
	Overdue                       bool   // only the overdue
	Statuses                      []string
	Kind, Platform, Merchant      string
	Provider                      string // a service provider: only its sub-merchants' findings
	From, To, Min, Max, Sort, Dir string
	Page                          int
}

func (q listQuery) HasStatus(s reconcile.ReviewStatus) bool {
	return slices.Contains(q.Statuses, string(s))
}

// Age is how long ago a finding was first seen, as people read it.
func (p listPage) Age(first time.Time) string { return age(p.Lang, p.Now.Sub(first)) }

// FilterQuery is the page's filter and sort, for the bulk form to take back or act on.
func (p listPage) FilterQuery() string { return p.Q.values(1) }

// AccountLink is the list narrowed to one merchant account.
func (p listPage) AccountLink(a reconcile.AccountTotal) template.URL {
	q := p.Q
	q.Platform, q.Merchant = string(a.Platform), a.MerchantID
	return q.link(1)
}

// OverdueLink is the list of the overdue findings among what the page shows.
func (p listPage) OverdueLink() template.URL {
	q := p.Q
	q.Overdue = true
	return q.link(1)
}

// age writes d in days, hours and minutes, the two largest units that are not zero.
func age(lang string, d time.Duration) string {
	units := []struct {
		size   time.Duration
		en, zh string
	}{{24 * time.Hour, "d", "天"}, {time.Hour, "h", "小时"}, {time.Minute, "m", "分"}}
	var parts []string
	for _, u := range units {
		if n := d / u.size; n > 0 || (len(parts) == 0 && u.size == time.Minute) {
			if lang == "zh" {
				parts = append(parts, fmt.Sprintf("%d%s", n, u.zh))
			} else {
				parts = append(parts, fmt.Sprintf("%d%s", n, u.en))
			}
			d -= n * u.size
		}
		if len(parts) == 2 {
			break
		}
	}
	sep := " "
	if lang == "zh" {
		sep = ""
	}
	return strings.Join(parts, sep)
}

// overdueAt is when a finding still unresolved had to be first seen by to be overdue now.
func (h *handler) overdueAt() time.Time {
	sla := h.cfg.ReviewSLA
	if sla <= 0 {
		sla = reconcile.DefaultReviewSLA
	}
	return h.cfg.Now().Add(-sla)
}

// link is the list's path for page of q: every filter and the sort kept. The values are
// url.Values-encoded, so the result is safe to trust as a URL.
func (q listQuery) link(page int) template.URL {
	return template.URL("/review/?" + q.values(page)) //nolint:gosec // built from encoded values
}

// values is q as a query string, with page replaced.
func (q listQuery) values(page int) string {
	v := url.Values{}
	for _, s := range q.Statuses {
		v.Add("status", s)
	}
	for k, s := range map[string]string{"q": q.Query, "kind": q.Kind, "platform": q.Platform, "merchant": q.Merchant, "provider": q.Provider,
		"from": q.From, "to": q.To, "min": q.Min, "max": q.Max, "sort": q.Sort, "dir": q.Dir} {
		if s != "" {
			v.Set(k, s)
		}
	}
	if q.Overdue {
		v.Set("overdue", "1")
	}
	if page > 1 {
		v.Set("page", strconv.Itoa(page))
	}
	return v.Encode()
}

// parseList reads the list's query into a search filter; the error names the bad field.
func (h *handler) parseList(r *http.Request) (listQuery, reconcile.FindingFilter, error) {
	return h.parseListValues(r.URL.Query())
}

// parseListValues reads a list query (the page's own, or the one a bulk form carries).
func (h *handler) parseListValues(v url.Values) (listQuery, reconcile.FindingFilter, error) {
	q := listQuery{Query: v.Get("q"), Overdue: v.Get("overdue") != "", Kind: v.Get("kind"), Platform: v.Get("platform"), Merchant: strings.TrimSpace(v.Get("merchant")),
		Provider: strings.TrimSpace(v.Get("provider")), From: v.Get("from"), To: v.Get("to"), Min: strings.TrimSpace(v.Get("min")), Max: strings.TrimSpace(v.Get("max")),
		Sort: v.Get("sort"), Dir: v.Get("dir"), Page: 1}
	f := reconcile.FindingFilter{Merchant: q.Merchant, Limit: pageSize, OverdueAt: h.overdueAt(), OverdueOnly: q.Overdue}
	var err error
	if f.Query, err = reconcile.ParseFindingQuery(q.Query); err != nil {
		return q, f, problemf("want_search", word("field.q"), reconcile.MaxFindingQuery)
	}
	for _, s := range v["status"] {
		if s == "" {
			continue
		}
		st, err := reconcile.ParseReviewStatus(s)
		if err != nil {
			return q, f, problemf("want_choice", word("field.status"), s)
		}
		q.Statuses = append(q.Statuses, string(st))
		f.Statuses = append(f.Statuses, st)
	}
	if len(f.Statuses) == 0 { // what needs someone, unless other statuses are asked for
		f.Statuses = reconcile.NeedsAction
		for _, st := range f.Statuses {
			q.Statuses = append(q.Statuses, string(st))
		}
	}
	if q.Kind != "" {
		k, err := reconcile.ParseMismatchKind(q.Kind)
		if err != nil {
			return q, f, problemf("want_choice", word("field.kind"), q.Kind)
		}
		f.Kind = k
	}
	switch q.Platform {
	case "", string(reconcile.Alipay), string(reconcile.WechatPay):
		f.Platform = reconcile.Platform(q.Platform)
	default:
		return q, f, problemf("want_choice", word("field.platform"), q.Platform)
	}
	if q.Provider != "" && !h.cfg.Providers.Known(q.Provider) {
		return q, f, problemf("want_choice", word("field.provider"), q.Provider)
	}
	// The one period rule: both dates included, whole days in the console's zone.
	if f.Since, f.Until, err = reconcile.DayPeriod(q.From, q.To, h.cfg.Location); err != nil {
		return q, f, err
	}
	if f.MinAtStake, err = amount("min", q.Min); err != nil {
		return q, f, err
	}
	if f.MaxAtStake, err = amount("max", q.Max); err != nil {
		return q, f, err
	}
	if q.Sort != "" && !slices.Contains(reconcile.FindingSorts, reconcile.FindingSort(q.Sort)) {
		return q, f, problemf("want_choice", word("field.sort"), q.Sort)
	}
	f.Sort, f.Ascending = reconcile.FindingSort(q.Sort), q.Dir == "asc"
	if p := v.Get("page"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 100000 {
			return q, f, problemf("want_page", word("field.page"), p)
		}
		q.Page = n
	}
	f.Offset = (q.Page - 1) * pageSize
	return q, f, nil
}

// amount reads a yuan amount such as 100 or 1234.5 into minor units; "" is no bound.
func amount(field, s string) (*int64, error) {
	if s == "" {
		return nil, nil
	}
	n, err := reconcile.ParseYuan(strings.ReplaceAll(strings.TrimPrefix(s, "¥"), ",", ""))
	if err != nil || n < 0 {
		return nil, problemf("want_amount", word("field."+field), s)
	}
	return &n, nil
}

// search runs a list query: the filter f, narrowed to q's provider's sub-merchants when it
// names one. The list and a bulk move over all that matches both search through it, so a
// move takes exactly the findings the list showed.
func (h *handler) search(ctx context.Context, q listQuery, f reconcile.FindingFilter) (reconcile.FindingPage, error) {
	if q.Provider == "" {
		return h.store.Search(ctx, f)
	}
	return h.store.SearchAccounts(ctx, f, h.cfg.Providers.SubMerchants(q.Provider))
}

func (h *handler) list(w http.ResponseWriter, r *http.Request) {
	p := listPage{page: h.newPage(r), Kinds: reconcile.MismatchKinds, Statuses: reconcile.ReviewStatuses,
		Platforms: reconcile.Platforms(), Sorts: reconcile.FindingSorts, Resolutions: reconcile.Resolutions,
		Providers: h.cfg.Providers.choices()}
	today := h.cfg.Now().In(h.cfg.Location)
	p.ReportFrom, p.ReportTo = today.AddDate(0, 0, -6).Format("2006-01-02"), today.Format("2006-01-02")
	q, f, err := h.parseList(r)
	p.Q, p.Now, p.OverdueAt = q, h.cfg.Now(), f.OverdueAt
	p.SLA = age(p.Lang, p.Now.Sub(p.OverdueAt))
	status := http.StatusOK
	if err != nil {
		p.Error, status = incomplete(asProblem(err)).in(p.Lang), http.StatusBadRequest
	} else if p.Result, err = h.search(r.Context(), q, f); err != nil {
		h.serverError(w, r, err)
		return
	}
	for _, k := range p.Result.ByKind {
		p.AtStake += k.AtStakeMinor
	}
	p.Page, p.Last = q.Page, int((p.Result.Total+pageSize-1)/pageSize)
	if p.Page > 1 {
		p.Prev = q.link(p.Page - 1)
	}
	if p.Page < p.Last {
		p.Next = q.link(p.Page + 1)
	}
	h.render(w, status, "list", p)
}

// findingPage is one finding with everything that bears on it.
type findingPage struct {
	page
	D           reconcile.FindingDetails
	Refund      *reconcile.RefundRecord // the order's refund a refund finding is about; nil when we have none
	AtStake     int64
	Detail      string
	Resolutions []reconcile.Resolution
	CanAck      bool
	CanResolve  bool
	CanApprove  bool     // approve and reject
	CanWithdraw bool     // the proposer takes their proposal back
	Reasons     []string // label keys: why a move is not offered (whyNot)
}

// LineLink is the day's remembered lines a bill line of the finding is among.
func (p findingPage) LineLink(l reconcile.RecordedLine) template.URL {
	return linesLink(reconcile.AccountKey{Platform: l.Platform, MerchantID: l.MerchantID}, l.BillDate, "")
}

func (h *handler) finding(w http.ResponseWriter, r *http.Request) {
	p := h.newPage(r)
	if done := r.URL.Query().Get("done"); done != "" {
		p.Flash = text(p.Lang, "done") + " " + auditName(p.Lang, done)
	}
	h.renderFinding(w, r, p, http.StatusOK)
}

// renderFinding shows a finding as it now stands, with p's flash or error.
func (h *handler) renderFinding(w http.ResponseWriter, r *http.Request, p page, status int) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		h.render(w, http.StatusNotFound, "error", struct {
			page
			Message string
		}{p, text(p.Lang, "not_found")})
		return
	}
	d, err := h.store.Details(r.Context(), id)
	if errors.Is(err, reconcile.ErrNotFound) {
		h.render(w, http.StatusNotFound, "error", struct {
			page
			Message string
		}{p, text(p.Lang, "not_found")})
		return
	}
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	fp := findingPage{page: p, D: d, AtStake: d.Finding.AtStakeMinor()}
	// Only the resolutions that fit the finding are offered (accept_payment settles a
	// payment, not a refund or an unknown order); the database refuses the others anyway.
	for _, res := range reconcile.Resolutions {
		if res.Fits(d.Finding.Kind, d.Finding.OutRefundNo != "") {
			fp.Resolutions = append(fp.Resolutions, res)
		}
	}
	for i, rf := range d.Refunds {
		if d.Finding.OutRefundNo != "" && rf.OutRefundNo == d.Finding.OutRefundNo {
			fp.Refund = &d.Refunds[i]
		}
	}
	var pretty bytes.Buffer
	if len(d.Finding.Detail) > 0 && string(d.Finding.Detail) != "{}" && string(d.Finding.Detail) != "null" {
		if err := jsonIndent(&pretty, d.Finding.Detail); err == nil {
			fp.Detail = pretty.String()
		}
	}
	// The buttons are the moves the review rules allow this person now; approving and
	// rejecting also need an approver. Each post is decided again by the store.
	f := d.Finding
	can := reconcile.AvailableReviewActions(f.ReviewState(), p.Viewer.Email)
	fp.CanAck = slices.Contains(can, reconcile.ReviewAcknowledge)
	fp.CanResolve = slices.Contains(can, reconcile.ReviewResolve)
	fp.CanApprove = slices.Contains(can, reconcile.ReviewApprove) && p.Viewer.CanApprove()
	fp.CanWithdraw = slices.Contains(can, reconcile.ReviewWithdraw)
	fp.Reasons = h.whyNot(f, p.Viewer)
	h.render(w, status, "finding", fp)
}

// moveOf is the store's method for a form's action (nil: no such action).
func moveOf(s Store, action string) func(context.Context, int64, reconcile.ReviewInput) (reconcile.ReviewMove, error) {
	switch action {
	case "acknowledge":
		return s.Acknowledge
	case "resolve":
		return s.Resolve
	case "approve":
		return s.Approve
	case "withdraw":
		return s.Withdraw
	case "reject":
		return s.Reject
	}
	return nil
}

// readForm reads a POST's form of at most limit bytes and checks its form token; on false
// the answer (400 or 403) is written.
func (h *handler) readForm(w http.ResponseWriter, r *http.Request, v viewer, limit int64) bool {
	r.Body = http.MaxBytesReader(w, r.Body, limit)
	if err := r.ParseForm(); err != nil {
		fail(w, r, http.StatusBadRequest, problemf("unreadable_form"))
		return false
	}
	if !csrfOK(r, v) {
		h.log.Warn().Str("person", v.Email).Str("path", r.URL.Path).Msg("review console: POST without a valid form token refused")
		fail(w, r, http.StatusForbidden, problemf("csrf"))
		return false
	}
	return true
}

// act is a POST of one review move. Every POST carries the viewer's form token and the
// evidence version the page showed; approvals and rejections need an approver.
func (h *handler) act(w http.ResponseWriter, r *http.Request) {
	p := h.newPage(r)
	v := p.Viewer
	if !h.readForm(w, r, v, 16<<10) {
		return
	}
	action := r.PathValue("action")
	move := moveOf(h.store, action)
	if move == nil {
		notFound(w, r)
		return
	}
	if (action == "approve" || action == "reject") && !v.CanApprove() {
		h.log.Warn().Str("person", v.Email).Str("action", action).Msg("review console: approval by a non-approver refused")
		fail(w, r, http.StatusForbidden, problemf("forbidden_approve"))
		return
	}
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		notFound(w, r)
		return
	}
	in := reconcile.ReviewInput{By: v.Email, Note: r.PostFormValue("note")}
	if in.Version, err = strconv.ParseInt(r.PostFormValue("version"), 10, 64); err != nil || in.Version <= 0 {
		p.Error = incomplete(problemf("field.version")).in(p.Lang)
		h.renderFinding(w, r, p, http.StatusBadRequest)
		return
	}
	if action == "resolve" {
		res, err := reconcile.ParseResolution(r.PostFormValue("resolution"))
		if err != nil {
			p.Error = incomplete(problemf("bulk_resolution")).in(p.Lang)
			h.renderFinding(w, r, p, http.StatusBadRequest)
			return
		}
		in.Resolution = res
	}
	m, err := move(r.Context(), id, in)
	if err != nil {
		h.refused(w, r, p, action, id, in, err)
		return
	}
	h.log.Info().Str("person", v.Email).Str("action", m.Audit.Action).Int64("mismatch_id", id).
		Int64("evidence_version", in.Version).Str("review_status", string(m.Finding.ReviewStatus)).Msg("review console: move recorded")
	http.Redirect(w, r, fmt.Sprintf("/review/findings/%d?done=%s", id, url.QueryEscape(m.Audit.Action)), http.StatusSeeOther)
}

// refused shows the finding again with why the move (action, asked with in) was refused,
// in the page's language.
func (h *handler) refused(w http.ResponseWriter, r *http.Request, p page, action string, id int64, in reconcile.ReviewInput, err error) {
	why, status, ok := reviewRefusal(action, in, err)
	if !ok {
		h.serverError(w, r, err)
		return
	}
	p.Error = why.in(p.Lang)
	h.log.Info().Str("person", p.Viewer.Email).Str("action", action).Int64("mismatch_id", id).Err(err).Msg("review console: move refused")
	h.renderFinding(w, r, p, status)
}

// reportDownloadTimeout bounds one report download, database work and writing. The
// server's write timeout (httpapi.WriteTimeout, 15 s) is for pages; a year's report of
// 100,000 findings takes longer (an XLSX sends its first byte only once every row is in its
// sheet), so a download extends its own write deadline to this.
const reportDownloadTimeout = 10 * time.Minute

// report downloads the period's report: csv, xlsx or html (the html one opens in the
// browser), streamed from the database to the client: no copy of the whole file is held.
// Until its first byte a failure is an error page; after it the response is cut off.
func (h *handler) report(w http.ResponseWriter, r *http.Request) {
	p := h.newPage(r)
	q := r.URL.Query()
	format := q.Get("format")
	if format != "csv" && format != "xlsx" && format != "html" {
		fail(w, r, http.StatusBadRequest, problemf("want_format"))
		return
	}
	from, to := q.Get("from"), q.Get("to")
	if from == "" || to == "" {
		fail(w, r, http.StatusBadRequest, incomplete(problemf("need_period")))
		return
	}
	// The one period rule, as the list's filter and `reconciler report` read dates: both
	// days included, whole days in the console's zone.
	since, until, err := reconcile.DayPeriod(from, to, h.cfg.Location)
	if err == nil {
		err = reconcile.CheckReportPeriod(since, until)
	}
	if err != nil {
		fail(w, r, http.StatusBadRequest, asProblem(err))
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), reportDownloadTimeout)
	defer cancel()
	if err := http.NewResponseController(w).SetWriteDeadline(time.Now().Add(reportDownloadTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		h.log.Warn().Err(err).Msg("review console: a report download keeps the server's write timeout")
	}
	out := &reportResponse{w: w, format: format, file: fmt.Sprintf("payrecon-report-%s-to-%s.%s", from, to, format)}
	err = h.store.Report(ctx, since, until, func(rep reconcile.Report) error {
		doc := render.ReportDoc{Report: rep, Loc: h.cfg.Location, Generated: h.cfg.Now().Truncate(time.Second), Lang: render.Lang(p.Lang)}
		return doc.Write(out, format)
	})
	var input *reconcile.InputError
	switch {
	case err == nil:
		h.log.Info().Str("person", p.Viewer.Email).Str("format", format).Str("from", from).Str("to", to).Msg("review console: report downloaded")
	case !out.started && errors.As(err, &input):
		fail(w, r, http.StatusBadRequest, asProblem(err))
	case !out.started:
		h.serverError(w, r, fmt.Errorf("%s report: %w", format, err))
	default:
		// The status and part of the file are out. Ending the response normally would hand
		// the client a file that looks complete; aborting it cuts the connection, so the
		// browser reports the download as failed.
		h.log.Error().Err(err).Str("person", p.Viewer.Email).Str("format", format).Str("from", from).Str("to", to).
			Int64("bytes", out.written).Msg("review console: report download cut off")
		panic(http.ErrAbortHandler)
	}
}

// reportResponse is a report download's body: it sets the download's headers at the first
// byte, so that a failure before it is still a plain error page.
type reportResponse struct {
	w            http.ResponseWriter
	format, file string
	started      bool
	written      int64
}

func (o *reportResponse) Write(b []byte) (int, error) {
	if !o.started {
		o.started = true
		hdr := o.w.Header()
		switch o.format {
		case "csv":
			hdr.Set("Content-Type", "text/csv; charset=utf-8")
			hdr.Set("Content-Disposition", `attachment; filename="`+o.file+`"`)
		case "xlsx":
			hdr.Set("Content-Type", "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet")
			hdr.Set("Content-Disposition", `attachment; filename="`+o.file+`"`)
		default:
			hdr.Set("Content-Type", "text/html; charset=utf-8")
			hdr.Set("Content-Disposition", `inline; filename="`+o.file+`"`)
		}
	}
	n, err := o.w.Write(b)
	o.written += int64(n)
	return n, err
}

func (h *handler) serverError(w http.ResponseWriter, r *http.Request, err error) {
	h.log.Error().Err(err).Str("path", r.URL.Path).Msg("review console: request failed")
	fail(w, r, http.StatusInternalServerError, problemf("db_down"))
}

func (h *handler) render(w http.ResponseWriter, status int, name string, data any) {
	var buf bytes.Buffer
	if err := pages.ExecuteTemplate(&buf, name, data); err != nil {
		h.log.Error().Err(err).Str("template", name).Msg("review console: render failed")
		l := "en"
		if pg, ok := data.(interface{ language() string }); ok {
			l = pg.language()
		}
		http.Error(w, fmt.Sprintf(text(l, "http.500"), text(l, "render_failed")), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes()) //nolint:errcheck // the client went away
}

var pages = template.Must(template.New("console").Funcs(template.FuncMap{
	// statusOf pairs a status with the page, for the "status" badge.
	"statusOf": func(p any, s reconcile.ReviewStatus) any {
		return struct {
			P interface{ N(any) string }
			S reconcile.ReviewStatus
		}{p.(interface{ N(any) string }), s}
	},
	// yp compares nullable amounts by value in templates.
	"yp": yuanPtr,
	// proposals is one table of the approval queue.
	"proposals": func(p approvalsPage, fs []reconcile.Finding, id string) proposalTable {
		return proposalTable{P: p, Findings: fs, ID: id}
	},
}).Parse(pageTemplates))

func jsonIndent(buf *bytes.Buffer, raw []byte) error { return json.Indent(buf, raw, "", "  ") }
