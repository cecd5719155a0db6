package deploy

import (
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"sigs.k8s.io/yaml"

	appsv1 "k8s.io/api/apps/v1"
)

// TestAdminPortAndNetworkPolicy: serve listens for callbacks on http (8080) and for
// monitoring on admin (9090, RECONCILER_ADMIN_LISTEN); a separate Service fronts each; one
// NetworkPolicy selects the serve pods and admits the ingress controller to http only and
// monitoring to admin only, nothing else. Another selects the console pods and admits the
// ingress controller to the sign-in sidecar's review port only and monitoring to admin only.
func TestAdminPortAndNetworkPolicy(t *testing.T) {
	ms := loadManifests(t)
	d := only[appsv1.Deployment](t, ms, "serve-deployment.yaml")
	tmpl := d.Spec.Template
	c := container(t, tmpl.Spec.Containers, "reconciler")
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if ports["http"] != 8080 || ports["admin"] != 9090 || len(ports) != 2 {
		t.Fatalf("container ports %v, want http 8080 and admin 9090", ports)
	}
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	if env["RECONCILER_LISTEN"] != ":8080" || env["RECONCILER_ADMIN_LISTEN"] != ":9090" {
		t.Errorf("listen settings %q and %q do not match the ports", env["RECONCILER_LISTEN"], env["RECONCILER_ADMIN_LISTEN"])
	}

	admin := only[corev1.Service](t, ms, "admin-service.yaml")
	if !selects(admin.Spec.Selector, tmpl.Labels) || len(admin.Spec.Selector) == 0 {
		t.Errorf("admin Service does not select the serve pods")
	}
	if len(admin.Spec.Ports) != 1 || admin.Spec.Ports[0].TargetPort.StrVal != "admin" {
		t.Errorf("admin Service ports %+v, want one targeting admin", admin.Spec.Ports)
	}
	if admin.Spec.Type != "" && admin.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Errorf("admin Service type %s: it must stay inside the cluster", admin.Spec.Type)
	}

	np := policyFor(t, ms, tmpl.Labels)
	if want := map[string]string{"http": "ingress-nginx", "admin": "monitoring"}; !reflect.DeepEqual(admitted(t, np), want) {
		t.Errorf("callback pods: admitted %v, want %v", admitted(t, np), want)
	}

	console := only[appsv1.Deployment](t, ms, "console-deployment.yaml").Spec.Template
	consolePorts := map[string]int32{}
	for _, c := range console.Spec.Containers {
		for _, p := range c.Ports {
			consolePorts[p.Name] = p.ContainerPort
		}
	}
	if consolePorts["admin"] != 9090 || consolePorts["review"] == 0 || len(consolePorts) != 2 {
		t.Errorf("console pod ports %v, want admin 9090 and the sidecar's review", consolePorts)
	}
	np = policyFor(t, ms, console.Labels)
	if want := map[string]string{"review": "ingress-nginx", "admin": "monitoring"}; !reflect.DeepEqual(admitted(t, np), want) {
		t.Errorf("console pods: admitted %v, want %v", admitted(t, np), want)
	}
}

// policyFor is the one NetworkPolicy of network-policy.yaml that selects pods with labels.
func policyFor(t *testing.T, ms []manifest, labels map[string]string) *networkingv1.NetworkPolicy {
	t.Helper()
	var found *networkingv1.NetworkPolicy
	for _, m := range ms {
		np, ok := m.obj.(*networkingv1.NetworkPolicy)
		if !ok || m.file != "network-policy.yaml" || len(np.Spec.PodSelector.MatchLabels) == 0 || !selects(np.Spec.PodSelector.MatchLabels, labels) {
			continue
		}
		if found != nil {
			t.Fatalf("two NetworkPolicies select the pods %v: %s and %s", labels, found.Name, np.Name)
		}
		found = np
	}
	if found == nil {
		t.Fatalf("no NetworkPolicy selects the pods %v", labels)
	}
	if !slices.Equal(found.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("%s: policyTypes %v, want Ingress", found.Name, found.Spec.PolicyTypes)
	}
	return found
}

// admitted maps each port name a NetworkPolicy opens to the one namespace it opens it to;
// a rule with another shape (pods, IP blocks, several sources or ports) is an error.
func admitted(t *testing.T, np *networkingv1.NetworkPolicy) map[string]string {
	t.Helper()
	out := map[string]string{} // port name -> namespace
	for i, rule := range np.Spec.Ingress {
		if len(rule.From) != 1 || rule.From[0].NamespaceSelector == nil || rule.From[0].PodSelector != nil || rule.From[0].IPBlock != nil {
			t.Errorf("%s ingress rule %d: want exactly one namespace as its source, got %+v", np.Name, i, rule.From)
			continue
		}
		if len(rule.Ports) != 1 || rule.Ports[0].Port == nil || rule.Ports[0].Port.StrVal == "" {
			t.Errorf("%s ingress rule %d: want exactly one named port, got %+v", np.Name, i, rule.Ports)
			continue
		}
		port := rule.Ports[0].Port.StrVal
		if _, dup := out[port]; dup {
			t.Errorf("%s: port %s admitted by two rules", np.Name, port)
		}
		out[port] = rule.From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]
	}
	return out
}

// TestPrometheusRule: the PrometheusRule's groups are rules.yaml's (one rule text, two
// wrappers), every alert operations.md must explain is there, and promtool accepts the
// PrometheusRule's groups as they are.
func TestPrometheusRule(t *testing.T) {
	ms := loadManifests(t)
	pr := only[prometheusRule](t, ms, "prometheus-rule.yaml")
	b, err := os.ReadFile(filepath.Join("prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []any `json:"groups"`
	}
	if err := yaml.UnmarshalStrict(b, &file); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(pr.Spec["groups"], file.Groups) || len(pr.Spec) != 1 {
		t.Fatal("prometheus-rule.yaml's spec.groups differ from prometheus/rules.yaml: re-indent rules.yaml into it")
	}
	alerts := map[string]bool{}
	for _, g := range file.Groups {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			if name, ok := r.(map[string]any)["alert"].(string); ok {
				alerts[name] = true
			}
		}
	}
	for _, a := range []string{"PayreconNoSuccessfulPass", "PayreconPendingOrdersAging", "PayreconBadSignatures",
		"PayreconBreakerOpen", "PayreconClaimStoreFailing", "PayreconMismatchesRising"} {
		if !alerts[a] {
			t.Errorf("alert %s missing", a)
		}
	}
	ops, err := os.ReadFile(filepath.Join("..", "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	for a := range alerts {
		if !regexpContainsHeading(string(ops), a) {
			t.Errorf("docs/operations.md has no section for %s", a)
		}
	}

	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatal("promtool not on PATH: run make test-deps, or apt-get install prometheus")
	}
	spec, err := yaml.Marshal(map[string]any{"groups": pr.Spec["groups"]})
	if err != nil {
		t.Fatal(err)
	}
	f := filepath.Join(t.TempDir(), "prometheusrule-groups.yaml")
	if err := os.WriteFile(f, spec, 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(promtool, "check", "rules", f).CombinedOutput(); err != nil {
		t.Errorf("promtool check rules on the PrometheusRule's groups: %v\n%s", err, out)
	}
}

// regexpContainsHeading tells whether markdown has a heading naming exactly name.
func regexpContainsHeading(markdown, name string) bool {
	return regexp.MustCompile(`(?m)^#{2,4} ` + regexp.QuoteMeta(name) + `\s*$`).MatchString(markdown)
}
