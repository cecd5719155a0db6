package config

import (
	"strings"
	"testing"
	"time"
)

func TestRelayDefaults(t *testing.T) {
	c, err := load(GroupDatabase|GroupRelay, nil, map[string]string{"RECONCILER_DATABASE_URL": "postgres://u@h/db"})
	if err != nil {
		t.Fatal(err)
	}
	want := Relay{SubjectPrefix: "payrecon.", Batch: 1000, Window: 1024, AckTimeout: 10 * time.Second,
		Poll: 5 * time.Second, RetryHorizon: 2 * time.Minute}
	if c.Relay != want {
		t.Fatalf("relay defaults = %+v, want %+v", c.Relay, want)
	}
}

// Bad relay settings are configuration errors naming the setting (exit 2).
func TestRelaySettingsRejected(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		setting string
	}{
		{"http url", map[string]string{"RECONCILER_RELAY_URL": "http://n:4222"}, "RECONCILER_RELAY_URL"},
		{"second url bad", map[string]string{"RECONCILER_RELAY_URL": "nats://a:4222,redis://b"}, "RECONCILER_RELAY_URL"},
		{"empty prefix", map[string]string{"RECONCILER_RELAY_SUBJECT_PREFIX": ""}, "RECONCILER_RELAY_SUBJECT_PREFIX"},
		{"wildcard prefix", map[string]string{"RECONCILER_RELAY_SUBJECT_PREFIX": "pay.*."}, "RECONCILER_RELAY_SUBJECT_PREFIX"},
		{"tail wildcard prefix", map[string]string{"RECONCILER_RELAY_SUBJECT_PREFIX": "pay.>"}, "RECONCILER_RELAY_SUBJECT_PREFIX"},
		{"space in prefix", map[string]string{"RECONCILER_RELAY_SUBJECT_PREFIX": "pay ments."}, "RECONCILER_RELAY_SUBJECT_PREFIX"},
		{"empty token in prefix", map[string]string{"RECONCILER_RELAY_SUBJECT_PREFIX": "pay..x."}, "RECONCILER_RELAY_SUBJECT_PREFIX"},
		{"zero batch", map[string]string{"RECONCILER_RELAY_BATCH": "0"}, "RECONCILER_RELAY_BATCH"},
		{"huge batch", map[string]string{"RECONCILER_RELAY_BATCH": "100000"}, "RECONCILER_RELAY_BATCH"},
		{"zero window", map[string]string{"RECONCILER_RELAY_WINDOW": "0"}, "RECONCILER_RELAY_WINDOW"},
		{"zero ack timeout", map[string]string{"RECONCILER_RELAY_ACK_TIMEOUT": "0s"}, "RECONCILER_RELAY_ACK_TIMEOUT"},
		{"poll not a duration", map[string]string{"RECONCILER_RELAY_POLL": "5"}, "RECONCILER_RELAY_POLL"},
		{"horizon below ack timeout", map[string]string{"RECONCILER_RELAY_RETRY_HORIZON": "5s"}, "RECONCILER_RELAY_RETRY_HORIZON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"RECONCILER_DATABASE_URL": "postgres://u@h/db"}
			for k, v := range tc.env {
				env[k] = v
			}
			_, err := load(GroupDatabase|GroupRelay, nil, env)
			if err == nil || !IsConfigError(err) || !strings.Contains(err.Error(), tc.setting) {
				t.Fatalf("err = %v, want a configuration error naming %s", err, tc.setting)
			}
		})
	}
}

func TestRelayURLRedacted(t *testing.T) {
	c, err := load(GroupAll, nil, map[string]string{"RECONCILER_DATABASE_URL": "postgres://u@h/db",
		"RECONCILER_RELAY_URL": "nats://relay:s3cret@nats:4222,nats://relay:s3cret@nats2:4222"})
	if err != nil {
		t.Fatal(err)
	}
	if r := c.Redacted(); strings.Contains(r, "s3cret") || !strings.Contains(r, "relay-url=nats://relay:xxxxx@nats:4222,nats://relay:xxxxx@nats2:4222") {
		t.Fatalf("Redacted() = %s", r)
	}
}
