package worker

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"github.com/payrecon/payrecon/config"
)

// TestKeyFileReadableByOthersIsAWarning: a secret key file others can read is named in a
// warning; one only its owner (or the process's own group) reads is not; the key itself is
// never logged.
func TestKeyFileReadableByOthersIsAWarning(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		mode os.FileMode
		warn bool
	}{{0o600, false}, {0o400, false}, {0o604, true}, {0o644, true}, {0o700, false}, {0o444, true}}
	for _, tc := range cases {
		t.Run(tc.mode.String(), func(t *testing.T) {
			path := filepath.Join(dir, "key-"+tc.mode.String())
			if err := os.WriteFile(path, []byte("TEST-ONLY-SECRET"), 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tc.mode); err != nil {
				t.Fatal(err)
			}
			var logs bytes.Buffer
			a := &App{log: zerolog.New(&logs)}
			a.warnIfExposed("private_key_file", path)
			warned := strings.Contains(logs.String(), `"level":"warn"`) && strings.Contains(logs.String(), path)
			if warned != tc.warn {
				t.Fatalf("mode %s: warned %v, want %v: %s", tc.mode, warned, tc.warn, logs.String())
			}
			if strings.Contains(logs.String(), "TEST-ONLY-SECRET") {
				t.Fatal("the key's content was logged")
			}
		})
	}
	// Group-readable: fine when the group is ours (a Secret volume's fsGroup), not otherwise.
	group := filepath.Join(dir, "group")
	os.WriteFile(group, []byte("x"), 0o640) //nolint:errcheck
	os.Chmod(group, 0o640)                  //nolint:errcheck
	if _, exposed := exposedKeyFile(group); exposed {
		t.Fatal("a 0640 file of the process's own group was seen as exposed")
	}
	if os.Getuid() == 0 {
		if err := os.Chown(group, -1, 12345); err != nil {
			t.Fatal(err)
		}
		if _, exposed := exposedKeyFile(group); !exposed {
			t.Fatal("a 0640 file of another group was not seen as exposed")
		}
	}
	// Through a symlink (how Secret volumes mount files) the target's mode counts.
	target := filepath.Join(dir, "target")
	os.WriteFile(target, []byte("x"), 0o644) //nolint:errcheck
	link := filepath.Join(dir, "link")
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
	if _, exposed := exposedKeyFile(link); !exposed {
		t.Fatal("a 0644 file behind a symlink was not seen as exposed")
	}
}

// TestTooManySubMerchantsAreRefused: while a pass runs a taking loop per account, more
// sub-merchants than MaxSubMerchants stop every worker command with a configuration error
// (exit 2) before it connects anywhere, instead of a pass whose cost grows with the file.
func TestTooManySubMerchantsAreRefused(t *testing.T) {
	var cfg config.Config
	subs := make([]config.AlipaySubMerchant, MaxSubMerchants+1)
	for i := range subs {
		subs[i] = config.AlipaySubMerchant{AuthAppID: fmt.Sprintf("2021%012d", i)}
	}
	cfg.Accounts.Alipay = []config.AlipayAccount{{AppID: "2021000000000009", SubMerchants: subs}}
	cfg.DatabaseURL = "postgres://nobody@127.0.0.1:1/none"
	_, err := New(context.Background(), cfg, zerolog.Nop(), true)
	if !config.IsConfigError(err) || !strings.Contains(err.Error(), "RECONCILER_ACCOUNTS_FILE") ||
		!strings.Contains(err.Error(), fmt.Sprintf("%d sub-merchants", MaxSubMerchants+1)) {
		t.Fatalf("New with %d sub-merchants: %v, want a configuration error naming them", MaxSubMerchants+1, err)
	}
}
