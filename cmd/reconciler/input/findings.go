package input

import (
	"strings"
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

// ListQuery is `mismatches list`'s filter as typed: the flags' text before it is read.
type ListQuery struct {
	Status, Kind, Platform, Since, Until string
	Limit                                int
	AfterID                              int64
}

// Filter reads the query into a reconcile.FindingFilter, dates in loc. No status lists what still
// needs a person (all but RESOLVED); a value that does not read is a reconcile.InputError.
func (q ListQuery) Filter(loc *time.Location) (reconcile.FindingFilter, error) {
	f := reconcile.FindingFilter{Limit: q.Limit, AfterID: q.AfterID}
	var err error
	if f.Statuses, err = q.statuses(); err != nil {
		return f, err
	}
	if q.Kind != "" {
		if f.Kind, err = reconcile.ParseMismatchKind(q.Kind); err != nil {
			return f, reconcile.Inputf("mismatches list: --kind: %v", err)
		}
	}
	if q.Platform != "" {
		if f.Platform, err = reconcile.ParsePlatform(strings.ToLower(strings.TrimSpace(q.Platform))); err != nil {
			return f, reconcile.Inputf("mismatches list: --platform: %v", err)
		}
	}
	if q.Since != "" {
		if f.Since, err = ParseWhen("since", q.Since, loc); err != nil {
			return f, err
		}
	}
	if q.Until != "" {
		if f.Until, err = ParseWhen("until", q.Until, loc); err != nil {
			return f, err
		}
	}
	if !f.Since.IsZero() && !f.Until.IsZero() && !f.Since.Before(f.Until) {
		return f, reconcile.Inputf("mismatches list: --since (%s) must be before --until (%s)", q.Since, q.Until)
	}
	if q.Limit < 1 || q.Limit > 10000 {
		return f, reconcile.Inputf("mismatches list: --limit must be from 1 to 10000, got %d", q.Limit)
	}
	if q.AfterID < 0 {
		return f, reconcile.Inputf("mismatches list: --after-id must not be negative, got %d", q.AfterID)
	}
	return f, nil
}

func (q ListQuery) statuses() ([]reconcile.ReviewStatus, error) {
	switch st := strings.TrimSpace(q.Status); {
	case st == "":
		return []reconcile.ReviewStatus{reconcile.ReviewOpen, reconcile.ReviewAcknowledged, reconcile.ReviewPendingApproval}, nil
	case strings.EqualFold(st, "all"):
		return nil, nil
	default:
		var out []reconcile.ReviewStatus
		for _, s := range strings.Split(st, ",") {
			rs, err := reconcile.ParseReviewStatus(s)
			if err != nil {
				return nil, reconcile.Inputf("mismatches list: --status must be OPEN, ACKNOWLEDGED, PENDING_APPROVAL, RESOLVED (comma-separated) or all, got %q", q.Status)
			}
			out = append(out, rs)
		}
		return out, nil
	}
}
