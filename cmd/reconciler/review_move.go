package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/payrecon/payrecon/cmd/reconciler/input"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/render"
	"github.com/payrecon/payrecon/worker"
)

// moveUsage is each move command's synopsis and what it does.
var moveUsage = map[string][2]string{
	"ack": {"reconciler mismatches ack ID --by EMAIL [--note TEXT] [--version V]",
		"Acknowledges an OPEN finding (OPEN -> ACKNOWLEDGED)."},
	"resolve": {"reconciler mismatches resolve ID --by EMAIL --resolution R [--note TEXT] [--version V]",
		"Resolves an OPEN or ACKNOWLEDGED finding. accepted and false_positive resolve it (-> RESOLVED);\n" +
			"refunded, adjusted, written_off and accept_payment move money and wait for a second person (-> PENDING_APPROVAL);\n" +
			"an approved accept_payment (PAID_AFTER_CLOSE or AMOUNT_MISMATCH) moves the order to PAID.\n" +
			"A resolved finding reopens by itself if a later pass sees different evidence."},
	"approve": {"reconciler mismatches approve ID --by EMAIL [--note TEXT] [--version V]",
		"Approves a PENDING_APPROVAL resolution (-> RESOLVED). Its proposer cannot approve it (exit 2)."},
	"reject": {"reconciler mismatches reject ID --by EMAIL --note TEXT",
		"Turns down a PENDING_APPROVAL resolution (-> ACKNOWLEDGED); the note tells the proposer why."},
	"withdraw": {"reconciler mismatches withdraw ID --by EMAIL [--note TEXT] [--version V]",
		"Takes your own PENDING_APPROVAL proposal back (-> ACKNOWLEDGED); only its proposer may."},
}

// reviewMove is `mismatches ack|resolve|approve|reject`.
func reviewMove(ctx context.Context, name string, args []string, stdout, stderr io.Writer) error {
	var o input.ReviewRequest
	cfg, fs, err := parseWithID("mismatches "+name, moveGroups, args, stderr, func(fs *flag.FlagSet) {
		u := moveUsage[name]
		setReviewUsage(fs, u[0], u[1]+"\nThe audit trail records who (--by and the operating-system user), when, the evidence version and the note.")
		if name == "resolve" {
			fs.StringVar(&o.Resolution, "resolution", "", "refunded, adjusted, written_off, accept_payment, accepted or false_positive (required)")
		}
		if name != "reject" {
			fs.Int64Var(&o.Version, "version", 0, "the evidence version you read (mismatches show); a changed finding is refused (exit 1: evidence changed)")
		}
		fs.StringVar(&o.By, "by", "", "the reviewer's address, as the review console knows them (required; also RECONCILER_REVIEWER)")
		fs.StringVar(&o.Note, "note", "", "note to keep with the finding and the audit row")
	})
	if err != nil {
		return err
	}
	id, err := input.FindingID(name, fs.Args())
	if err != nil {
		return err
	}
	if strings.TrimSpace(o.By) == "" {
		o.By = os.Getenv("RECONCILER_REVIEWER")
	}
	o.Reviewers, o.Approvers = cfg.Console.Reviewers, cfg.Console.Approvers
	in, err := input.ReviewInput(name, o)
	if err != nil {
		return err
	}
	rv, done, err := openReview(ctx, cfg)
	if err != nil {
		return err
	}
	defer done()
	moves := map[string]func(context.Context, int64, reconcile.ReviewInput) (reconcile.ReviewMove, error){
		"ack": rv.Acknowledge, "resolve": rv.Resolve, "approve": rv.Approve, "reject": rv.Reject, "withdraw": rv.Withdraw,
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
		fmt.Fprintf(stdout, "waiting for a second person: reconciler mismatches approve %d --by EMAIL\n", id)
	}
	if _, tradeNo, ok := reconcile.TookPaymentIn(mv); ok {
		worker.MarkTakenIn(ctx, cfg, log, mv)
		fmt.Fprintf(stdout, "order %s is PAID by %s: the payment is taken in\n", render.TermCell(mv.Finding.OutTradeNo), render.TermCell(tradeNo))
	}
	return nil
}

// moveError maps the review rules' refusals to exit codes and messages for people.
func moveError(name string, id int64, err error) error {
	var te *reconcile.ReviewTransitionError
	switch {
	case errors.Is(err, reconcile.ErrNotFound):
		return fmt.Errorf("mismatches %s: no finding with id %d", name, id)
	case errors.Is(err, reconcile.ErrStaleEvidence):
		// Exit 1, as when someone else moved the finding first: the contract's codes are 0-3,
		// and the message (evidence changed, look again) tells a person what to do.
		return &exitError{code: exitFailed, err: fmt.Errorf("mismatches %s: %w; run: reconciler mismatches show %d", name, err, id)}
	case errors.Is(err, reconcile.ErrSelfApproval), errors.Is(err, reconcile.ErrBadReview):
		return usagef("mismatches %s: %v", name, err)
	case errors.As(err, &te):
		return fmt.Errorf("mismatches %s: %w; see who moved it: reconciler mismatches show %d", name, err, id)
	}
	return err
}
