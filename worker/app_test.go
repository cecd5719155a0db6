package worker

import (
	"bytes"
	"context"
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

// TestSubMerchantsAreRefusedUntilCalledFor: an accounts file with service providers'
// sub-merchants stops every worker command with a configuration error (exit 2) before it
// connects anywhere, instead of a run that leaves the sub-merchants' orders pending while it
// reports success.
func TestSubMerchantsAreRefusedUntilCalledFor(t *testing.T) {
	var cfg config.Config
	cfg.Accounts.Alipay = []config.AlipayAccount{{AppID: "2021000000000009",
		SubMerchants: []config.AlipaySubMerchant{{AuthAppID: "2021000000000101"}, {AuthAppID: "2021000000000102"}}}}
	cfg.DatabaseURL = "postgres://nobody@127.0.0.1:1/none"
	_, err := New(context.Background(), cfg, zerolog.Nop(), true)
	if !config.IsConfigError(err) || !strings.Contains(err.Error(), "RECONCILER_ACCOUNTS_FILE") ||
		!strings.Contains(err.Error(), "2 sub-merchants") {
		t.Fatalf("New with sub-merchants: %v, want a configuration error naming them", err)
	}
}
