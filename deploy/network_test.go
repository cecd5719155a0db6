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
// monitoring on admin (9090, RECONCILER_ADMIN_LISTEN); a separate Service fronts each; the
// NetworkPolicy selects the serve pods and admits the ingress controller to http only and
// monitoring to admin only, nothing else.
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

	np := only[networkingv1.NetworkPolicy](t, ms, "network-policy.yaml")
	if !selects(np.Spec.PodSelector.MatchLabels, tmpl.Labels) || len(np.Spec.PodSelector.MatchLabels) == 0 {
		t.Fatalf("NetworkPolicy does not select the serve pods")
	}
	if !slices.Equal(np.Spec.PolicyTypes, []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}) {
		t.Errorf("policyTypes %v, want Ingress", np.Spec.PolicyTypes)
	}
	admitted := map[string]string{} // port name -> namespace
	for i, rule := range np.Spec.Ingress {
		if len(rule.From) != 1 || rule.From[0].NamespaceSelector == nil || rule.From[0].PodSelector != nil || rule.From[0].IPBlock != nil {
			t.Errorf("ingress rule %d: want exactly one namespace as its source, got %+v", i, rule.From)
			continue
		}
		if len(rule.Ports) != 1 || rule.Ports[0].Port == nil || rule.Ports[0].Port.StrVal == "" {
			t.Errorf("ingress rule %d: want exactly one named port, got %+v", i, rule.Ports)
			continue
		}
		port := rule.Ports[0].Port.StrVal
		if _, dup := admitted[port]; dup {
			t.Errorf("port %s admitted by two rules", port)
		}
		admitted[port] = rule.From[0].NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"]
	}
	want := map[string]string{"http": "ingress-nginx", "admin": "monitoring", "review": "ingress-nginx"}
	if !reflect.DeepEqual(admitted, want) {
		t.Errorf("admitted %v, want %v", admitted, want)
	}
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
