package deploy

import (
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestReviewSidecar: finance reaches the review console only through the oauth2-proxy
// sidecar of the console pods: it listens on the review port that review-service.yaml fronts
// (selecting the console pods, never the callback pods), forwards /review/ to the console's
// admin port over loopback with the person's address in X-Forwarded-Email, and takes its
// secrets from the payrecon-review Secret; the console believes that header from loopback
// alone, signs forms with a key every replica shares, and connects as payrecon_reviewer.
func TestReviewSidecar(t *testing.T) {
	ms := loadManifests(t)
	d := only[appsv1.Deployment](t, ms, "console-deployment.yaml")
	spec := d.Spec.Template.Spec
	proxy := container(t, spec.Containers, proxyContainer)
	cons := container(t, spec.Containers, "reconciler")
	if !slices.Equal(cons.Args, []string{"console"}) {
		t.Errorf("console-deployment.yaml's reconciler runs %q, want [console]", cons.Args)
	}

	args := map[string]string{}
	for _, a := range proxy.Args {
		k, v, ok := strings.Cut(a, "=")
		if !ok || !strings.HasPrefix(k, "--") {
			t.Errorf("sidecar arg %q: want --name=value", a)
		}
		args[k] = v
	}
	up, err := url.Parse(args["--upstream"])
	if err != nil || up.Scheme != "http" || up.Path != "/review/" {
		t.Fatalf("--upstream %q: want http://127.0.0.1:<admin port>/review/", args["--upstream"])
	}
	if ip, err := netip.ParseAddr(up.Hostname()); err != nil || !ip.IsLoopback() {
		t.Errorf("--upstream host %q is not loopback: the console would not believe the sidecar", up.Hostname())
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range cons.Env {
		env[e.Name] = e
	}
	if admin := env["RECONCILER_ADMIN_LISTEN"].Value; !strings.HasSuffix(admin, ":"+up.Port()) {
		t.Errorf("--upstream port %s is not the admin port %s", up.Port(), admin)
	}
	for flag, want := range map[string]string{"--pass-user-headers": "true", "--cookie-secure": "true", "--reverse-proxy": "true"} {
		if args[flag] != want {
			t.Errorf("sidecar %s=%q, want %q", flag, args[flag], want)
		}
	}
	if args["--email-domain"] == "" || args["--email-domain"] == "*" {
		t.Errorf("--email-domain %q: sign-in must be limited to the company's domain", args["--email-domain"])
	}
	for _, a := range []string{"--client-secret", "--cookie-secret", "--client-id"} {
		if _, ok := args[a]; ok {
			t.Errorf("sidecar passes %s on the command line: it belongs in the payrecon-review Secret", a)
		}
	}
	secretEnv := map[string]string{}
	for _, e := range proxy.Env {
		if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil || e.ValueFrom.SecretKeyRef.Name != "payrecon-review" {
			t.Errorf("sidecar env %s is not read from the payrecon-review Secret", e.Name)
			continue
		}
		secretEnv[e.Name] = e.ValueFrom.SecretKeyRef.Key
	}
	for _, name := range []string{"OAUTH2_PROXY_CLIENT_ID", "OAUTH2_PROXY_CLIENT_SECRET", "OAUTH2_PROXY_COOKIE_SECRET"} {
		if secretEnv[name] == "" {
			t.Errorf("sidecar lacks %s", name)
		}
	}
	listen := args["--http-address"]
	var reviewPort int32
	for _, p := range proxy.Ports {
		if p.Name == "review" {
			reviewPort = p.ContainerPort
		}
	}
	if reviewPort == 0 || !strings.HasSuffix(listen, ":"+strconv.Itoa(int(reviewPort))) {
		t.Errorf("sidecar listens on %q, its review port is %d", listen, reviewPort)
	}
	for _, pr := range []*corev1.Probe{proxy.ReadinessProbe, proxy.LivenessProbe} {
		if pr == nil || pr.HTTPGet == nil || pr.HTTPGet.Path != "/ping" {
			t.Errorf("sidecar probes must GET /ping, got %+v", pr)
		}
	}

	// The console: loopback only, the sidecar's header, a shared form key, the reviewer role.
	if h := env["RECONCILER_ADMIN_IDENTITY_HEADER"].Value; h != "X-Forwarded-Email" {
		t.Errorf("RECONCILER_ADMIN_IDENTITY_HEADER %q, want the header oauth2-proxy sets, X-Forwarded-Email", h)
	}
	proxies := env["RECONCILER_ADMIN_TRUSTED_PROXIES"].Value
	if proxies == "" {
		t.Errorf("RECONCILER_ADMIN_TRUSTED_PROXIES unset")
	}
	for _, c := range strings.Split(proxies, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(c))
		if err != nil || !p.Addr().IsLoopback() || (p.Addr().Is4() && p.Bits() < 8) {
			t.Errorf("trusted proxy %q: the console must trust loopback only", c)
		}
	}
	if f := env["RECONCILER_ADMIN_CSRF_KEY_FILE"].Value; f == "" {
		t.Errorf("no RECONCILER_ADMIN_CSRF_KEY_FILE: with %d replicas a form from one pod would fail on another", *d.Spec.Replicas)
	}
	// RECONCILER_DATABASE_URL from the reviewer's Secret, and from nowhere else: a later
	// envFrom or an env entry would win over it.
	var urlFrom []string
	for _, ef := range cons.EnvFrom {
		if ef.SecretRef != nil {
			urlFrom = append(urlFrom, ef.SecretRef.Name)
		}
	}
	if _, set := env["RECONCILER_DATABASE_URL"]; set || !slices.Equal(urlFrom, []string{"payrecon-reviewer"}) {
		t.Errorf("the console must connect with the payrecon-reviewer Secret's RECONCILER_DATABASE_URL alone (envFrom Secrets %v)", urlFrom)
	}

	svc := only[corev1.Service](t, ms, "review-service.yaml")
	if !selects(svc.Spec.Selector, d.Spec.Template.Labels) || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].TargetPort.StrVal != "review" {
		t.Errorf("review Service %+v must select the console pods and target their review port only", svc.Spec)
	}
	callbacks := only[appsv1.Deployment](t, ms, "serve-deployment.yaml")
	if selects(svc.Spec.Selector, callbacks.Spec.Template.Labels) {
		t.Errorf("review Service selects the callback pods: finance would reach the internet-facing pods")
	}
	cm := only[corev1.ConfigMap](t, ms, "configmap.yaml")
	for _, k := range []string{"RECONCILER_REVIEWERS", "RECONCILER_APPROVERS"} {
		if !strings.Contains(cm.Data[k], "@") {
			t.Errorf("configmap.yaml %s = %q: name who may act", k, cm.Data[k])
		}
	}
}
