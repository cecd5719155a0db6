package worker

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/rs/zerolog"
	"golang.org/x/sys/unix"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/reconcile"
)

// A pass paced by its call budget sits idle between most of its round trips, and the Go
// runtime makes an idle process pay for every return from idle:
//
//   - Once every P is idle, the runtime's monitor thread (sysmon) sleeps deeply, and the next
//     system call any goroutine makes wakes it to poll every 20 µs beside the work
//     (golang/go#18236): a futex wake, short sleeps that contend with the signing threads
//     for the CPUs, a futex wait. Each answer from the platform, Redis or PostgreSQL is
//     such a return.
//   - With a second P idle, every goroutine made ready wakes another thread to look for
//     work, which finds none and parks again.
//
// Together these made a paced pass spend 1.5–1.6 times the CPU per order of an unthrottled
// one, with 29–32 context switches per order against 4–5 (make bench: PacingCPU). The
// runtime keeps sysmon out of its deep sleep while GODEBUG's schedtrace is set, and it reads
// that only as it starts, hence ExecPacedRuntime; one P is runtime.GOMAXPROCS(1), hence
// ProcsForBudget and PaceRuntime. With both, a paced pass makes about 7 switches per order
// and spends 1.1–1.3 times the unthrottled CPU, most of the rest being its RSA signatures,
// slower on a CPU that was idle.

// PacedSchedtrace is the schedtrace ExecPacedRuntime sets: the longest period GODEBUG
// takes (2^31-1 ms, 24.8 days), so the runtime's scheduler trace line practically never
// prints. The first period counts from boot, though: on a machine up longer than that, the
// runtime prints one line ("SCHED ...") to stderr as it starts, which ExecPacedRuntime
// sends to /dev/null (see stderrFDEnv).
const PacedSchedtrace = "schedtrace=2147483647"

// stderrFDEnv names the descriptor on which ExecPacedRuntime keeps the process's stderr
// while the new image's runtime starts with /dev/null as fd 2, and prints its one early
// scheduler line there rather than among the JSON log lines. RestoreStderr puts it back
// first thing in main: the runtime prints the line within microseconds of starting, long
// before the packages' initialisation ends and main begins.
const stderrFDEnv = "PAYRECON_STDERR_FD"

// ErrNoPacedRuntime wraps the reason ExecPacedRuntime could not re-execute the binary.
var ErrNoPacedRuntime = errors.New("running without the paced runtime setting (GODEBUG=" + PacedSchedtrace + ")")

// PacedEnv is environ with PacedSchedtrace added to GODEBUG, and whether it changed: not
// when GODEBUG already names schedtrace (whatever its value: schedtrace=0 is how an
// operator turns this off), nor when re-executing already happened once. Of several
// GODEBUG entries the runtime reads the first, so that is the one looked at and changed.
func PacedEnv(environ []string) ([]string, bool) {
	const key = "GODEBUG="
	at := slices.IndexFunc(environ, func(kv string) bool { return strings.HasPrefix(kv, key) })
	if at >= 0 {
		for _, setting := range strings.Split(strings.TrimPrefix(environ[at], key), ",") {
			if strings.HasPrefix(strings.TrimSpace(setting), "schedtrace=") {
				return environ, false
			}
		}
	}
	out := append([]string(nil), environ...)
	if at < 0 {
		return append(out, key+PacedSchedtrace), true
	}
	if v := strings.TrimPrefix(out[at], key); v != "" {
		out[at] = key + v + "," + PacedSchedtrace
	} else {
		out[at] = key + PacedSchedtrace
	}
	return out, true
}

// ExecPacedRuntime replaces this process with the same binary, arguments and environment
// plus GODEBUG's PacedSchedtrace (see PacedEnv), so that a paced pass does not pay for the
// monitor thread's deep sleep. It returns only when it did not: nil when the setting was
// there already, an error wrapping ErrNoPacedRuntime when the exec failed (the caller runs
// on as it is, and says so in its log). Call it first thing in main, after RestoreStderr
// and before any goroutine, file or connection of the process's own: exec keeps the
// process id and its open files.
func ExecPacedRuntime() error {
	env, changed := PacedEnv(os.Environ())
	if !changed {
		return nil
	}
	saved, err := setStderrAside()
	if err == nil {
		env = append(env, fmt.Sprintf("%s=%d", stderrFDEnv, saved))
	}
	// The running binary's own file, even if a deploy has replaced it on disk meanwhile.
	execErr := syscall.Exec("/proc/self/exe", os.Args, env)
	if err == nil {
		putStderrBack(saved) // still this image
	}
	return fmt.Errorf("%w: exec /proc/self/exe: %w", ErrNoPacedRuntime, execErr)
}

// setStderrAside keeps stderr on a descriptor of its own (dup clears close-on-exec, so a new
// image has it) and gives fd 2 /dev/null. On an error nothing has changed.
func setStderrAside() (int, error) {
	saved, err := unix.Dup(2)
	if err != nil {
		return 0, err
	}
	null, err := unix.Open(os.DevNull, unix.O_WRONLY|unix.O_CLOEXEC, 0)
	if err == nil {
		err = unix.Dup3(null, 2, 0)
		unix.Close(null) //nolint:errcheck // fd 2 holds its own reference now
	}
	if err != nil {
		unix.Close(saved) //nolint:errcheck
		return 0, err
	}
	return saved, nil
}

