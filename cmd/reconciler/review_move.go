package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"

	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/render"
	"github.com/payrecon/payrecon/repo"
)

// exitStale is a review move refused because the finding's evidence changed since the
// version the reviewer named: look again, then retry. Distinct from 1 so a script can tell
// "read it again" from "it failed".
const exitStale = 4

// moveUsage is each move command's synopsis and what it does.
var moveUsage = map[string][2]string{
	"ack": {"reconciler mismatches ack ID --by NAME [--note TEXT] [--version V]",
		"Acknowledges an OPEN finding (OPEN -> ACKNOWLEDGED)."},
	"resolve": {"reconciler mismatches resolve ID --by NAME --resolution R [--note TEXT] [--version V]",
		"Resolves an OPEN or ACKNOWLEDGED finding. accepted and false_positive resolve it (-> RESOLVED);\n" +
			"refunded, adjusted and written_off move money and wait for a second person (-> PENDING_APPROVAL).\n" +
			"A resolved finding reopens by itself if a later pass sees different evidence."},
	"approve": {"reconciler mismatches approve ID --by NAME [--note TEXT] [--version V]",
		"Approves a PENDING_APPROVAL resolution (-> RESOLVED). Its proposer cannot approve it (exit 2)."},
	"reject": {"reconciler mismatches reject ID --by NAME --note TEXT",
		"Turns down a PENDING_APPROVAL resolution (-> ACKNOWLEDGED); the note tells the proposer why."},
}

type moveOptions struct {
	by, note, resolution string
	version              int64
}

// reviewMove is `mismatches ack|resolve|approve|reject`.
func reviewMove(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	var o moveOptions
	cfg, fs, err := parseWithID("mismatches "+name, args, stderr, func(fs *flag.FlagSet) {
		u := moveUsage[name]
		setReviewUsage(fs, u[0], u[1]+"\nThe audit trail records who (--by and the operating-system user), when, the evidence version and the note.")
		if name == "resolve" {
			fs.StringVar(&o.resolution, "resolution", "", "refunded, adjusted, written_off, accepted or false_positive (required)")
		}
		if name != "reject" {
			fs.Int64Var(&o.version, "version", 0, "the evidence version you read (mismatches show); a changed finding is refused (exit 4)")
		}
		fs.StringVar(&o.by, "by", "", "reviewer's name (required; also RECONCILER_REVIEWER)")
		fs.StringVar(&o.note, "note", "", "note to keep with the finding and the audit row")
	})
	if err != nil {
		return err
	}
	id, err := findingID(name, fs.Args())
	if err != nil {
		return err
	}
	in, err := o.input(name)
	if err != nil {
		return err
	}
	rv, done, err := openReview(ctx, cfg)
	if err != nil {
		return err
	}
	defer done()
	moves := map[string]func(context.Context, int64, repo.ReviewInput) (repo.ReviewMove, error){
		"ack": rv.Acknowledge, "resolve": rv.Resolve, "approve": rv.Approve, "reject": rv.Reject,
	}
	mv, err := moves[name](ctx, id, in)
	if err != nil {
		return moveError(name, id, err)
	}
	log := newLogger(cfg, stderr)
	log.Info().Int64("mismatch_id", id).Str("action", mv.Audit.Action).Str("actor", mv.Audit.Actor).
		Str("os_user", mv.Audit.OSUser).Str("from", mv.Audit.FromStatus).Str("to", mv.Audit.ToStatus).
		Int64("evidence_version", mv.Finding.EvidenceVersion).Msg("finding reviewed")
	fmt.Fprintf(stdout, "mismatch %d: %s -> %s by %s (%s, evidence version %d)\n", id, mv.Audit.FromStatus,
		mv.Audit.ToStatus, render.TermCell(mv.Audit.Actor), mv.Audit.Action, mv.Finding.EvidenceVersion)
	if mv.Finding.ReviewStatus == reconcile.ReviewPendingApproval {
		fmt.Fprintf(stdout, "waiting for a second person: reconciler mismatches approve %d --by NAME\n", id)
	}
	return nil
}

// input validates the flags into a repo.ReviewInput with the operating-system user.
func (o moveOptions) input(name string) (repo.ReviewInput, error) {
	by := strings.TrimSpace(o.by)
	if by == "" {
		by = strings.TrimSpace(os.Getenv("RECONCILER_REVIEWER"))
	}
	if by == "" {
		return repo.ReviewInput{}, usagef("mismatches %s: --by is required: name the reviewer (or set RECONCILER_REVIEWER)", name)
	}
	in := repo.ReviewInput{By: by, OSUser: osUser(), Version: o.version, Note: o.note}
	if o.version < 0 {
		return in, usagef("mismatches %s: --version must be a positive evidence version, got %d", name, o.version)
	}
	switch name {
	case "resolve":
		if strings.TrimSpace(o.resolution) == "" {
			return in, usagef("mismatches resolve: --resolution is required: one of refunded, adjusted, written_off, accepted, false_positive")
		}
		r, err := reconcile.ParseResolution(o.resolution)
		if err != nil {
			return in, usagef("mismatches resolve: --resolution: %v", err)
		}
		in.Resolution = r
	case "reject":
		if strings.TrimSpace(o.note) == "" {
			return in, usagef("mismatches reject: --note is required: say why the proposal is turned down")
		}
	}
	return in, nil
}

// osUser is the operating-system account running the CLI, recorded beside --by: the name a
// reviewer types is a claim, the account is what the machine knows.
func osUser() string {
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

// moveError maps the review rules' refusals to exit codes and messages for people.
func moveError(name string, id int64, err error) error {
	var te *reconcile.ReviewTransitionError
	switch {
	case errors.Is(err, reconcile.ErrNotFound):
		return fmt.Errorf("mismatches %s: no finding with id %d", name, id)
	case errors.Is(err, reconcile.ErrStaleEvidence):
		return &exitError{code: exitStale, err: fmt.Errorf("mismatches %s: %w; run: reconciler mismatches show %d", name, err, id)}
	case errors.Is(err, reconcile.ErrSelfApproval), errors.Is(err, reconcile.ErrBadReview):
		return usagef("mismatches %s: %v", name, err)
	case errors.As(err, &te):
		return fmt.Errorf("mismatches %s: %w; see who moved it: reconciler mismatches show %d", name, err, id)
	}
	return err
}
