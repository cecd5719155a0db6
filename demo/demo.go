// Package demo tells payrecon's whole story on one machine: a fresh database, the platform
// sandbox in-process, a realistic mix of orders and refunds, a pass racing a storm of
// duplicate callbacks, a backfill, the before/after table, the findings for finance, the
// fulfilment hand-off, the next morning's bills and where each refund ended. It goes through
// the adapters and worker like every command does.
package demo

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/render"
	"github.com/payrecon/payrecon/repo/postgres"
	"github.com/payrecon/payrecon/sandbox"
	"github.com/payrecon/payrecon/worker"
)

// demoOrder is one seeded order: what the merchant's database says, and what the platform
// knows.
type demoOrder struct {
	story      string
	platform   reconcile.Platform
	otn        string
	amount     int64
	local      reconcile.Status
	createdAgo time.Duration
	platformSc sandbox.Scenario
	callback   bool   // delivered by the callback storm during the pass
	second     bool   // belongs to the platform's second account (the other credential mode)
	sub        string // belongs to a service provider's sub-merchant (its id), reached through the provider
}

func demoOrders() []demoOrder {
	var out []demoOrder
	add := func(n int, story string, p reconcile.Platform, amount int64, local reconcile.Status, ago time.Duration, sc sandbox.Scenario, cb bool) {
		for i := 1; i <= n; i++ {
			prefix := map[reconcile.Platform]string{reconcile.Alipay: "A", reconcile.WechatPay: "W"}[p]
			out = append(out, demoOrder{story: story, platform: p, otn: fmt.Sprintf("%s-%s-%d", prefix, strings.ReplaceAll(story, " ", "-"), i),
				amount: amount + int64(i), local: local, createdAgo: ago, platformSc: sc, callback: cb, second: i%2 == 0})
		}
	}
	paid := sandbox.Scenario{State: sandbox.StatePaid}
	add(3, "missed callback", reconcile.Alipay, 8800, reconcile.StatusPending, 20*time.Minute, paid, false)
	add(3, "missed callback", reconcile.WechatPay, 4900, reconcile.StatusPending, 25*time.Minute, paid, false)
	add(2, "never paid", reconcile.Alipay, 1200, reconcile.StatusPending, 3*time.Hour, sandbox.Scenario{State: sandbox.StateNotFound}, false)
	add(2, "abandoned open", reconcile.WechatPay, 2500, reconcile.StatusPending, 3*time.Hour, sandbox.Scenario{State: sandbox.StateOpen}, false)
	add(1, "abandoned open", reconcile.Alipay, 3300, reconcile.StatusPending, 4*time.Hour, sandbox.Scenario{State: sandbox.StateOpen}, false)
	add(3, "still open", reconcile.Alipay, 6600, reconcile.StatusPending, 15*time.Minute, sandbox.Scenario{State: sandbox.StateOpen}, false)
	add(1, "amount mismatch", reconcile.Alipay, 9900, reconcile.StatusPending, 30*time.Minute, paid, false)
	add(1, "amount mismatch", reconcile.WechatPay, 19900, reconcile.StatusPending, 30*time.Minute, paid, false)
	add(1, "paid after close", reconcile.Alipay, 5000, reconcile.StatusClosed, 5*time.Hour, paid, true)
	add(4, "callback storm", reconcile.Alipay, 1000, reconcile.StatusPending, 10*time.Minute, paid, true)
	add(4, "callback storm", reconcile.WechatPay, 2000, reconcile.StatusPending, 10*time.Minute, paid, true)
	add(1, "refunded at platform", reconcile.WechatPay, 7700, reconcile.StatusPaid, 6*time.Hour, sandbox.Scenario{State: sandbox.StateRefunded}, false)
	add(1, storyBillOnly, reconcile.Alipay, 6800, reconcile.StatusPending, 40*time.Minute, sandbox.Scenario{State: sandbox.StatePaid, Fault: &billOnlyFault}, false)
	// A merchant reached through a service provider: the provider's app (Alipay) or partner
	// API (WeChat Pay) is asked for the sub-merchant's order.
	for _, p := range []reconcile.Platform{reconcile.Alipay, reconcile.WechatPay} {
		add(1, "via provider", p, 3600, reconcile.StatusPending, 20*time.Minute, paid, false)
		out[len(out)-1].sub = sandbox.ProviderSubMerchants[p][0]
	}
	return append(out, refundOrders()...)
}

