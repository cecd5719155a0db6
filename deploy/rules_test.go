package deploy

import (
	"os/exec"
	"strings"
	"testing"
)

// TestAlertRules runs promtool over the alert rules: they parse (check rules) and fire when
// they should (test rules, with the scenarios in prometheus/rules_test.yaml). Without
// promtool there is no proof, so the test fails instead of skipping (make test-deps
// installs it).
func TestAlertRules(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not on PATH: run make test-deps, or apt-get install prometheus, to check the alert rules")
	}
	for _, args := range [][]string{
		{"check", "rules", "rules.yaml"},
		{"test", "rules", "rules_test.yaml"},
	} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = "prometheus"
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
