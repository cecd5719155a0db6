package worker

import (
	"os"
	"slices"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/payrecon/payrecon/config"
	"github.com/payrecon/payrecon/reconcile"
)

func TestPacedEnv(t *testing.T) {
	cases := []struct {
		name    string
		environ []string
		want    []string
		changed bool
	}{
		{"no GODEBUG", []string{"HOME=/root", "RECONCILER_CONCURRENCY=8"},
			[]string{"HOME=/root", "RECONCILER_CONCURRENCY=8", "GODEBUG=" + PacedSchedtrace}, true},
		{"other settings kept", []string{"GODEBUG=http2client=0,madvdontneed=1", "HOME=/root"},
			[]string{"GODEBUG=http2client=0,madvdontneed=1," + PacedSchedtrace, "HOME=/root"}, true},
		{"empty GODEBUG", []string{"GODEBUG="}, []string{"GODEBUG=" + PacedSchedtrace}, true},
		{"already re-executed", []string{"GODEBUG=" + PacedSchedtrace}, []string{"GODEBUG=" + PacedSchedtrace}, false},
		{"turned off by the operator", []string{"GODEBUG=madvdontneed=1,schedtrace=0"}, []string{"GODEBUG=madvdontneed=1,schedtrace=0"}, false},
		{"the operator's own period", []string{"GODEBUG=schedtrace=1000"}, []string{"GODEBUG=schedtrace=1000"}, false},
		{"the first of two GODEBUGs is the runtime's", []string{"GODEBUG=madvdontneed=1", "GODEBUG=schedtrace=0"},
			[]string{"GODEBUG=madvdontneed=1," + PacedSchedtrace, "GODEBUG=schedtrace=0"}, true},
		{"a look-alike setting is not schedtrace", []string{"GODEBUG=xschedtrace=1"}, []string{"GODEBUG=xschedtrace=1," + PacedSchedtrace}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := slices.Clone(c.environ)
			got, changed := PacedEnv(in)
			if changed != c.changed || !slices.Equal(got, c.want) {
				t.Errorf("PacedEnv(%q) = %q, %v; want %q, %v", c.environ, got, changed, c.want, c.changed)
			}
			if !slices.Equal(in, c.environ) {
				t.Errorf("PacedEnv changed its argument to %q", in)
			}
		})
	}
}

func TestProcsForBudget(t *testing.T) {
	cases := []struct {
		name      string
		dueQPS    float64
		env       string
		procs     int
		want      int
		wantSetIt bool
	}{
		{"a provider at 100 calls/s", 100, "", 2, 1, true},
		{"at the limit", OneProcBudget, "", 4, 1, true},
		{"over it", OneProcBudget + 1, "", 4, 4, false},
		{"two platforms at 250 each", 500, "", 2, 2, false},
		{"the operator's GOMAXPROCS wins", 100, "2", 2, 2, false},
		{"nothing due", 0, "", 2, 2, false},
		{"one P already", 100, "", 1, 1, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, set := ProcsForBudget(c.dueQPS, c.env, c.procs)
			if got != c.want || set != c.wantSetIt {
				t.Errorf("ProcsForBudget(%g, %q, %d) = %d, %v; want %d, %v", c.dueQPS, c.env, c.procs, got, set, c.want, c.wantSetIt)
			}
		})
	}
}

// A provider's budget bounds all of its sub-merchants together: however many of them have
// work due, the pass can make no more calls than the provider's qps.
func TestDueBudgetCountsEachProviderOnce(t *testing.T) {
	accts := config.Accounts{
		Alipay: []config.AlipayAccount{
			{AppID: "2021001", QPS: 20},
			{AppID: "2021009", QPS: 50, SubMerchants: []config.AlipaySubMerchant{{AuthAppID: "2021101", QPS: 5}, {AuthAppID: "2021102"}}},
		},
		WechatPay: []config.WechatAccount{
			{MchID: "1900000001", QPS: 30},
			{SpMchID: "1900000109", QPS: 100, SubMerchants: []config.WechatSubMerchant{{SubMchID: "1800000001"}, {SubMchID: "1800000002", QPS: 10}}},
		},
	}
	budgets := callBudgets(accts)
	key := func(p reconcile.Platform, id string) reconcile.DueAccount {
		return reconcile.DueAccount{AccountKey: reconcile.AccountKey{Platform: p, MerchantID: id}, Orders: true}
	}
	cases := []struct {
		name string
		due  []reconcile.DueAccount
		want float64
	}{
		{"nothing due", nil, 0},
		{"a direct merchant", []reconcile.DueAccount{key(reconcile.WechatPay, "1900000001")}, 30},
		{"two sub-merchants of one provider", []reconcile.DueAccount{key(reconcile.WechatPay, "1800000001"), key(reconcile.WechatPay, "1800000002")}, 100},
		{"sub-merchants of both providers and a direct app", []reconcile.DueAccount{key(reconcile.Alipay, "2021101"), key(reconcile.Alipay, "2021102"),
			key(reconcile.WechatPay, "1800000002"), key(reconcile.Alipay, "2021001")}, 170},
		{"an account not configured adds nothing", []reconcile.DueAccount{key(reconcile.WechatPay, "1800009999")}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := dueBudget(budgets, c.due); got != c.want {
				t.Errorf("dueBudget = %g calls/s, want %g", got, c.want)
			}
		})
	}
}

// While stderr is set aside fd 2 is /dev/null (the runtime's early line goes nowhere), and
// putting it back makes fd 2 the same file it was.
func TestStderrSetAsideAndPutBack(t *testing.T) {
	file := func(fd int) [2]uint64 {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			t.Fatalf("fstat %d: %v", fd, err)
		}
		return [2]uint64{uint64(st.Dev), st.Ino}
	}
	var null unix.Stat_t
	if err := unix.Stat(os.DevNull, &null); err != nil {
		t.Fatal(err)
	}
	before := file(2)
	saved, err := setStderrAside()
	if err != nil {
		t.Fatal(err)
	}
	during := file(2)
	putStderrBack(saved)
	if during != [2]uint64{uint64(null.Dev), null.Ino} {
		t.Errorf("fd 2 while set aside is %v, want /dev/null", during)
	}
	if after := file(2); after != before {
		t.Errorf("fd 2 after putting it back is %v, want %v as before", after, before)
	}
	if _, err := unix.FcntlInt(uintptr(saved), unix.F_GETFD, 0); err == nil {
		t.Errorf("the saved descriptor %d is still open", saved)
	}
}