// Options are the demo's servers: PostgreSQL to create its database on, Redis for claims
// (empty: database-only) and NATS for the hand-off (none answering: that step is skipped).
type Options struct {
	AdminDatabaseURL string
	RedisURL         string
	NATSURL          string
	// Keep keeps the demo database afterwards (its name is printed).
	Keep bool
	Log  zerolog.Logger
}

// Run tells the whole story: a fresh database, the sandbox in-process, a realistic mix of
// orders, a pass racing a storm of duplicate callbacks, a backfill, and what finance must
// review.
func Run(ctx context.Context, opts Options, stdout io.Writer) error {
	log := opts.Log
	say := func(format string, a ...any) { fmt.Fprintf(stdout, format+"\n", a...) }

	dbName := fmt.Sprintf("payrecon_demo_%d", time.Now().Unix())
	dbURL, drop, err := postgres.CreateDatabase(ctx, opts.AdminDatabaseURL, dbName)
	if err != nil {
		return fmt.Errorf("demo database (`make demo` starts PostgreSQL when none answers): %w", err)
	}
	if opts.Keep {
		defer say("\nkept database %s (%s)", dbName, config.RedactURL(dbURL))
	} else {
		defer drop()
	}
	say("== payrecon demo ==\n\n1. database %s created and migrated", dbName)

	keysDir, err := os.MkdirTemp("", "payrecon-demo-keys-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(keysDir)
	sb, accountsFile, stopSandbox, err := startDemoSandbox(keysDir, log, say)
	if err != nil {
		return err
	}
	defer stopSandbox()
	env := map[string]string{"RECONCILER_DATABASE_URL": dbURL, "RECONCILER_REDIS_URL": opts.RedisURL,
		"RECONCILER_CLAIM_PREFIX": "demo:" + dbName + ":pay:notify:", "RECONCILER_RATE_PREFIX": "demo:" + dbName + ":rate:",
		"RECONCILER_CONCURRENCY": "8", "RECONCILER_NOTIFY_WAIT": "1s"}
	cfg, err := demoConfig(env, accountsFile)
	if err != nil {
		return err
	}
	a, err := worker.New(ctx, cfg, log, true)
	if err != nil {
		return err
	}
	defer a.Close()
	notifyURL, stopServe, err := serveLoopback(a.CallbackMux())
	if err != nil {
		return err
	}
	defer stopServe()
	say("3. reconciler callback endpoints on %s/notify/{alipay,wechatpay}", notifyURL)
	return demoStory(ctx, stdout, a, cfg, sb, notifyURL, opts.NATSURL, log)
}

// startDemoSandbox runs the platform sandbox in-process on a loopback port, with fresh keys
// written to keysDir where a reconciler reads them, and returns its accounts file.
func startDemoSandbox(keysDir string, log zerolog.Logger, say func(string, ...any)) (*sandbox.Sandbox, string, func(), error) {
	keys, err := sandbox.GenerateKeys(0)
	if err != nil {
		return nil, "", nil, err
	}
	second, err := sandbox.SecondAccounts(0)
	if err != nil {
		return nil, "", nil, err
	}
	providers, err := sandbox.ProviderAccounts(0)
	if err != nil {
		return nil, "", nil, err
	}
	sb, err := sandbox.New(sandbox.Options{Keys: keys, Logger: log, Accounts: second.Join(providers)})
	if err != nil {
		return nil, "", nil, err
	}
	sbURL, stopServe, err := serveLoopback(sb)
	if err != nil {
		sb.Close()
		return nil, "", nil, err
	}
	stop := func() { stopServe(); sb.Close() }
	accountsFile, err := sb.WriteAccountsFile(keysDir, sbURL, 50)
	if err != nil {
		stop()
		return nil, "", nil, err
	}
	id := sb.Identity()
	say("2. platform sandbox (Alipay + WeChat Pay v3, real signatures) on %s, two accounts per platform:\n"+
		"   alipay    %s (public key), %s (certificate mode: app_cert_sn, alipay_root_cert_sn)\n"+
		"   wechatpay %s (WeChat Pay public key), %s (platform certificates from /v3/certificates)\n"+
		"   and a service provider per platform calling for two sub-merchants each:\n"+
		"   alipay    third-party app %s for %s (app_auth_token)\n"+
		"   wechatpay sp_mchid %s for %s (partner APIs)",
		sbURL, id.AlipayAppID, sandbox.SecondAlipayAppID, id.WechatMchID, sandbox.SecondWechatMchID,
		sandbox.ProviderAlipayAppID, strings.Join(sandbox.ProviderSubMerchants[reconcile.Alipay], ", "),
		sandbox.ProviderWechatMchID, strings.Join(sandbox.ProviderSubMerchants[reconcile.WechatPay], ", "))
	return sb, accountsFile, stop, nil
}

// demoConfig loads the reconciler's configuration exactly as in production: RECONCILER_*
// settings (env) and the accounts file.
func demoConfig(env map[string]string, accountsFile string) (config.Config, error) {
	for _, kv := range sandbox.AccountsEnv(accountsFile) {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	cfgFS := flag.NewFlagSet("demo-config", flag.ContinueOnError)
	loader := config.Register(cfgFS, config.GroupAll, func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	cfgFS.Parse(nil) //nolint:errcheck // no arguments
	cfg, err := loader.Load()
	if err != nil {
		return config.Config{}, fmt.Errorf("demo configuration: %w", err)
	}
	return cfg, nil
}

// demoStory seeds the mix, lands the refund callbacks, races a pass against a callback
// storm, backfills, and shows what changed, what finance must review, what the relay hands
// to fulfilment and what the next morning's bills add; then where each refund stands.
func demoStory(ctx context.Context, stdout io.Writer, a *worker.App, cfg config.Config, sb *sandbox.Sandbox, notifyURL, natsURL string, log zerolog.Logger) error {
	say := func(format string, a ...any) { fmt.Fprintf(stdout, format+"\n", a...) }
	orders := demoOrders()
	if err := seedDemo(ctx, a.Store(), sb, orders); err != nil {
		return err
	}
	say("4. seeded %d orders (%s)", len(orders), storySummary(orders))
	before, err := a.Store().OrderTrails(ctx)
	if err != nil {
		return err
	}
	refunds := demoRefunds()
	refundsBefore, err := startRefunds(ctx, stdout, a.Store(), sb, orders, refunds, notifyURL)
	if err != nil {
		return err
	}
	deliveries, err := callbackStorm(ctx, sb, orders, notifyURL)
	if err != nil {
		return err
	}
	say("5. reconciliation pass (reconciler run), racing %d duplicate callbacks:", 6*(countCallbacks(orders)+1))
	run, err := a.Runner(a.Metrics()).Pass(ctx, reconcile.PassSpec{Mode: reconcile.ModeOnce, Shard: cfg.Shard})
	if err != nil {
		return fmt.Errorf("demo pass: %w", err)
	}
	acked, err := countAcked(ctx, deliveries)
	if err != nil {
		return err
	}
	render.RunSummary(stdout, run)
	say("   callbacks acknowledged: %d (every copy; each payment applied once)\n", acked)

	// An operator's backfill over the last day finds what a pass over PENDING orders cannot.
	now := time.Now()
	bf, err := a.Runner(a.Metrics()).Pass(ctx, reconcile.PassSpec{Mode: reconcile.ModeBackfill, Shard: cfg.Shard, From: now.Add(-24 * time.Hour), To: now})
	if err != nil {
		return fmt.Errorf("demo backfill: %w", err)
	}
	say("6. backfill of the last 24h (reconciler backfill --from ... --to ...):")
	render.RunSummary(stdout, bf)

	after, err := a.Store().OrderTrails(ctx)
	if err != nil {
		return err
	}
	printBeforeAfter(stdout, sb, orders, before, after)
	review := postgres.NewReview(a.Store().DB())
	if err := printFindings(ctx, stdout, review); err != nil {
		return err
	}
	if err := demoAcceptPayment(ctx, stdout, review); err != nil {
		return err
	}
	if err := demoRelay(ctx, stdout, cfg, a.Store(), natsURL, log); err != nil {
		return err
	}
	if err := demoStatement(ctx, stdout, a, cfg, sb, orders); err != nil {
		return err
	}
	// Last, so that each refund shows where every source left it, the bill included.
	if err := printRefunds(ctx, stdout, a.Store(), sb, orders, refunds, refundsBefore); err != nil {
		return err
	}
	say(demoNextSteps)
	return nil
}

// callbackStorm delivers every callback of the mix six times, shuffled, plus a payment for an
// order this merchant never created; the pass runs while they arrive.
func callbackStorm(ctx context.Context, sb *sandbox.Sandbox, orders []demoOrder, notifyURL string) ([]*sandbox.Delivery, error) {
	var deliveries []*sandbox.Delivery
	for _, p := range reconcile.Platforms() {
		var cbs []sandbox.Callback
		for _, o := range orders {
			if o.callback && o.platform == p {
				cbs = append(cbs, sandbox.Callback{Platform: p, OutTradeNo: o.otn})
			}
		}
		if p == reconcile.Alipay {
			sb.SetScenario(p, "A-unknown-1", sandbox.Scenario{State: sandbox.StatePaid, AmountMinor: 4200})
			cbs = append(cbs, sandbox.Callback{Platform: p, OutTradeNo: "A-unknown-1"})
		}
		d, err := sb.Deliver(ctx, sandbox.DeliveryOptions{URL: notifyURL + "/notify/" + string(p), Copies: 6, Shuffle: true, TimeScale: 1000}, cbs...)
		if err != nil {
			return nil, fmt.Errorf("callback storm: %w", err)
		}
		deliveries = append(deliveries, d)
	}
	return deliveries, nil
}

// countAcked waits for every delivery and counts the copies the reconciler acknowledged.
func countAcked(ctx context.Context, deliveries []*sandbox.Delivery) (int, error) {
	acked := 0
	for _, d := range deliveries {
		res, err := d.Wait(ctx)
		if err != nil {
			return 0, err
		}
		for _, r := range res {
			if r.Acked {
				acked++
			}
		}
	}
	return acked, nil
}

func printBeforeAfter(w io.Writer, sb *sandbox.Sandbox, orders []demoOrder, before, after map[string]postgres.OrderTrail) {
	fmt.Fprintln(w, "\n7. before -> after")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  order\taccount\tstory\tplatform says\tbefore\tafter\tchanged\tevents\toutbox")
	for _, o := range orders {
		st := after[o.otn]
		mark := ""
		if st.Status != before[o.otn].Status {
			mark = "*"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\n", o.otn, o.merchant(sb), o.story, o.platformSc.State, before[o.otn].Status, st.Status, mark, st.Events, st.Outbox)
	}
	tw.Flush()
}

const demoNextSteps = `
12. run it for real
   reconciler migrate                         # once per database, safe to repeat
   reconciler run                             # the CronJob: one pass, exit 0/1/2/3
   reconciler serve --schedule "@every 5m"    # callbacks + scheduled passes
   reconciler relay --follow                  # the outbox to NATS JetStream (or serve --relay)
   reconciler backfill --from 2026-11-28 --to 2026-11-29
   reconciler statement                       # the CronJob at 10:30 China time: yesterday's bills
   reconciler mismatches list                 # finance review; ack / resolve with --by
   reconciler console                         # finance's review in the browser: :9090/review/, behind a sign-in proxy
   reconciler report --format html --out report.html
   List your accounts (app ids, mchids, key files, QPS) in RECONCILER_ACCOUNTS_FILE; every
   process calling for an account shares its QPS through Redis. See README.md and
   deploy/kubernetes/.`

func countCallbacks(orders []demoOrder) int {
	n := 0
	for _, o := range orders {
		if o.callback {
			n++
		}
	}
	return n
}

func storySummary(orders []demoOrder) string {
	counts := map[string]int{}
	var names []string
	for _, o := range orders {
		if counts[o.story] == 0 {
			names = append(names, o.story)
		}
		counts[o.story]++
	}
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = fmt.Sprintf("%d %s", counts[n], n)
	}
	return strings.Join(parts, ", ")
}

// serveLoopback serves h on a free loopback port.
func serveLoopback(h http.Handler) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(ln) //nolint:errcheck // ends with Shutdown
	return "http://" + ln.Addr().String(), func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx) //nolint:errcheck
	}, nil
}

