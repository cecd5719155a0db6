package reconcile

import "testing"

func TestTransitionsExhaustive(t *testing.T) {
	legal := map[[2]Status]bool{
		{StatusPending, StatusPaid}:   true,
		{StatusPending, StatusClosed}: true,
		{StatusPending, StatusFailed}: true,
		{StatusPaid, StatusRefunded}:  true,
	}
	for _, from := range AllStatuses {
		for _, to := range AllStatuses {
			want := legal[[2]Status{from, to}]
			if got := CanTransition(from, to); got != want {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
			}
		}
	}
	// Every target state has an event type of the same name (payment_events.event_type).
	for _, to := range []Status{StatusPaid, StatusClosed, StatusFailed, StatusRefunded} {
		if string(eventFor(to)) != string(to) {
			t.Errorf("eventFor(%s) = %s", to, eventFor(to))
		}
	}
}

func TestValidateResult(t *testing.T) {
	ok := Result{Platform: Alipay, MerchantID: "m", OutTradeNo: "o", PlatformTradeNo: "t", State: StatePaid, AmountMinor: 1, Source: SourceNotify}
	cases := []struct {
		name string
		mut  func(*Result)
		want string
	}{
		{"valid", func(*Result) {}, ""},
		{"unknown platform", func(r *Result) { r.Platform = "paypal" }, `result: unknown platform "paypal"`},
		{"no merchant", func(r *Result) { r.MerchantID = "" }, "result alipay/o: missing merchant id"},
		{"no out_trade_no", func(r *Result) { r.OutTradeNo = "" }, "result alipay/: missing out_trade_no"},
		{"no source", func(r *Result) { r.Source = "" }, "result alipay/o: missing source"},
		{"paid without trade no", func(r *Result) { r.PlatformTradeNo = "" }, "result alipay/o: missing platform trade number of a paid result"},
		{"paid without amount", func(r *Result) { r.AmountMinor = 0 }, "result alipay/o: missing amount of a paid result"},
		{"unknown state", func(r *Result) { r.State = "MAYBE" }, `result alipay/o: unknown state "MAYBE"`},
		{"open needs no trade no", func(r *Result) { r.State, r.PlatformTradeNo, r.AmountMinor = StateOpen, "", 0 }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := ok
			tc.mut(&r)
			err := validateResult(r)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Fatalf("validateResult = %q, want %q", got, tc.want)
			}
		})
	}
}
