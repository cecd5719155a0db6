package console

import (
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"strings"

	"github.com/payrecon/payrecon/reconcile"
)

// bulkWorkers is how many moves of a batch go at once: the database does each in a few
// milliseconds, and the console shares it with the workers.
const bulkWorkers = 4

// bulkRequest is a bulk form as posted: one move, one note, over the selected findings or
// every finding the list's filter matches.
type bulkRequest struct {
	Action     string
	Resolution reconcile.Resolution
	Note       string
	Filter     string // the list's query string, to go back to it or to take all it matches
	Items      []reconcile.BatchItem
}

// bulkPage is the confirmation of a move over all that matches, or what a batch did.
type bulkPage struct {
	page
	Req     bulkRequest
	Confirm bool  // the count of all that matches, to confirm
	Total   int64 // matches (confirmation)
	Moved   []reconcile.ReviewMove
	Refused []bulkRefusal
}

type bulkRefusal struct {
	ID     int64
	Reason string
}

// Back is the list the bulk form came from.
func (p bulkPage) Back() template.URL { return template.URL("/review/?" + p.Req.Filter) } //nolint:gosec // re-encoded below

// Sel is an item as the form carries it.
func (p bulkPage) Sel(b reconcile.BatchItem) string { return b.String() }

// bulk takes a bulk form: the selected findings are moved at once, each its own move; "all
// matching" first shows how many the filter matches now and asks to confirm, carrying each
// finding's evidence version as read then, so that one changed meanwhile is refused alone.
func (h *handler) bulk(w http.ResponseWriter, r *http.Request) {
	p := bulkPage{page: h.newPage(r)}
	v := p.Viewer
	if !h.readForm(w, r, v, 256<<10) { // 1,000 findings' "id.version" and the rest
		return
	}
	req, err := h.readBulk(r, v)
	p.Req = req
	var forbidden *bulkForbidden
	switch {
	case errors.As(err, &forbidden):
		h.log.Warn().Str("person", v.Email).Str("action", req.Action).Msg("review console: bulk approval by a non-approver refused")
		fail(w, r, http.StatusForbidden, problemf("forbidden_approve"))
		return
	case err != nil:
		p.Error = incomplete(asProblem(err)).in(p.Lang)
		h.render(w, http.StatusBadRequest, "bulk", p)
		return
	}
	if r.PostFormValue("scope") == "all" {
		h.confirmAll(w, r, p)
		return
	}
	if len(req.Items) == 0 {
		p.Error = text(p.Lang, "bulk_none")
		h.render(w, http.StatusBadRequest, "bulk", p)
		return
	}
	res, err := reconcile.MoveBatch(r.Context(), moveOf(h.store, req.Action), req.Items,
		reconcile.ReviewInput{By: v.Email, Note: req.Note, Resolution: req.Resolution}, bulkWorkers)
	p.Moved = res.Moved
	in := reconcile.ReviewInput{Note: req.Note, Resolution: req.Resolution}
	for _, rf := range res.Refused {
		p.Refused = append(p.Refused, bulkRefusal{ID: rf.ID, Reason: refusalText(p.Lang, req.Action, in, rf.Err)})
	}
	h.log.Info().Str("person", v.Email).Str("action", req.Action).Int("moved", len(res.Moved)).Int("refused", len(res.Refused)).
		AnErr("stopped_by", err).Msg("review console: bulk move")
	if err != nil {
		p.Error = text(p.Lang, "bulk_stopped")
	}
	h.render(w, http.StatusOK, "bulk", p)
}

// bulkForbidden is an approval or rejection asked of a batch by someone who is no approver.
type bulkForbidden struct{}

func (*bulkForbidden) Error() string { return "approvers only" }

// readBulk reads the form's move; what is missing or does not read is a problem the page
// shows in the person's language.
func (h *handler) readBulk(r *http.Request, v viewer) (bulkRequest, error) {
	req := bulkRequest{Action: r.PostFormValue("action"), Note: strings.TrimSpace(r.PostFormValue("note"))}
	if vals, err := url.ParseQuery(r.PostFormValue("filter")); err == nil {
		req.Filter = vals.Encode()
	}
	for _, s := range r.PostForm["sel"] {
		it, err := reconcile.ParseBatchItem(s)
		if err != nil {
			return req, problemf("want_selection", s)
		}
		req.Items = append(req.Items, it)
	}
	switch {
	case moveOf(h.store, req.Action) == nil:
		return req, problemf("bulk_choose")
	case (req.Action == "approve" || req.Action == "reject") && !v.CanApprove():
		return req, &bulkForbidden{}
	case req.Action == "reject" && req.Note == "":
		return req, problemf("bulk_reject_note")
	case req.Action == "resolve":
		res, err := reconcile.ParseResolution(r.PostFormValue("resolution"))
		if err != nil {
			return req, problemf("bulk_resolution")
		}
		req.Resolution = res
	}
	return req, nil
}

// confirmAll shows how many findings the bulk form's filter matches now, each carried with
// the version read, and asks to confirm; more than a batch takes is refused.
func (h *handler) confirmAll(w http.ResponseWriter, r *http.Request, p bulkPage) {
	vals, _ := url.ParseQuery(p.Req.Filter)
	q, f, err := h.parseListValues(vals)
	if err != nil {
		p.Error = incomplete(asProblem(err)).in(p.Lang)
		h.render(w, http.StatusBadRequest, "bulk", p)
		return
	}
	f.Sort, f.Ascending, f.Offset, f.Limit = reconcile.SortID, true, 0, reconcile.MaxBatch
	res, err := h.search(r.Context(), q, f) // the list's own search: its provider too
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	p.Total = res.Total
	if res.Total > reconcile.MaxBatch {
		p.Error = text(p.Lang, "bulk_too_many")
		h.render(w, http.StatusBadRequest, "bulk", p)
		return
	}
	p.Confirm, p.Req.Items = true, p.Req.Items[:0]
	for _, fd := range res.Findings {
		p.Req.Items = append(p.Req.Items, reconcile.BatchItem{ID: fd.ID, Version: fd.EvidenceVersion})
	}
	h.render(w, http.StatusOK, "bulk", p)
}

// refusalText is why one finding of a batch (action, asked with in) was not moved, in the
// person's language: the finding page's words for a refusal, or, for a finding the batch
// never got to (the database stopped answering), that it was not tried.
func refusalText(lang, action string, in reconcile.ReviewInput, err error) string {
	if why, _, ok := reviewRefusal(action, in, err); ok {
		return why.in(lang)
	}
	return text(lang, "bulk_stopped")
}
