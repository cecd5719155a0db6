package worker

import (
	"fmt"
	"os"
	"os/user"
	"strings"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/repo"
)

// ReviewRequest is a review move as the reviewer typed it (mismatches ack, resolve,
// approve or reject).
type ReviewRequest struct {
	By, Note, Resolution string
	Version              int64
}

// ReviewInput checks the request for the move name into a repo.ReviewInput with the
// operating-system user beside the reviewer's name. What is missing or does not read is a
// reconcile.InputError.
func ReviewInput(name string, r ReviewRequest) (repo.ReviewInput, error) {
	by := strings.TrimSpace(r.By)
	if by == "" {
		return repo.ReviewInput{}, reconcile.Inputf("mismatches %s: --by is required: name the reviewer (or set RECONCILER_REVIEWER)", name)
	}
	in := repo.ReviewInput{By: by, OSUser: OSUser(), Version: r.Version, Note: r.Note}
	if r.Version < 0 {
		return in, reconcile.Inputf("mismatches %s: --version must be a positive evidence version, got %d", name, r.Version)
	}
	switch name {
	case "resolve":
		if strings.TrimSpace(r.Resolution) == "" {
			return in, reconcile.Inputf("mismatches resolve: --resolution is required: one of refunded, adjusted, written_off, accepted, false_positive")
		}
		res, err := reconcile.ParseResolution(r.Resolution)
		if err != nil {
			return in, reconcile.Inputf("mismatches resolve: --resolution: %v", err)
		}
		in.Resolution = res
	case "reject":
		if strings.TrimSpace(r.Note) == "" {
			return in, reconcile.Inputf("mismatches reject: --note is required: say why the proposal is turned down")
		}
	}
	return in, nil
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