// merchant is the account the order belongs to.
func (o demoOrder) merchant(sb *sandbox.Sandbox) string {
	id := sb.Identity()
	switch {
	case o.sub != "":
		return o.sub
	case o.platform == reconcile.Alipay && o.second:
		return sandbox.SecondAlipayAppID
	case o.platform == reconcile.Alipay:
		return id.AlipayAppID
	case o.second:
		return sandbox.SecondWechatMchID
	}
	return id.WechatMchID
}

func seedDemo(ctx context.Context, store *postgres.Store, sb *sandbox.Sandbox, orders []demoOrder) error {
	now := time.Now()
	for _, o := range orders {
		merchant := o.merchant(sb)
		sc := o.platformSc
		sc.MerchantID = merchant
		sc.AmountMinor = o.amount
		if o.story == "amount mismatch" {
			sc.AmountMinor = o.amount - 100 // the buyer paid one yuan less
		}
		sb.SetScenario(o.platform, o.otn, sc)
		order := reconcile.Order{Platform: o.platform, MerchantID: merchant, OutTradeNo: o.otn, AmountMinor: o.amount,
			Status: o.local, CreatedAt: now.Add(-o.createdAgo)}
		if o.local == reconcile.StatusPaid {
			order.PlatformTradeNo, order.PaidAmountMinor = sb.Scenario(o.platform, o.otn).TradeNo, o.amount
		}
		if _, err := store.InsertOrder(ctx, order); err != nil {
			return fmt.Errorf("seed: %w", err)
		}
	}
	return nil
}

