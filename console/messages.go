package console

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/payrecon/payrecon/reconcile"
)

// problem is why a page cannot do what it was asked, in the words of render's label table:
// key names a label that is a format, args fill it. It is worded only when it is shown, in
// the reader's language, so a Chinese page never shows an English sentence; Error is the
// English wording, for the log.
type problem struct {
	key  string
	args []any // a word or a *problem is worded in the reader's language; anything else is shown as it came
}

// word is a label key given as an argument: a field's name, a resolution.
type word string

func problemf(key string, args ...any) *problem { return &problem{key: key, args: args} }

func (p *problem) Error() string { return p.in("en") }

// in is the problem worded in lang.
func (p *problem) in(lang string) string {
	args := make([]any, len(p.args))
	for i, a := range p.args {
		switch v := a.(type) {
		case word:
			args[i] = text(lang, string(v))
		case *problem:
			args[i] = v.in(lang)
		default:
			args[i] = a
		}
	}
	return fmt.Sprintf(text(lang, p.key), args...)
}

// incomplete is a form value that cannot be used, as the page's error line says it.
func incomplete(p *problem) *problem { return problemf("bad_input", p) }

// asProblem is err as a problem: itself, a period the domain refused, or, for an error the
// console has no words of its own for, one that keeps the error's text on the English page
// and says in general terms on the Chinese one that the value was not understood.
func asProblem(err error) *problem {
	var p *problem
	if errors.As(err, &p) {
		return p
	}
	if p := periodProblem(err); p != nil {
		return p
	}
	return problemf("not_understood", err.Error())
}

// periodProblem words a period the domain refused: a date that does not read, a last day
// before the first, a report longer than a report covers (nil for any other error).
func periodProblem(err error) *problem {
	var de *reconcile.DateError
	switch {
	case errors.As(err, &de) && de.Backwards:
		return problemf("period_backwards", word("field."+de.Field))
	case errors.As(err, &de):
		return problemf("want_date", word("field."+de.Field), de.Value)
	case errors.Is(err, reconcile.ErrReportPeriodEmpty):
		return problemf("period_backwards", word("field.to"))
	case errors.Is(err, reconcile.ErrReportPeriodTooLong):
		return problemf("period_max_days", word("field.to"), reconcile.MaxReportPeriodDays)
	}
	return nil
}

// reviewRefusal words the review rules' refusal of a move (action, asked with in) and the
// HTTP status the finding page answers it with; ok is false when err is no refusal (the
// database failed). The rules say which refusal it is through their sentinels; an
// incomplete request (ErrBadReview) is one of few, and the form that was sent says which:
// a resolution that needs a note, a rejection without one, a withdrawal by someone other
// than the proposer. Any other keeps the rules' own text on the English page.
func reviewRefusal(action string, in reconcile.ReviewInput, err error) (p *problem, status int, ok bool) {
	noNote := strings.TrimSpace(in.Note) == ""
	switch {
	case errors.Is(err, reconcile.ErrNotFound):
		return problemf("not_found"), http.StatusNotFound, true
	case errors.Is(err, reconcile.ErrStaleEvidence):
		return problemf("look_again"), http.StatusConflict, true
	case errors.Is(err, reconcile.ErrSelfApproval):
		return problemf("self_approval"), http.StatusForbidden, true
	case errors.Is(err, reconcile.ErrIllegalReview):
		return problemf("illegal"), http.StatusConflict, true
	case errors.Is(err, reconcile.ErrResolutionDoesNotFit):
		return problemf("does_not_fit", word(in.Resolution)), http.StatusBadRequest, true
	case !errors.Is(err, reconcile.ErrBadReview):
		return nil, 0, false
	case action == string(reconcile.ReviewResolve) && in.Resolution.NeedsNote() && noNote:
		return incomplete(problemf("needs_note", word(in.Resolution))), http.StatusBadRequest, true
	case action == string(reconcile.ReviewReject) && noNote:
		return incomplete(problemf("bulk_reject_note")), http.StatusBadRequest, true
	case action == string(reconcile.ReviewWithdraw):
		return problemf("only_proposer_withdraws"), http.StatusBadRequest, true
	}
	return problemf("bad_review", err.Error()), http.StatusBadRequest, true
}

// fail answers with a plain-text error page in the reader's language: the status and, when
// p is not nil, what went wrong (the English page reads as before: "403 forbidden: ...").
func fail(w http.ResponseWriter, r *http.Request, status int, p *problem) {
	l, key := lang(r), "http."+strconv.Itoa(status)
	msg := text(l, key)
	if p != nil {
		msg = fmt.Sprintf(msg, p.in(l))
	}
	http.Error(w, msg, status)
}

// notFound is the console's 404, in the reader's language.
func notFound(w http.ResponseWriter, r *http.Request) { fail(w, r, http.StatusNotFound, nil) }
