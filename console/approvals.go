package console

import (
	"net/http"
	"strings"
	"time"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/reconcile/identity"
)

// maxApprovals is the most proposals the approval queue lists at once: a month's after an
// incident, oldest first; past it the findings list (status awaiting approval) pages them.
const maxApprovals = 500

// approvalsPage is the approval queue: every proposal awaiting a second person, what it
// proposes and how long it has waited, the viewer's own apart (they may not approve them).
type approvalsPage struct {
	page
	Now            time.Time
	Others, Mine   []reconcile.Finding
	SecondApprover bool // someone other than the viewer may approve the viewer's proposals
}

// Waiting is how long a proposal has waited ("—" when the time is not known).
func (p approvalsPage) Waiting(since *time.Time) string {
	if since == nil {
		return "—"
	}
	return age(p.Lang, p.Now.Sub(*since))
}

func (h *handler) approvals(w http.ResponseWriter, r *http.Request) {
	p := approvalsPage{page: h.newPage(r), Now: h.cfg.Now()}
	res, err := h.store.Search(r.Context(), reconcile.FindingFilter{Statuses: []reconcile.ReviewStatus{reconcile.ReviewPendingApproval},
		Sort: reconcile.SortFirstSeen, Ascending: true, Limit: maxApprovals})
	if err != nil {
		h.serverError(w, r, err)
		return
	}
	for _, f := range res.Findings {
		if strings.EqualFold(f.ProposedBy, p.Viewer.Email) {
			p.Mine = append(p.Mine, f)
		} else {
			p.Others = append(p.Others, f)
		}
	}
	p.SecondApprover = identity.AnyoneElse(h.cfg.Approvers, p.Viewer.Email)
	h.render(w, http.StatusOK, "approvals", p)
}

// proposalTable is one table of the approval queue.
type proposalTable struct {
	P interface {
		T(string) string
		N(any) string
		Yuan(int64) string
		Waiting(*time.Time) string
	}
	Findings []reconcile.Finding
	ID       string
}

// whyNot names, as label keys, why the finding page offers this person no move a reader
// would look for: a resolved finding, a proposal awaiting someone else, or their own
// proposal, with no second approver to decide it where none is configured.
func (h *handler) whyNot(f reconcile.Finding, v viewer) []string {
	switch f.ReviewStatus {
	case reconcile.ReviewResolved:
		return []string{"why_resolved"}
	case reconcile.ReviewPendingApproval:
		if strings.EqualFold(f.ProposedBy, v.Email) {
			if !identity.AnyoneElse(h.cfg.Approvers, v.Email) {
				return []string{"own_proposal", "why_no_second_approver"}
			}
			return []string{"own_proposal"}
		}
		if !v.CanApprove() {
			return []string{"why_awaiting"}
		}
	}
	return nil
}

// warnOfLoneApprovers says at start when a proposal could never be approved in the console:
// no approver at all, or one approver named by address alone (their own proposals).
func warnOfLoneApprovers(cfg Config) {
	switch {
	case len(cfg.Approvers) == 0:
		cfg.Log.Warn().Msg("review console: RECONCILER_APPROVERS is empty: no proposal (refunded, adjusted, written_off, accept_payment) can be approved here")
	case len(cfg.Approvers) == 1 && cfg.Approvers[0].Address() != "":
		cfg.Log.Warn().Msg("review console: RECONCILER_APPROVERS names one person: their own proposals can never be approved (maker-checker needs a second approver)")
	}
}