// demoAcceptPayment settles the short payment as a merchant who keeps it would: one person
// proposes accept_payment, a second approves, and the order is PAID by the database's
// approval (its payment event and outbox row are relayed in the next step).
func demoAcceptPayment(ctx context.Context, w io.Writer, review *postgres.Review) error {
	// The WeChat Pay one, whichever finding id the race of step 5 gave it: the bill step
	// below counts on which account's line it is.
	short, err := review.List(ctx, reconcile.FindingFilter{Kind: reconcile.MismatchAmount, Platform: reconcile.WechatPay,
		Statuses: []reconcile.ReviewStatus{reconcile.ReviewOpen}, Limit: 1})
	if err != nil || len(short) == 0 {
		return err
	}
	f := short[0]
	const maker, checker = "ann@example.com", "cfo@example.com"
	if _, err := review.Resolve(ctx, f.ID, reconcile.ReviewInput{By: maker, Resolution: reconcile.ResolutionAcceptPayment,
		Note: "the merchant keeps the payment one yuan short", Version: f.EvidenceVersion}); err != nil {
		return fmt.Errorf("demo accept_payment: %w", err)
	}
	mv, err := review.Approve(ctx, f.ID, reconcile.ReviewInput{By: checker})
	if err != nil {
		return fmt.Errorf("demo accept_payment: %w", err)
	}
	fmt.Fprintf(w, "   finance takes the short payment of %s in (accept_payment): %s proposes, %s approves;\n"+
		"   the approval made the order PAID with %s yuan, one payment event (source review) and one order.paid outbox row\n",
		mv.Finding.OutTradeNo, maker, checker, reconcile.FormatYuanOr(mv.Finding.PlatformAmountMinor, "-"))
	return nil
}

func printFindings(ctx context.Context, w io.Writer, review *postgres.Review) error {
	findings, err := review.List(ctx, reconcile.FindingFilter{
		Statuses: []reconcile.ReviewStatus{reconcile.ReviewOpen, reconcile.ReviewAcknowledged}, Limit: 1000})
	if err != nil {
		return err
	}
	sort.SliceStable(findings, func(i, j int) bool { return findings[i].Kind < findings[j].Kind })
	fmt.Fprintf(w, "\n8. for finance to review (%d open findings; reconciler mismatches list / show / ack / resolve)\n", len(findings))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  id\tkind\tplatform\torder\trefund\tlocal\tplatform\tseen")
	withStatus := func(amount *int64, status string) string {
		return strings.TrimSpace(reconcile.FormatYuanOr(amount, "-") + " " + status)
	}
	for _, f := range findings {
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\n", f.ID, f.Kind, f.Platform, f.OutTradeNo, render.TermCell(f.OutRefundNo),
			withStatus(f.LocalAmountMinor, f.LocalStatus), withStatus(f.PlatformAmountMinor, f.PlatformStatus), f.SeenCount)
	}
	return tw.Flush()
}
