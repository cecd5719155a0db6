package input

import (
	"strconv"
	"strings"
	"time"

	"github.com/payrecon/payrecon/reconcile"
)

// ListQuery is `mismatches list`'s filter as typed: the flags' text before it is read.
type ListQuery struct {
	Status, Kind, Platform, Since, Until string
	Query                                string // --q: an id, or the start of an order, trade or refund number
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
	if f.Query, err = reconcile.ParseFindingQuery(q.Query); err != nil {
		return f, reconcile.Inputf("mismatches list: --q: %v", err)
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
		// The one period rule: a date --until is the last day, included.
		if f.Until, err = ParseUntil("until", q.Until, loc); err != nil {
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
		return reconcile.NeedsAction, nil
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

// FindingID reads the one positional argument of a review move: the finding's id.
func FindingID(name string, args []string) (int64, error) {
	if err := oneArgument(name, args); err != nil {
		return 0, err
	}
	id, err := strconv.ParseInt(args[0], 10, 64)
	if err != nil || id <= 0 {
		return 0, reconcile.Inputf("mismatches %s: the id must be a positive whole number, got %q", name, args[0])
	}
	return id, nil
}

// FindingRef reads show's argument: a finding's id, or the start of one of its numbers
// (our out_trade_no, the platform's trade number, the out_refund_no), as the console's
// search box takes them.
func FindingRef(name string, args []string) (string, error) {
	if err := oneArgument(name, args); err != nil {
		return "", err
	}
	ref, err := reconcile.ParseFindingQuery(args[0])
	if err == nil && ref == "" {
		err = reconcile.Inputf("it is empty")
	}
	if err != nil {
		return "", reconcile.Inputf("mismatches %s: give the finding's id or one of its numbers: %v", name, err)
	}
	return ref, nil
}

func oneArgument(name string, args []string) error {
	if len(args) > 1 {
		return reconcile.Inputf("mismatches %s: unexpected argument %q after %q", name, args[1], args[0])
	}
	if len(args) == 0 {
		return reconcile.Inputf("mismatches %s: give the finding's id, e.g. reconciler mismatches %s 42", name, name)
	}
	return nil
}