// putStderrBack makes fd 2 the stderr setStderrAside kept on saved, and closes saved.
func putStderrBack(saved int) {
	if unix.Dup3(saved, 2, 0) == nil {
		unix.Close(saved) //nolint:errcheck
	}
}

// RestoreStderr puts back the stderr ExecPacedRuntime set aside before it re-executed this
// binary, and forgets where it was; a no-op in a process not started that way.
func RestoreStderr() {
	v, ok := os.LookupEnv(stderrFDEnv)
	if !ok {
		return
	}
	os.Unsetenv(stderrFDEnv) //nolint:errcheck // a valid name never fails
	if fd, err := strconv.Atoi(v); err == nil && fd > 2 {
		putStderrBack(fd)
	}
}

// pacedCallCPU is a generous estimate of the worker's CPU per paced platform call: the
// RSA-2048 signature and the apply path (make bench: PacingCPU measures 1.6–2.6 ms).
const pacedCallCPU = 0.0025

// OneProcBudget is the largest call budget, in calls per second over the accounts with due
// work, that ProcsForBudget runs on one P: half a core at pacedCallCPU, so one P keeps up
// with twice the budget's pace.
const OneProcBudget = 0.5 / pacedCallCPU

// ProcsForBudget is the GOMAXPROCS for a pass whose accounts with due work allow dueQPS
// calls per second together, and whether to set it: one P when that needs at most half a
// core (OneProcBudget), where a second P would only wake threads that find no work; the
// runtime's own choice otherwise. An operator's GOMAXPROCS (environment) always wins.
func ProcsForBudget(dueQPS float64, gomaxprocsEnv string, procs int) (int, bool) {
	if gomaxprocsEnv != "" || dueQPS <= 0 || dueQPS > OneProcBudget || procs == 1 {
		return procs, false
	}
	return 1, true
}

// PaceRuntime makes every pass of the app size the scheduler to the call budgets of the
// accounts with due work (ProcsForBudget, when the pass starts its loops) and log it, with
// the process's GODEBUG (schedtrace keeps the monitor thread out of its deep sleep:
// ExecPacedRuntime) and why that is missing when the re-exec failed (execErr). For `run`
// and `backfill` only: `serve` answers callbacks, which no budget paces.
func (a *App) PaceRuntime(execErr error) {
	if execErr != nil {
		a.log.Warn().Err(execErr).Msg("a paced pass will cost more CPU per order")
	}
	a.procs = &procsForDueWork{budgets: a.owners, log: a.log}
}

// budgetOwner is the account whose qps bounds an account's calls: itself, or its service
// provider.
type budgetOwner struct {
	owner reconcile.AccountKey
	qps   float64
}

// callBudgets maps every account a pass may find due work for to its budgetOwner.
func callBudgets(accts config.Accounts) map[reconcile.AccountKey]budgetOwner {
	out := map[reconcile.AccountKey]budgetOwner{}
	for _, x := range accts.Alipay {
		app := budgetOwner{reconcile.AccountKey{Platform: reconcile.Alipay, MerchantID: x.AppID}, x.QPS}
		out[app.owner] = app
		for _, s := range x.SubMerchants {
			out[reconcile.AccountKey{Platform: reconcile.Alipay, MerchantID: s.AuthAppID}] = app
		}
	}
	for _, x := range accts.WechatPay {
		mch := budgetOwner{reconcile.AccountKey{Platform: reconcile.WechatPay, MerchantID: x.ID()}, x.QPS}
		out[mch.owner] = mch
		for _, s := range x.SubMerchants {
			out[reconcile.AccountKey{Platform: reconcile.WechatPay, MerchantID: s.SubMchID}] = mch
		}
	}
	return out
}

// procsForDueWork is the pass observer PaceRuntime adds.
type procsForDueWork struct {
	budgets map[reconcile.AccountKey]budgetOwner
	log     zerolog.Logger
}

func (*procsForDueWork) Checked(reconcile.Check) {}

// Due sets GOMAXPROCS for the pass's due accounts (dueBudget).
func (p *procsForDueWork) Due(accounts []reconcile.DueAccount) {
	qps := dueBudget(p.budgets, accounts)
	procs, set := ProcsForBudget(qps, os.Getenv("GOMAXPROCS"), runtime.GOMAXPROCS(0))
	if set {
		runtime.GOMAXPROCS(procs)
	}
	p.log.Info().Int("gomaxprocs", procs).Float64("due_budget_qps", qps).Int("due_accounts", len(accounts)).
		Str("godebug", os.Getenv("GODEBUG")).Msg("scheduler sized to the call budgets of the accounts with due work")
}

// dueBudget is how many calls per second the accounts may make together: the sum of their
// budget owners' qps, each provider's counted once however many of its sub-merchants have
// work. An account without a budget here (none is) adds nothing.
func dueBudget(budgets map[reconcile.AccountKey]budgetOwner, accounts []reconcile.DueAccount) float64 {
	owners := map[reconcile.AccountKey]bool{}
	qps := 0.0
	for _, a := range accounts {
		if b, ok := budgets[a.AccountKey]; ok && !owners[b.owner] {
			owners[b.owner] = true
			qps += b.qps
		}
	}
	return qps
}
