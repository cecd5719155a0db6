package input

import (
	"fmt"
	"os"
	"os/user"
	"strconv"
	"strings"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/reconcile/identity"
)

// ReviewRequest is a review move as the reviewer typed it (mismatches ack, resolve,
// approve or reject).
type ReviewRequest struct {
	By, Note, Resolution string
	Version              int64
	// Reviewers and Approvers are RECONCILER_REVIEWERS and RECONCILER_APPROVERS as config read
	// them (config.Console): the console's lists, which hold for the CLI too once either is set.
	Reviewers, Approvers []string
}

// ReviewInput checks the request for the move name into a reconcile.ReviewInput with the
// operating-system user beside the reviewer's name. The name is an address, recorded in
// identity.Normalize's spelling, so the proposer typing it another way is still the proposer.
// What is missing, does not read or is not allowed is a reconcile.InputError; a list entry
// that is no address is a *config.Error.
func ReviewInput(name string, r ReviewRequest) (reconcile.ReviewInput, error) {
	if strings.TrimSpace(r.By) == "" {
		return reconcile.ReviewInput{}, reconcile.Inputf("mismatches %s: --by is required: name the reviewer (or set RECONCILER_REVIEWER)", name)
	}
	by, err := identity.Normalize(r.By)
	if err != nil {
		return reconcile.ReviewInput{}, reconcile.Inputf("mismatches %s: --by must be the reviewer's address as the review console knows them: %v", name, err)
	}
	if err := mayMove(name, by, r.Reviewers, r.Approvers); err != nil {
		return reconcile.ReviewInput{}, err
	}
	in := reconcile.ReviewInput{By: by, OSUser: OSUser(), Version: r.Version, Note: r.Note}
	if r.Version < 0 {
		return in, reconcile.Inputf("mismatches %s: --version must be a positive evidence version, got %d", name, r.Version)
	}
	switch name {
	case "resolve":
		if strings.TrimSpace(r.Resolution) == "" {
			return in, reconcile.Inputf("mismatches resolve: --resolution is required: one of refunded, adjusted, written_off, accept_payment, accepted, false_positive")
		}
		res, err := reconcile.ParseResolution(r.Resolution)
		if err != nil {
			return in, reconcile.Inputf("mismatches resolve: --resolution: %v", err)
		}
		in.Resolution = res
		if res.NeedsNote() && strings.TrimSpace(r.Note) == "" {
			return in, reconcile.Inputf("mismatches resolve: --note is required for %s: say why", res)
		}
	case "reject":
		if strings.TrimSpace(r.Note) == "" {
			return in, reconcile.Inputf("mismatches reject: --note is required: say why the proposal is turned down")
		}
	}
	return in, nil
}

// mayMove holds the CLI to the console's lists once either is set: every move needs a
// reviewer or an approver, and approving or rejecting a proposal needs an approver when
// RECONCILER_APPROVERS is set. With neither set the CLI names whom it is told (the
// operating-system user beside it), as before the lists existed.
func mayMove(name, by string, reviewers, approvers []string) error {
	if len(reviewers) == 0 && len(approvers) == 0 {
		return nil
	}
	rev, err := identity.ParseList(reviewers)
	if err != nil {
		return &config.Error{Setting: "RECONCILER_REVIEWERS", Msg: err.Error()}
	}
	app, err := identity.ParseList(approvers)
	if err != nil {
		return &config.Error{Setting: "RECONCILER_APPROVERS", Msg: err.Error()}
	}
	// Quoted to ASCII: a look-alike letter (a Cyrillic а) shows as what it is.
	who := strconv.QuoteToASCII(by)
	if (name == "approve" || name == "reject") && len(app) > 0 {
		if !identity.Match(app, by) {
			return reconcile.Inputf("mismatches %s: --by %s is not on RECONCILER_APPROVERS: only an approver may approve or reject a proposal", name, who)
		}
		return nil
	}
	if !identity.Match(app, by) && !identity.Match(rev, by) {
		return reconcile.Inputf("mismatches %s: --by %s is on neither RECONCILER_REVIEWERS nor RECONCILER_APPROVERS", name, who)
	}
	return nil
}

// OSUser is the operating-system account running the CLI, recorded beside --by: the name a
// reviewer types is a claim, the account is what the machine knows.
func OSUser() string {
	if u, err := user.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	for _, env := range []string{"USER", "LOGNAME", "USERNAME"} {
		if v := os.Getenv(env); v != "" {
			return v
		}
	}
	return fmt.Sprintf("uid:%d", os.Getuid())
}
