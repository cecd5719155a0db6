package deploy

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/payrecon/payrecon/config"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

const manifestDir = "kubernetes"

// knownSettings are the settings the binary reads (env form without the RECONCILER_
// prefix), taken from the config package itself, plus the review commands' reviewer. A
// RECONCILER_* name anywhere in the manifests must be one of these.
var knownSettings = func() []string {
	out := []string{"REVIEWER"}
	for _, n := range config.Names() {
		out = append(out, strings.TrimPrefix(config.EnvName(n), "RECONCILER_"))
	}
	return out
}()

// subcommands a container may run, and the flags they take beyond the settings.
var (
	knownSubcommands = []string{"run", "serve", "console", "backfill", "migrate", "statement"}
	commandFlags     = []string{"from", "to", "resume", "schedule"}
)

// The binary's image as the manifests name it; kustomization.yaml pins the real one.
const imageName = "payrecon/reconciler"

// The review console's sign-in sidecar in the console pods (console-deployment.yaml): the one
// container that is not payrecon's image, pinned in kustomization.yaml too.
const (
	proxyImage     = "quay.io/oauth2-proxy/oauth2-proxy"
	proxyContainer = "oauth2-proxy"
)

// isReviewProxy tells the console pods' oauth2-proxy sidecar from payrecon's own containers.
func isReviewProxy(c corev1.Container) bool { return c.Name == proxyContainer && c.Image == proxyImage }

// Files deliberately left out of kustomization.yaml (see its comment).
var notInKustomization = []string{"secret.example.yaml", "backfill-indexed-job.yaml"}

// manifest is one YAML document of one file, decoded into its Kubernetes API type.
type manifest struct {
	file       string
	doc        int
	apiVersion string
	kind       string
	name       string
	obj        any
}

func (m manifest) String() string {
	return fmt.Sprintf("%s#%d %s/%s", m.file, m.doc, m.kind, m.name)
}

// kinds maps "apiVersion kind" to a fresh value of the API type.
var kinds = map[string]func() any{
	"batch/v1 CronJob":                   func() any { return new(batchv1.CronJob) },
	"batch/v1 Job":                       func() any { return new(batchv1.Job) },
	"apps/v1 Deployment":                 func() any { return new(appsv1.Deployment) },
	"v1 Service":                         func() any { return new(corev1.Service) },
	"v1 ConfigMap":                       func() any { return new(corev1.ConfigMap) },
	"v1 Secret":                          func() any { return new(corev1.Secret) },
	"policy/v1 PodDisruptionBudget":      func() any { return new(policyv1.PodDisruptionBudget) },
	"networking.k8s.io/v1 NetworkPolicy": func() any { return new(networkingv1.NetworkPolicy) },
	// No Go type ships for the Prometheus Operator's kind without a new dependency: it is
	// decoded as plain YAML, and TestPrometheusRule holds it to deploy/prometheus/rules.yaml.
	"monitoring.coreos.com/v1 PrometheusRule": func() any { return new(prometheusRule) },
}

// prometheusRule is the part of a PrometheusRule the tests read; the groups are left as
// plain YAML so that they compare with rules.yaml as written.
type prometheusRule struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Metadata   map[string]any   `json:"metadata"`
	Spec       map[string][]any `json:"spec"`
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*(#.*)?$`)

// splitDocuments splits a multi-document YAML file on `---` lines and drops documents that
// hold only comments and blank lines.
func splitDocuments(b []byte) [][]byte {
	var docs [][]byte
	for _, d := range docSeparator.Split(string(b), -1) {
		empty := true
		for _, line := range strings.Split(d, "\n") {
			if l := strings.TrimSpace(line); l != "" && !strings.HasPrefix(l, "#") {
				empty = false
				break
			}
		}
		if !empty {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

// strictUnmarshal decodes YAML the way kubectl and an API server with strict field
// validation read it: YAML to JSON as kubectl converts it (so an unquoted 5 where the API
// wants a string is an error, as it is on apply), then case-sensitive JSON decoding that
// rejects unknown and duplicate fields. (encoding/json, under sigs.k8s.io/yaml's own
// UnmarshalStrict, matches field names case-insensitively and would let `backofflimit` through,
// which a real API server drops or rejects.)
func strictUnmarshal(doc []byte, obj any) error {
	j, err := yaml.YAMLToJSONStrict(doc)
	if err != nil {
		return err
	}
	strictErrs, err := sigsjson.UnmarshalStrict(j, obj)
	if err != nil {
		return err
	}
	return errors.Join(strictErrs...)
}

// decodeStrict decodes one document into the API type its apiVersion and kind name.
func decodeStrict(doc []byte) (manifest, error) {
	var tm struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Metadata   struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return manifest{}, err
	}
	newObj, ok := kinds[tm.APIVersion+" "+tm.Kind]
	if !ok {
		return manifest{}, fmt.Errorf("apiVersion %q kind %q: not a kind this test knows (add it to kinds)", tm.APIVersion, tm.Kind)
	}
	obj := newObj()
	if err := strictUnmarshal(doc, obj); err != nil {
		return manifest{}, fmt.Errorf("%s %s: %w", tm.APIVersion, tm.Kind, err)
	}
	return manifest{apiVersion: tm.APIVersion, kind: tm.Kind, name: tm.Metadata.Name, obj: obj}, nil
}

func manifestFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(manifestDir, "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob(filepath.Join(manifestDir, "*.yml"))
	files = append(files, more...)
	sort.Strings(files)
	if len(files) == 0 {
		t.Fatalf("no YAML under %s", manifestDir)
	}
	return files
}

// loadManifests decodes every document of every YAML file under kubernetes/ except the
// kustomization, failing the test on the first one that does not decode strictly.
func loadManifests(t *testing.T) []manifest {
	t.Helper()
	var out []manifest
	for _, f := range manifestFiles(t) {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs := splitDocuments(b)
		if len(docs) == 0 {
			t.Errorf("%s: no YAML document", f)
		}
		for i, d := range docs {
			m, err := decodeStrict(d)
			if err != nil {
				t.Errorf("%s document %d: %v", f, i, err)
				continue
			}
			m.file, m.doc = filepath.Base(f), i
			out = append(out, m)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	return out
}

func only[T any](t *testing.T, ms []manifest, file string) *T {
	t.Helper()
	var found *T
	for _, m := range ms {
		if o, ok := m.obj.(*T); ok && m.file == file {
			if found != nil {
				t.Fatalf("%s: more than one %T", file, o)
			}
			found = o
		}
	}
	if found == nil {
		var zero T
		t.Fatalf("%s: no %T", file, &zero)
	}
	return found
}

// ---------------------------------------------------------------------------------------
// Decoding

func TestEveryManifestDecodesStrictly(t *testing.T) {
	ms := loadManifests(t)
	seen := map[string]string{}
	for _, m := range ms {
		if m.name == "" {
			t.Errorf("%s: no metadata.name", m)
		}
		id := m.kind + "/" + m.name
		if prev, dup := seen[id]; dup {
			t.Errorf("%s: %s already defined in %s", m, id, prev)
		}
		seen[id] = m.file
	}
	got := map[string]bool{}
	for _, m := range ms {
		got[m.kind] = true
	}
	for _, k := range []string{"CronJob", "Job", "Deployment", "Service", "ConfigMap", "Secret", "PodDisruptionBudget", "NetworkPolicy", "PrometheusRule"} {
		if !got[k] {
			t.Errorf("no %s among the manifests", k)
		}
	}
}

// The strict decoder really does catch what a typo produces.
func TestStrictDecodingRejectsMistakes(t *testing.T) {
	good := []byte("apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: x\nspec:\n  schedule: \"*/5 * * * *\"\n  concurrencyPolicy: Forbid\n")
	if _, err := decodeStrict(good); err != nil {
		t.Fatalf("valid CronJob rejected: %v", err)
	}
	cases := []struct{ name, from, to string }{
		{"misspelt field", "concurrencyPolicy:", "concurencyPolicy:"},
		{"field at the wrong level", "  name: x", "  name: x\n  concurrencyPolicy: Forbid"},
		{"duplicate field", "  concurrencyPolicy: Forbid", "  concurrencyPolicy: Forbid\n  concurrencyPolicy: Allow"},
		{"wrong type", "concurrencyPolicy: Forbid", "concurrencyPolicy: [Forbid]"},
		{"wrong case", "concurrencyPolicy:", "ConcurrencyPolicy:"},
		{"unquoted number for a string", "concurrencyPolicy: Forbid", "concurrencyPolicy: 5"},
		{"unknown kind", "kind: CronJob", "kind: CronJobs"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			bad := bytes.Replace(good, []byte(c.from), []byte(c.to), 1)
			if bytes.Equal(bad, good) {
				t.Fatalf("case does not change the document")
			}
			if _, err := decodeStrict(bad); err == nil {
				t.Errorf("accepted:\n%s", bad)
			}
		})
	}
}

func TestSplitDocuments(t *testing.T) {
	in := "# head comment\n---\na: 1\n--- # second\nb: 2\n---\n# only a comment\n---\n"
	docs := splitDocuments([]byte(in))
	if len(docs) != 2 || !strings.Contains(string(docs[0]), "a: 1") || !strings.Contains(string(docs[1]), "b: 2") {
		t.Fatalf("split = %q", docs)
	}
}

// ---------------------------------------------------------------------------------------
// kustomization.yaml

type kustomization struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Namespace  string   `json:"namespace"`
	Resources  []string `json:"resources"`
	Images     []struct {
		Name    string `json:"name"`
		NewName string `json:"newName"`
		NewTag  string `json:"newTag"`
		Digest  string `json:"digest"`
	} `json:"images"`
}

func TestKustomization(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(manifestDir, "kustomization.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var k kustomization
	if err := strictUnmarshal(b, &k); err != nil {
		t.Fatalf("kustomization.yaml: %v", err)
	}
	if k.APIVersion != "kustomize.config.k8s.io/v1beta1" || k.Kind != "Kustomization" {
		t.Errorf("apiVersion/kind = %q/%q", k.APIVersion, k.Kind)
	}
	listed := map[string]bool{}
	for _, r := range k.Resources {
		if listed[r] {
			t.Errorf("resource %s listed twice", r)
		}
		listed[r] = true
		if _, err := os.Stat(filepath.Join(manifestDir, r)); err != nil {
			t.Errorf("resource %s: %v", r, err)
		}
	}
	// Every manifest is either applied by kustomize or deliberately left out.
	for _, f := range manifestFiles(t) {
		base := filepath.Base(f)
		switch {
		case base == "kustomization.yaml":
		case slices.Contains(notInKustomization, base):
			if listed[base] {
				t.Errorf("%s must not be in kustomization.yaml (see its comment)", base)
			}
		case !listed[base]:
			t.Errorf("%s is neither in kustomization.yaml resources nor in notInKustomization", base)
		}
	}
	if len(k.Images) != 2 || k.Images[0].Name != imageName || k.Images[0].NewName == "" ||
		k.Images[1].Name != proxyImage || k.Images[1].NewTag == "" || k.Images[1].NewTag == "latest" {
		t.Errorf("images = %+v; want one entry pinning %s and one pinning %s to a version", k.Images, imageName, proxyImage)
	}
}

// ---------------------------------------------------------------------------------------
// The CronJob

func TestCronJob(t *testing.T) {
	ms := loadManifests(t)
	cj := only[batchv1.CronJob](t, ms, "cronjob.yaml")
	s := cj.Spec
	if s.Schedule != "*/5 * * * *" {
		t.Errorf("schedule = %q", s.Schedule)
	}
	if s.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("concurrencyPolicy = %q, want Forbid", s.ConcurrencyPolicy)
	}
	if s.StartingDeadlineSeconds == nil || *s.StartingDeadlineSeconds <= 0 {
		t.Errorf("startingDeadlineSeconds not set")
	}
	js := s.JobTemplate.Spec
	if js.ActiveDeadlineSeconds == nil || *js.ActiveDeadlineSeconds <= 0 {
		t.Errorf("activeDeadlineSeconds not set")
	}
	if js.BackoffLimit == nil {
		t.Errorf("backoffLimit not set")
	}
	pod := js.Template.Spec
	main := container(t, pod.Containers, "reconciler")
	if len(main.Args) == 0 || main.Args[0] != "run" {
		t.Errorf("reconciler args = %q, want run", main.Args)
	}
	// The schema is migrate-job.yaml's: a migrate initContainer would put the owner's
	// credential in every pass (TestEachPodHoldsOnlyItsCredentials).
	if len(pod.InitContainers) != 0 {
		t.Errorf("initContainers %v: migrating is the migrate Job's alone", pod.InitContainers)
	}
	checkExitCodePolicy(t, js.PodFailurePolicy)
}

// The migrate Job: `reconciler migrate` once, as the schema owner; bad configuration (exit 2)
// fails at once, a failed database (exit 1) is retried, a disruption is not counted; bounded
// in time, and removing itself once finished so that the next apply runs it again.
func TestMigrateJob(t *testing.T) {
	ms := loadManifests(t)
	job := only[batchv1.Job](t, ms, "migrate-job.yaml")
	s := job.Spec
	c := container(t, s.Template.Spec.Containers, "reconciler")
	if !slices.Equal(c.Args, []string{"migrate"}) || len(s.Template.Spec.Containers) != 1 || len(s.Template.Spec.InitContainers) != 0 {
		t.Errorf("containers %+v, want one running [migrate]", s.Template.Spec.Containers)
	}
	if s.ActiveDeadlineSeconds == nil || s.BackoffLimit == nil || s.TTLSecondsAfterFinished == nil {
		t.Errorf("activeDeadlineSeconds %v, backoffLimit %v, ttlSecondsAfterFinished %v: set all three",
			s.ActiveDeadlineSeconds, s.BackoffLimit, s.TTLSecondsAfterFinished)
	}
	if s.PodFailurePolicy == nil {
		t.Fatal("no podFailurePolicy")
	}
	for _, tc := range []struct {
		code   int32
		cond   corev1.PodConditionType
		action batchv1.PodFailurePolicyAction
	}{{2, "", batchv1.PodFailurePolicyActionFailJob}, {137, corev1.DisruptionTarget, batchv1.PodFailurePolicyActionIgnore}, {1, "", ""}} {
		if got := firstMatch(s.PodFailurePolicy, "reconciler", tc.code, tc.cond); got != tc.action {
			t.Errorf("exit %d (condition %q) -> %q, want %q", tc.code, tc.cond, got, tc.action)
		}
	}
	// It runs before anything else exists on a first install: nothing but its Secret.
	for _, ef := range c.EnvFrom {
		if ef.ConfigMapRef != nil {
			t.Errorf("migrate reads ConfigMap %s: `apply -l app.kubernetes.io/component=migrate` on a first install would not create it", ef.ConfigMapRef.Name)
		}
	}
	if job.Labels["app.kubernetes.io/component"] != "migrate" {
		t.Errorf("labels %v: the release steps select the Job by app.kubernetes.io/component=migrate", job.Labels)
	}
}

// checkExitCodePolicy: exit 2 fails the Job, disruptions and exit 3 are ignored (see the
// comment at the top of cronjob.yaml), and the first matching rule is the intended one.
func checkExitCodePolicy(t *testing.T, p *batchv1.PodFailurePolicy) {
	t.Helper()
	if p == nil {
		t.Fatal("no podFailurePolicy")
	}
	cases := []struct {
		name   string
		code   int32
		cond   corev1.PodConditionType
		action batchv1.PodFailurePolicyAction
	}{
		{"bad configuration fails the Job", 2, "", batchv1.PodFailurePolicyActionFailJob},
		{"interrupted after draining is not counted", 3, "", batchv1.PodFailurePolicyActionIgnore},
		{"a disruption is not counted", 137, corev1.DisruptionTarget, batchv1.PodFailurePolicyActionIgnore},
		{"a failed pass counts", 1, "", ""},
	}
	for _, c := range cases {
		if got := firstMatch(p, "reconciler", c.code, c.cond); got != c.action {
			t.Errorf("%s: exit %d (condition %q) -> %q, want %q", c.name, c.code, c.cond, got, c.action)
		}
	}
}

// firstMatch evaluates the rules as the Job controller does, for one container's exit code
// and an optional True pod condition; "" means no rule matched (the default: Count).
func firstMatch(p *batchv1.PodFailurePolicy, containerName string, code int32, cond corev1.PodConditionType) batchv1.PodFailurePolicyAction {
	for _, r := range p.Rules {
		if e := r.OnExitCodes; e != nil {
			if e.ContainerName != nil && *e.ContainerName != containerName {
				continue
			}
			in := slices.Contains(e.Values, code)
			if (e.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn) == in {
				return r.Action
			}
		}
		for _, pc := range r.OnPodConditions {
			status := pc.Status
			if status == "" {
				status = corev1.ConditionTrue
			}
			if cond != "" && pc.Type == cond && status == corev1.ConditionTrue {
				return r.Action
			}
		}
	}
	return ""
}

// ---------------------------------------------------------------------------------------
// The backfill

func TestBackfillIndexedJob(t *testing.T) {
	ms := loadManifests(t)
	job := only[batchv1.Job](t, ms, "backfill-indexed-job.yaml")
	s := job.Spec
	if s.CompletionMode == nil || *s.CompletionMode != batchv1.IndexedCompletion {
		t.Errorf("completionMode = %v, want Indexed", s.CompletionMode)
	}
	if s.Completions == nil || s.Parallelism == nil || *s.Completions != 4 || *s.Parallelism != 4 {
		t.Errorf("completions/parallelism = %v/%v, want 4/4", s.Completions, s.Parallelism)
	}
	if s.BackoffLimit == nil && s.BackoffLimitPerIndex == nil {
		t.Errorf("neither backoffLimit nor backoffLimitPerIndex set")
	}
	if s.ActiveDeadlineSeconds == nil {
		t.Errorf("activeDeadlineSeconds not set")
	}
	c := container(t, s.Template.Spec.Containers, "reconciler")
	if len(c.Args) == 0 || c.Args[0] != "backfill" {
		t.Fatalf("args = %q, want backfill ...", c.Args)
	}
	for _, f := range []string{"--from", "--to"} {
		if flagValue(c.Args, f) == "" {
			t.Errorf("args %q lack %s", c.Args, f)
		}
	}
	if got := flagValue(c.Args, "--shards"); got != fmt.Sprint(*s.Completions) {
		t.Errorf("--shards = %q, want the completions (%d): JOB_COMPLETION_INDEX ranges over them", got, *s.Completions)
	}
	if flagValue(c.Args, "--shard") != "" {
		t.Errorf("--shard i/n fixes one shard for every index; use --shards")
	}
	checkExitCodePolicy(t, s.PodFailurePolicy)

	// The shards take from each account's shared budget like every other process; a QPS
	// here would be the hand-made split the shared budget replaced (TestSharedCallBudget).
	for _, e := range c.Env {
		if strings.HasSuffix(e.Name, "_QPS") {
			t.Errorf("env %s: the backfill must not override an account's qps", e.Name)
		}
	}
}

func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v
		}
	}
	return ""
}

// ---------------------------------------------------------------------------------------
// serve

func TestServeDeployment(t *testing.T) {
	ms := loadManifests(t)
	d := only[appsv1.Deployment](t, ms, "serve-deployment.yaml")
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 2 {
		t.Errorf("replicas = %v, want 2", d.Spec.Replicas)
	}
	tmpl := d.Spec.Template
	if !selects(d.Spec.Selector.MatchLabels, tmpl.Labels) || len(d.Spec.Selector.MatchExpressions) != 0 {
		t.Errorf("selector %v does not select the template labels %v", d.Spec.Selector, tmpl.Labels)
	}
	c := container(t, tmpl.Spec.Containers, "reconciler")
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Errorf("args = %q, want serve", c.Args)
	}
	if flagValue(c.Args, "--schedule") != "" {
		t.Errorf("the default serve only answers callbacks; passes are the CronJob's")
	}
	portByName := map[string]int32{}
	for _, p := range c.Ports {
		portByName[p.Name] = p.ContainerPort
	}
	if portByName["http"] != 8080 {
		t.Errorf("ports = %+v, want http 8080", c.Ports)
	}
	probes := []struct {
		name  string
		probe *corev1.Probe
		path  string
	}{
		{"readiness", c.ReadinessProbe, "/readyz"},
		{"liveness", c.LivenessProbe, "/healthz"},
	}
	for _, p := range probes {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s probe: not an HTTP GET", p.name)
			continue
		}
		g := p.probe.HTTPGet
		port := g.Port.IntVal
		if g.Port.StrVal != "" {
			port = portByName[g.Port.StrVal]
		}
		if g.Path != p.path || port != 8080 {
			t.Errorf("%s probe = %s on %s, want %s on 8080", p.name, g.Path, g.Port.String(), p.path)
		}
	}
	// Metrics are scraped from the admin port: the callback port does not serve them.
	want := map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9090", "prometheus.io/path": "/metrics"}
	for k, v := range want {
		if tmpl.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, tmpl.Annotations[k], v)
		}
	}
	if c.Lifecycle == nil || c.Lifecycle.PreStop == nil {
		t.Errorf("no preStop: endpoints may still route to a stopping pod")
	}

	svc := only[corev1.Service](t, ms, "serve-service.yaml")
	if !selects(svc.Spec.Selector, tmpl.Labels) || len(svc.Spec.Selector) == 0 {
		t.Errorf("Service selector %v does not select the serve pods %v", svc.Spec.Selector, tmpl.Labels)
	}
	for _, p := range svc.Spec.Ports {
		tp := p.TargetPort.IntVal
		if p.TargetPort.StrVal != "" {
			tp = portByName[p.TargetPort.StrVal]
		}
		if tp != 8080 {
			t.Errorf("Service port %s targets %s, not the container's 8080", p.Name, p.TargetPort.String())
		}
	}

	pdb := only[policyv1.PodDisruptionBudget](t, ms, "serve-deployment.yaml")
	if pdb.Spec.Selector == nil || !selects(pdb.Spec.Selector.MatchLabels, tmpl.Labels) {
		t.Errorf("PodDisruptionBudget does not select the serve pods")
	}
	if pdb.Spec.MinAvailable == nil && pdb.Spec.MaxUnavailable == nil {
		t.Errorf("PodDisruptionBudget sets neither minAvailable nor maxUnavailable")
	}
	if pdb.Spec.MinAvailable != nil && pdb.Spec.MinAvailable.IntVal >= *d.Spec.Replicas {
		t.Errorf("minAvailable %s blocks every drain with %d replicas", pdb.Spec.MinAvailable.String(), *d.Spec.Replicas)
	}
}

func selects(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// ---------------------------------------------------------------------------------------
// Every pod template

type pod struct {
	where string
	spec  corev1.PodSpec
	job   *batchv1.JobSpec // nil for a Deployment
}

func pods(t *testing.T, ms []manifest) []pod {
	t.Helper()
	var out []pod
	for _, m := range ms {
		switch o := m.obj.(type) {
		case *batchv1.CronJob:
			out = append(out, pod{m.String(), o.Spec.JobTemplate.Spec.Template.Spec, &o.Spec.JobTemplate.Spec})
		case *batchv1.Job:
			out = append(out, pod{m.String(), o.Spec.Template.Spec, &o.Spec})
		case *appsv1.Deployment:
			out = append(out, pod{m.String(), o.Spec.Template.Spec, nil})
		}
	}
	if len(out) != 6 {
		t.Fatalf("found %d pod templates, want 6 (the run and statement CronJobs, the backfill and migrate Jobs, the serve and console Deployments)", len(out))
	}
	return out
}

func container(t *testing.T, cs []corev1.Container, name string) corev1.Container {
	t.Helper()
	for _, c := range cs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no container %q", name)
	return corev1.Container{}
}

func allContainers(s corev1.PodSpec) []corev1.Container {
	return append(slices.Clone(s.InitContainers), s.Containers...)
}

func TestPodSecurity(t *testing.T) {
	ms := loadManifests(t)
	for _, p := range pods(t, ms) {
		t.Run(p.where, func(t *testing.T) {
			psc := p.spec.SecurityContext
			if psc == nil {
				psc = &corev1.PodSecurityContext{}
			}
			if p.spec.AutomountServiceAccountToken == nil || *p.spec.AutomountServiceAccountToken {
				t.Errorf("automountServiceAccountToken should be false: payrecon never calls the API server")
			}
			if p.spec.HostNetwork || p.spec.HostPID || p.spec.HostIPC {
				t.Errorf("host namespaces shared")
			}
			for _, c := range allContainers(p.spec) {
				sc := c.SecurityContext
				if sc == nil {
					sc = &corev1.SecurityContext{}
				}
				nonRoot := firstBool(sc.RunAsNonRoot, psc.RunAsNonRoot)
				if nonRoot == nil || !*nonRoot {
					t.Errorf("%s: runAsNonRoot is not true", c.Name)
				}
				if uid := firstInt(sc.RunAsUser, psc.RunAsUser); uid != nil && *uid == 0 {
					t.Errorf("%s: runAsUser 0", c.Name)
				}
				if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
					t.Errorf("%s: readOnlyRootFilesystem is not true", c.Name)
				}
				if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
					t.Errorf("%s: allowPrivilegeEscalation is not false", c.Name)
				}
				if sc.Privileged != nil && *sc.Privileged {
					t.Errorf("%s: privileged", c.Name)
				}
				if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) != 0 {
					t.Errorf("%s: capabilities must drop ALL and add none", c.Name)
				}
				seccomp := sc.SeccompProfile
				if seccomp == nil {
					seccomp = psc.SeccompProfile
				}
				if seccomp == nil || seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault {
					t.Errorf("%s: seccomp profile is not RuntimeDefault", c.Name)
				}
				r := c.Resources
				if r.Requests.Cpu().IsZero() || r.Requests.Memory().IsZero() || r.Limits.Memory().IsZero() {
					t.Errorf("%s: resources need cpu and memory requests and a memory limit, got %+v", c.Name, r)
				}
				if c.Image != imageName && !isReviewProxy(c) {
					t.Errorf("%s: image %q, want %q (pinned by kustomization.yaml)", c.Name, c.Image, imageName)
				}
			}
		})
	}
}

func firstBool(a, b *bool) *bool {
	if a != nil {
		return a
	}
	return b
}

func firstInt(a, b *int64) *int64 {
	if a != nil {
		return a
	}
	return b
}

// Containers run the image's /reconciler with a known subcommand and known flags.
func TestContainerCommands(t *testing.T) {
	ms := loadManifests(t)
	flags := map[string]bool{}
	for _, s := range knownSettings {
		flags["--"+strings.ReplaceAll(strings.ToLower(s), "_", "-")] = true
	}
	for _, f := range commandFlags {
		flags["--"+f] = true
	}
	for _, p := range pods(t, ms) {
		for _, c := range allContainers(p.spec) {
			where := p.where + " " + c.Name
			if isReviewProxy(c) {
				continue // not payrecon's binary: TestReviewSidecar
			}
			if len(c.Command) != 0 && !slices.Equal(c.Command, []string{"/reconciler"}) {
				t.Errorf("%s: command %q; leave it to the image's ENTRYPOINT", where, c.Command)
			}
			if len(c.Args) == 0 || !slices.Contains(knownSubcommands, c.Args[0]) {
				t.Errorf("%s: args %q do not start with one of %v", where, c.Args, knownSubcommands)
				continue
			}
			for _, a := range c.Args[1:] {
				if !strings.HasPrefix(a, "-") {
					continue
				}
				name, _, _ := strings.Cut(a, "=")
				if strings.HasPrefix(name, "-") && !strings.HasPrefix(name, "--") {
					name = "-" + name
				}
				if !flags[name] {
					t.Errorf("%s: unknown flag %s", where, a)
				}
			}
		}
	}
}

// Every RECONCILER_* name is a setting the binary knows, wherever it appears.
func TestSettingNames(t *testing.T) {
	ms := loadManifests(t)
	known := map[string]bool{}
	for _, s := range knownSettings {
		known["RECONCILER_"+s] = true
	}
	check := func(where, name string) {
		if strings.HasPrefix(name, "RECONCILER_") && !known[name] {
			t.Errorf("%s: %s is not a known setting", where, name)
		}
	}
	readAsEnv := map[string]bool{}
	for _, p := range pods(t, ms) {
		for _, c := range allContainers(p.spec) {
			for _, ef := range c.EnvFrom {
				if ef.ConfigMapRef != nil {
					readAsEnv[ef.ConfigMapRef.Name] = true
				}
			}
		}
	}
	n := 0
	for _, m := range ms {
		switch o := m.obj.(type) {
		case *corev1.ConfigMap:
			if !readAsEnv[m.name] {
				continue // mounted as files (the accounts file)
			}
			for k := range o.Data {
				if !strings.HasPrefix(k, "RECONCILER_") {
					t.Errorf("%s: %s is not a RECONCILER_ setting (the ConfigMap is read with envFrom)", m, k)
				}
				check(m.String(), k)
				n++
			}
		case *corev1.Secret:
			for k := range o.StringData {
				check(m.String(), k)
				n++
			}
			for k := range o.Data {
				check(m.String(), k)
				n++
			}
		}
	}
	for _, p := range pods(t, ms) {
		for _, c := range allContainers(p.spec) {
			for _, e := range c.Env {
				check(p.where+" "+c.Name, e.Name)
				n++
			}
		}
	}
	if n == 0 {
		t.Fatal("no setting found at all")
	}
}

func TestSecretExample(t *testing.T) {
	ms := loadManifests(t)
	n := 0
	for _, m := range ms {
		s, ok := m.obj.(*corev1.Secret)
		if !ok {
			continue
		}
		if m.file != "secret.example.yaml" {
			t.Errorf("%s: Secrets belong in secret.example.yaml only, with placeholders", m)
		}
		if len(s.Data) != 0 {
			t.Errorf("%s: use stringData with REPLACE_ME placeholders, not data", m)
		}
		for k, v := range s.StringData {
			n++
			if !strings.Contains(v, "REPLACE_ME") {
				t.Errorf("%s: %s is not a REPLACE_ME placeholder", m, k)
			}
		}
	}
	if n == 0 {
		t.Fatal("secret.example.yaml holds no value")
	}
}

// configMapsAndSecrets indexes the manifests' ConfigMaps and Secrets by name.
func configMapsAndSecrets(ms []manifest) (map[string]*corev1.ConfigMap, map[string]*corev1.Secret) {
	configMaps, secrets := map[string]*corev1.ConfigMap{}, map[string]*corev1.Secret{}
	for _, m := range ms {
		switch o := m.obj.(type) {
		case *corev1.ConfigMap:
			configMaps[m.name] = o
		case *corev1.Secret:
			secrets[m.name] = o
		}
	}
	return configMaps, secrets
}

// References between manifests resolve: envFrom, ConfigMap and Secret volumes, mounts, key
// files (named by settings or by the accounts file), the podFailurePolicy's container names;
// and nothing defined is left unused.
func TestCrossReferences(t *testing.T) {
	ms := loadManifests(t)
	configMaps, secrets := configMapsAndSecrets(ms)
	usedConfigMaps := map[string]bool{}
	usedKeys := map[string]map[string]bool{} // Secret volume name -> keys some container reads
	for _, p := range pods(t, ms) {
		t.Run(p.where, func(t *testing.T) {
			volumes := map[string]corev1.Volume{}
			for _, v := range p.spec.Volumes {
				volumes[v.Name] = v
				if v.Secret != nil {
					if _, ok := secrets[v.Secret.SecretName]; !ok {
						t.Errorf("volume %s: Secret %q is not in secret.example.yaml", v.Name, v.Secret.SecretName)
					}
					if v.Secret.DefaultMode == nil || *v.Secret.DefaultMode&0o027 != 0 {
						t.Errorf("volume %s: key files must not be writable or world-readable (defaultMode %v)", v.Name, v.Secret.DefaultMode)
					}
				}
				if v.ConfigMap != nil {
					usedConfigMaps[v.ConfigMap.Name] = true
					if configMaps[v.ConfigMap.Name] == nil {
						t.Errorf("volume %s: ConfigMap %q not defined", v.Name, v.ConfigMap.Name)
					}
				}
			}
			names := map[string]bool{}
			for _, c := range allContainers(p.spec) {
				if names[c.Name] {
					t.Errorf("container name %s used twice", c.Name)
				}
				names[c.Name] = true
				for _, ef := range c.EnvFrom {
					switch {
					case ef.ConfigMapRef != nil:
						usedConfigMaps[ef.ConfigMapRef.Name] = true
						if configMaps[ef.ConfigMapRef.Name] == nil {
							t.Errorf("%s: envFrom ConfigMap %q not defined", c.Name, ef.ConfigMapRef.Name)
						}
					case ef.SecretRef != nil:
						if secrets[ef.SecretRef.Name] == nil {
							t.Errorf("%s: envFrom Secret %q not defined", c.Name, ef.SecretRef.Name)
						}
					}
				}
				for _, vm := range c.VolumeMounts {
					v, ok := volumes[vm.Name]
					if !ok {
						t.Errorf("%s: mounts undefined volume %s", c.Name, vm.Name)
						continue
					}
					if (v.Secret != nil || v.ConfigMap != nil) && !vm.ReadOnly {
						t.Errorf("%s: volume %s mounted read-write", c.Name, vm.Name)
					}
				}
				// Keys read into the environment one by one (the sidecar's client secret, the
				// reviewer's database URL) must exist, and count as used.
				for _, e := range c.Env {
					if e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
						continue
					}
					ref := e.ValueFrom.SecretKeyRef
					if sec := secrets[ref.Name]; sec == nil {
						t.Errorf("%s: env %s reads Secret %q, not in secret.example.yaml", c.Name, e.Name, ref.Name)
					} else if _, ok := sec.StringData[ref.Key]; !ok {
						t.Errorf("%s: env %s reads key %s, not in Secret %s", c.Name, e.Name, ref.Key, ref.Name)
					}
					if usedKeys[ref.Name] == nil {
						usedKeys[ref.Name] = map[string]bool{}
					}
					usedKeys[ref.Name][ref.Key] = true
				}
				problems, used := keyFileProblems(t.TempDir(), c, configMaps, secrets, volumes)
				for _, p := range problems {
					t.Error(p)
				}
				for secret, keys := range used {
					if usedKeys[secret] == nil {
						usedKeys[secret] = map[string]bool{}
					}
					for k := range keys {
						usedKeys[secret][k] = true
					}
				}
			}
			if p.job != nil {
				if p.spec.RestartPolicy != corev1.RestartPolicyNever {
					t.Errorf("restartPolicy %q: podFailurePolicy needs Never", p.spec.RestartPolicy)
				}
				if p.job.PodFailurePolicy != nil {
					for i, r := range p.job.PodFailurePolicy.Rules {
						e := r.OnExitCodes
						if (e == nil) == (len(r.OnPodConditions) == 0) {
							t.Errorf("rule %d: exactly one of onExitCodes and onPodConditions", i)
						}
						if e == nil {
							continue
						}
						if e.ContainerName != nil && !names[*e.ContainerName] {
							t.Errorf("rule %d: container %q is not in the pod", i, *e.ContainerName)
						}
						if len(e.Values) == 0 || !slices.IsSorted(e.Values) || len(slices.Compact(slices.Clone(e.Values))) != len(e.Values) {
							t.Errorf("rule %d: values %v must be non-empty, sorted and unique", i, e.Values)
						}
						if e.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn && slices.Contains(e.Values, 0) {
							t.Errorf("rule %d: exit 0 cannot be used with In", i)
						}
					}
				}
			}
		})
	}
	for name := range configMaps {
		if !usedConfigMaps[name] {
			t.Errorf("ConfigMap %s is neither read through envFrom nor mounted by any pod", name)
		}
	}
	// A key file no account names is a leftover (or a typo on one side): operators create the
	// real Secret from this list.
	for name, keys := range usedKeys {
		for k := range secrets[name].StringData {
			if !keys[k] {
				t.Errorf("Secret %s: key %s is named by no *_FILE setting and no account", name, k)
			}
		}
	}
	if len(usedKeys) == 0 {
		t.Errorf("no container reads a key file from a Secret")
	}
}

// mountedFile finds which volume key a container sees at path: a file directly under one
// of its mounts (payrecon mounts whole volumes, never a subPath). ok is false when no mount
// holds the path.
func mountedFile(c corev1.Container, volumes map[string]corev1.Volume, path string) (v corev1.Volume, key string, ok bool) {
	for _, vm := range c.VolumeMounts {
		rel, err := filepath.Rel(vm.MountPath, path)
		if vm.SubPath != "" || err != nil || rel == "." || strings.HasPrefix(rel, "..") || strings.Contains(rel, "/") {
			continue
		}
		v := volumes[vm.Name]
		// A volume that lists items holds those files only, each under its own path.
		var items []corev1.KeyToPath
		switch {
		case v.Secret != nil:
			items = v.Secret.Items
		case v.ConfigMap != nil:
			items = v.ConfigMap.Items
		}
		if len(items) == 0 {
			return v, rel, true
		}
		for _, it := range items {
			if it.Path == rel {
				return v, it.Key, true
			}
		}
		return corev1.Volume{}, "", false
	}
	return corev1.Volume{}, "", false
}

// callbackOnly reports a serve container without a schedule: it only verifies callbacks,
// so the binary drops the Alipay accounts' private keys and needs none mounted.
func callbackOnly(c corev1.Container, env map[string]string) bool {
	return len(c.Args) > 0 && c.Args[0] == "serve" && !slices.ContainsFunc(c.Args, func(a string) bool {
		return strings.HasPrefix(a, "--schedule")
	}) && env["RECONCILER_SCHEDULE"] == ""
}

// accountFile is one key or certificate file an account names.
type accountFile struct{ account, field, path string }

// accountFiles lists every file the accounts name, empty (optional) fields left out.
func accountFiles(a config.Accounts) []accountFile {
	var out []accountFile
	add := func(account, field, path string) {
		if path != "" {
			out = append(out, accountFile{account, field, path})
		}
	}
	for _, x := range a.Alipay {
		id := "alipay account " + x.AppID
		add(id, "private_key_file", x.PrivateKeyFile)
		add(id, "public_key_file", x.PublicKeyFile)
		add(id, "app_cert_file", x.AppCertFile)
		add(id, "alipay_cert_file", x.AlipayCertFile)
		add(id, "alipay_root_cert_file", x.AlipayRootCertFile)
	}
	for _, x := range a.WechatPay {
		id := "wechatpay account " + x.MchID
		add(id, "private_key_file", x.PrivateKeyFile)
		add(id, "apiv3_key_file", x.APIv3KeyFile)
		add(id, "public_key_file", x.PublicKeyFile)
	}
	return out
}

// loadAccounts reads an accounts file's content with the binary's own strict loader (unknown
// fields, wrong types and an empty list are errors), from a copy in dir.
func loadAccounts(dir, content string) (config.Accounts, error) {
	path := filepath.Join(dir, "accounts.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		return config.Accounts{}, err
	}
	return config.LoadAccountsFile(path)
}

// keyFileProblems: in a container that mounts volumes, every *_FILE setting it sees points at
// a file of a mount that the volume really provides: RECONCILER_ACCOUNTS_FILE (in a command
// that calls the platforms, and in the console) a key of a mounted ConfigMap, which must load
// as an accounts file; every other setting, and every key or certificate file the accounts
// name (except in the console, which reads none of them), a key of a mounted Secret. used lists the Secret
// keys read, by Secret name; dir is scratch space for the accounts file.
func keyFileProblems(dir string, c corev1.Container, cms map[string]*corev1.ConfigMap, secrets map[string]*corev1.Secret, volumes map[string]corev1.Volume) (problems []string, used map[string]map[string]bool) {
	used = map[string]map[string]bool{}
	if len(c.VolumeMounts) == 0 || (len(c.Args) > 0 && c.Args[0] == "migrate") {
		return nil, used // migrate reads no key file
	}
	fail := func(format string, args ...any) {
		problems = append(problems, c.Name+": "+fmt.Sprintf(format, args...))
	}
	// The console reads the shared settings ConfigMap too, and of the accounts file it names
	// the structure alone (who is whose provider): the file must be mounted and load there,
	// but none of the key files it names is read, so none need be mounted.
	readsAccounts := len(c.Args) > 0 && slices.Contains(callsPlatforms, c.Args[0])
	namesProviders := len(c.Args) > 0 && c.Args[0] == "console"
	secretFile := func(what, path string) {
		v, key, ok := mountedFile(c, volumes, path)
		switch {
		case !ok:
			fail("%s=%s is not in any mounted volume", what, path)
		case v.Secret == nil:
			fail("%s=%s is not in a Secret volume", what, path)
		case secrets[v.Secret.SecretName] == nil:
			// reported by the volume check
		default:
			s := secrets[v.Secret.SecretName]
			_, inData := s.Data[key]
			_, inString := s.StringData[key]
			if !inData && !inString {
				fail("%s=%s, but Secret %s has no key %q", what, path, s.Name, key)
			}
			if used[s.Name] == nil {
				used[s.Name] = map[string]bool{}
			}
			used[s.Name][key] = true
		}
	}
	env := effectiveEnv(c, cms)
	found := 0
	for name, path := range env {
		if !strings.HasPrefix(name, "RECONCILER_") || !strings.HasSuffix(name, "_FILE") || path == "" {
			continue
		}
		found++
		if name != "RECONCILER_ACCOUNTS_FILE" {
			secretFile(name, path)
			continue
		}
		if !readsAccounts && !namesProviders {
			continue
		}
		v, key, ok := mountedFile(c, volumes, path)
		if !ok || v.ConfigMap == nil {
			fail("%s=%s is not in a mounted ConfigMap volume", name, path)
			continue
		}
		cm := cms[v.ConfigMap.Name]
		if cm == nil {
			continue // reported by the volume check
		}
		content, ok := cm.Data[key]
		if !ok {
			fail("%s=%s, but ConfigMap %s has no key %q", name, path, cm.Name, key)
			continue
		}
		accounts, err := loadAccounts(dir, content)
		if err != nil {
			fail("%s=%s (ConfigMap %s): %v", name, path, cm.Name, err)
			continue
		}
		if namesProviders {
			continue
		}
		for _, f := range accountFiles(accounts) {
			if callbackOnly(c, env) && f.field == "private_key_file" && strings.HasPrefix(f.account, "alipay ") {
				continue
			}
			secretFile(fmt.Sprintf("%s (%s %s)", name, f.account, f.field), f.path)
		}
	}
	if found == 0 {
		fail("mounts volumes but sees no *_FILE setting")
	}
	return problems, used
}

// effectiveEnv is what the container sees: its envFrom ConfigMaps, overridden by its env.
func effectiveEnv(c corev1.Container, cms map[string]*corev1.ConfigMap) map[string]string {
	env := map[string]string{}
	for _, ef := range c.EnvFrom {
		if ef.ConfigMapRef != nil && cms[ef.ConfigMapRef.Name] != nil {
			for k, v := range cms[ef.ConfigMapRef.Name].Data {
				env[ef.Prefix+k] = v
			}
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
		}
	}
	return env
}

// A SIGTERM must end in a drained exit (3 for run/backfill, 0 for serve), never a SIGKILL:
// every pod's grace period outlasts RECONCILER_DRAIN_TIMEOUT plus any preStop sleep.
func TestGracePeriodOutlastsDrain(t *testing.T) {
	ms := loadManifests(t)
	cms := map[string]*corev1.ConfigMap{}
	for _, m := range ms {
		if o, ok := m.obj.(*corev1.ConfigMap); ok {
			cms[m.name] = o
		}
	}
	for _, p := range pods(t, ms) {
		grace := 30 * time.Second // the Kubernetes default
		if p.spec.TerminationGracePeriodSeconds != nil {
			grace = time.Duration(*p.spec.TerminationGracePeriodSeconds) * time.Second
		}
		for _, c := range p.spec.Containers {
			drain := 30 * time.Second // the binary's default
			if v, ok := effectiveEnv(c, cms)["RECONCILER_DRAIN_TIMEOUT"]; ok {
				d, err := time.ParseDuration(v)
				if err != nil {
					t.Errorf("%s %s: RECONCILER_DRAIN_TIMEOUT %q: %v", p.where, c.Name, v, err)
					continue
				}
				drain = d
			}
			var preStop time.Duration
			if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
				preStop = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
			}
			if grace <= drain+preStop {
				t.Errorf("%s %s: terminationGracePeriodSeconds %s is not longer than drain %s + preStop %s", p.where, c.Name, grace, drain, preStop)
			}
		}
	}
}

// ---------------------------------------------------------------------------------------
// Merchant accounts and the shared call budget

// The accounts file: its ConfigMap and key, and where RECONCILER_ACCOUNTS_FILE points.
const (
	accountsConfigMap = "payrecon-accounts"
	accountsKey       = "accounts.yaml"
	accountsFilePath  = "/etc/payrecon/accounts/accounts.yaml"
)

// callsPlatforms are the subcommands that call the platforms with the accounts.
var callsPlatforms = []string{"run", "serve", "backfill", "statement"}

// The example accounts file is one the binary accepts: it loads strictly and passes the
// binary's own validation (ids, hex serials, https URLs, one credential mode per account,
// public key id and file together, no duplicate, positive qps) with its files in place, and
// it shows every credential mode.
func TestAccountsFile(t *testing.T) {
	ms := loadManifests(t)
	cm := only[corev1.ConfigMap](t, ms, "accounts-configmap.yaml")
	if cm.Name != accountsConfigMap || len(cm.Data) != 1 || cm.Data[accountsKey] == "" {
		t.Fatalf("ConfigMap %s with keys %v; want %s holding only %s", cm.Name, slices.Sorted(maps.Keys(cm.Data)), accountsConfigMap, accountsKey)
	}
	settings := only[corev1.ConfigMap](t, ms, "configmap.yaml")
	if got := settings.Data["RECONCILER_ACCOUNTS_FILE"]; got != accountsFilePath {
		t.Errorf("RECONCILER_ACCOUNTS_FILE = %q, want %q", got, accountsFilePath)
	}
	content := cm.Data[accountsKey]
	accounts, err := loadAccounts(t.TempDir(), content)
	if err != nil {
		t.Fatal(err)
	}

	// Each account names its budget: the platform's limit for it, not the default guess.
	for _, a := range accounts.Alipay {
		if a.QPS <= 0 {
			t.Errorf("alipay account %s: no qps (give the app's platform query limit)", a.AppID)
		}
	}
	for _, w := range accounts.WechatPay {
		if w.QPS <= 0 {
			t.Errorf("wechatpay account %s: no qps (give the merchant's platform query limit)", w.MchID)
		}
	}
	var alipayModes, wechatModes []string
	for _, a := range accounts.Alipay {
		alipayModes = append(alipayModes, a.Mode())
	}
	for _, w := range accounts.WechatPay {
		wechatModes = append(wechatModes, w.Mode())
	}
	slices.Sort(alipayModes)
	slices.Sort(wechatModes)
	if want := []string{"certificate", "public_key"}; !slices.Equal(alipayModes, want) || !slices.Equal(wechatModes, want) {
		t.Errorf("credential modes: alipay %v, wechatpay %v; want one account in each mode per platform (%v)", alipayModes, wechatModes, want)
	}

	// The binary's full validation needs the files to exist: put placeholders (test-only, not
	// keys: the loader only checks they are readable, and that an API v3 key is 32 bytes) in
	// a temporary directory standing in for each directory the accounts name.
	files := accountFiles(accounts)
	dir := t.TempDir()
	var dirs []string
	for _, f := range files {
		if d := filepath.Dir(f.path); !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	// Longest first, so that no directory's replacement rewrites part of a deeper one.
	slices.SortFunc(dirs, func(a, b string) int { return len(b) - len(a) })
	moved := map[string]string{}
	rewritten := content
	for i, d := range dirs {
		to := filepath.Join(dir, fmt.Sprint(i))
		if err := os.Mkdir(to, 0o700); err != nil {
			t.Fatal(err)
		}
		moved[d] = to
		rewritten = strings.ReplaceAll(rewritten, d+"/", to+"/")
	}
	for _, f := range files {
		placeholder := "test-only placeholder, not a key\n"
		if f.field == "apiv3_key_file" {
			placeholder = "0123456789abcdef0123456789abcdef\n"
		}
		path := filepath.Join(moved[filepath.Dir(f.path)], filepath.Base(f.path))
		if err := os.WriteFile(path, []byte(placeholder), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	accountsFile := filepath.Join(dir, accountsKey)
	if err := os.WriteFile(accountsFile, []byte(rewritten), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"RECONCILER_ACCOUNTS_FILE": accountsFile}
	loader := config.Register(flag.NewFlagSet("accounts", flag.ContinueOnError), config.GroupPlatforms, func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	})
	cfg, err := loader.Load()
	if err != nil {
		t.Fatalf("the binary would exit 2: %v", err)
	}
	if cfg.Accounts.Len() != 4 || len(cfg.Accounts.Alipay) != 2 {
		t.Errorf("loaded %d Alipay and %d WeChat Pay accounts, want 2 and 2", len(cfg.Accounts.Alipay), len(cfg.Accounts.WechatPay))
	}
}

// budgetProblems: how a container breaks the shared call budget. No container sets a *_QPS:
// each account's qps is in the accounts file, the platform's limit, and a per-process QPS is
// the hand-made split the shared budget replaced. Containers that call the platforms read
// the accounts file from the payrecon-accounts ConfigMap mounted where
// RECONCILER_ACCOUNTS_FILE points, set no single-account setting (it would add an account
// beside the file's), and get RECONCILER_REDIS_URL, where the budget lives, from a Secret.
func budgetProblems(c corev1.Container, cms map[string]*corev1.ConfigMap, secrets map[string]*corev1.Secret, volumes map[string]corev1.Volume) []string {
	var problems []string
	fail := func(format string, args ...any) {
		problems = append(problems, c.Name+": "+fmt.Sprintf(format, args...))
	}
	env := effectiveEnv(c, cms)
	names := slices.Collect(maps.Keys(env))
	for _, e := range c.Env {
		names = append(names, e.Name) // valueFrom entries too
	}
	slices.Sort(names)
	names = slices.Compact(names)
	for _, n := range names {
		if strings.HasSuffix(n, "_QPS") {
			fail("sets %s: each account's qps is in the accounts file and shared by every process through Redis", n)
		}
	}
	if len(c.Args) == 0 || !slices.Contains(callsPlatforms, c.Args[0]) {
		return problems
	}
	for _, n := range names {
		if strings.HasPrefix(n, "RECONCILER_ALIPAY_") || strings.HasPrefix(n, "RECONCILER_WECHATPAY_") {
			fail("sets %s: a single-account setting adds an account beside the accounts file's", n)
		}
	}
	if path := env["RECONCILER_ACCOUNTS_FILE"]; path == "" {
		fail("no RECONCILER_ACCOUNTS_FILE")
	} else if v, key, ok := mountedFile(c, volumes, path); !ok || v.ConfigMap == nil || v.ConfigMap.Name != accountsConfigMap || key != accountsKey {
		fail("RECONCILER_ACCOUNTS_FILE=%s is not %s of the mounted ConfigMap %s", path, accountsKey, accountsConfigMap)
	}
	if _, inConfigMap := env["RECONCILER_REDIS_URL"]; inConfigMap || slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool { return e.Name == "RECONCILER_REDIS_URL" }) {
		fail("RECONCILER_REDIS_URL set outside the Secret: the URL carries a password")
	}
	fromSecret := false
	for _, ef := range c.EnvFrom {
		if ef.SecretRef == nil || secrets[ef.SecretRef.Name] == nil {
			continue
		}
		key, ok := strings.CutPrefix("RECONCILER_REDIS_URL", ef.Prefix)
		s := secrets[ef.SecretRef.Name]
		if ok && (s.StringData[key] != "" || len(s.Data[key]) != 0) {
			fromSecret = true
		}
	}
	if !fromSecret {
		fail("gets no RECONCILER_REDIS_URL from a Secret: without Redis each process paces on its own at qps/n")
	}
	return problems
}

func TestSharedCallBudget(t *testing.T) {
	ms := loadManifests(t)
	cms, secrets := configMapsAndSecrets(ms)
	for name, cm := range cms {
		for k := range cm.Data {
			if strings.HasSuffix(k, "_QPS") {
				t.Errorf("ConfigMap %s sets %s: each account's qps belongs in the accounts file", name, k)
			}
		}
	}
	calling := 0
	for _, p := range pods(t, ms) {
		volumes := map[string]corev1.Volume{}
		for _, v := range p.spec.Volumes {
			volumes[v.Name] = v
		}
		for _, c := range allContainers(p.spec) {
			if len(c.Args) > 0 && slices.Contains(callsPlatforms, c.Args[0]) {
				calling++
			}
			for _, problem := range budgetProblems(c, cms, secrets, volumes) {
				t.Errorf("%s %s", p.where, problem)
			}
		}
	}
	if calling != 4 {
		t.Errorf("%d containers run %v, want 4 (run and statement CronJobs, backfill, serve)", calling, callsPlatforms)
	}
}

// serveFixture is the serve container of freshly decoded manifests, with what it refers
// to, for a test to break.
type serveFixture struct {
	c       *corev1.Container
	cms     map[string]*corev1.ConfigMap
	secrets map[string]*corev1.Secret
	volumes map[string]corev1.Volume
}

func newServeFixture(t *testing.T) serveFixture {
	t.Helper()
	ms := loadManifests(t)
	cms, secrets := configMapsAndSecrets(ms)
	spec := &only[appsv1.Deployment](t, ms, "serve-deployment.yaml").Spec.Template.Spec
	f := serveFixture{cms: cms, secrets: secrets, volumes: map[string]corev1.Volume{}}
	for i := range spec.Containers {
		if spec.Containers[i].Name == "reconciler" {
			f.c = &spec.Containers[i]
		}
	}
	if f.c == nil {
		t.Fatal("no reconciler container in serve-deployment.yaml")
	}
	for _, v := range spec.Volumes {
		f.volumes[v.Name] = v
	}
	return f
}

func (f serveFixture) unmount(volume string) {
	f.c.VolumeMounts = slices.DeleteFunc(f.c.VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.Name == volume })
}

func (f serveFixture) setEnv(name, value string) {
	f.c.Env = append(f.c.Env, corev1.EnvVar{Name: name, Value: value})
}

func (f serveFixture) editAccounts(t *testing.T, from, to string) {
	t.Helper()
	cm := f.cms[accountsConfigMap]
	edited := strings.Replace(cm.Data[accountsKey], from, to, 1)
	if edited == cm.Data[accountsKey] {
		t.Fatalf("the accounts file has no %q", from)
	}
	cm.Data[accountsKey] = edited
}

// The key-file and budget checks really do catch what a wrong edit produces.
func TestAccountChecksCatchMistakes(t *testing.T) {
	problems := func(t *testing.T, f serveFixture) []string {
		keys, _ := keyFileProblems(t.TempDir(), *f.c, f.cms, f.secrets, f.volumes)
		return append(keys, budgetProblems(*f.c, f.cms, f.secrets, f.volumes)...)
	}
	if got := problems(t, newServeFixture(t)); len(got) != 0 {
		t.Fatalf("the manifests as they are: %q", got)
	}
	cases := []struct {
		name    string
		mistake func(t *testing.T, f serveFixture)
		want    string
	}{
		{"a key file missing from the Secret", func(t *testing.T, f serveFixture) {
			delete(f.secrets["payrecon-keys"].StringData, "wechatpay-1900000002-apiv3.key")
		}, `(wechatpay account 1900000002 apiv3_key_file)=/etc/payrecon/keys/wechatpay-1900000002-apiv3.key, but Secret payrecon-keys has no key`},
		{"an account's key outside the Secret", func(t *testing.T, f serveFixture) {
			f.editAccounts(t, "/etc/payrecon/keys/alipay-2021000000000002-alipayRootCert.crt", "/etc/payrecon/alipayRootCert.crt")
		}, "(alipay account 2021000000000002 alipay_root_cert_file)=/etc/payrecon/alipayRootCert.crt is not in any mounted volume"},
		{"an unknown field in the accounts file", func(t *testing.T, f serveFixture) {
			f.editAccounts(t, "seller_id:", "seller:")
		}, "unknown field seller"},
		{"the Secret not mounted", func(t *testing.T, f serveFixture) { f.unmount("keys") }, "is not in any mounted volume"},
		{"the accounts file not mounted", func(t *testing.T, f serveFixture) { f.unmount("accounts") }, "is not in a mounted ConfigMap volume"},
		{"the accounts file misnamed", func(t *testing.T, f serveFixture) {
			f.setEnv("RECONCILER_ACCOUNTS_FILE", "/etc/payrecon/accounts/account.yaml")
		}, `ConfigMap payrecon-accounts has no key "account.yaml"`},
		{"no accounts file", func(t *testing.T, f serveFixture) {
			delete(f.cms["payrecon-config"].Data, "RECONCILER_ACCOUNTS_FILE")
		}, "no RECONCILER_ACCOUNTS_FILE"},
		{"a per-pod QPS in env", func(t *testing.T, f serveFixture) { f.setEnv("RECONCILER_WECHATPAY_QPS", "5") }, "sets RECONCILER_WECHATPAY_QPS"},
		{"a QPS in the settings ConfigMap", func(t *testing.T, f serveFixture) {
			f.cms["payrecon-config"].Data["RECONCILER_ALIPAY_QPS"] = "20"
		}, "sets RECONCILER_ALIPAY_QPS"},
		{"a single-account setting beside the file", func(t *testing.T, f serveFixture) {
			f.cms["payrecon-config"].Data["RECONCILER_ALIPAY_APP_ID"] = "2021000000000009"
		}, "sets RECONCILER_ALIPAY_APP_ID: a single-account setting"},
		{"no Redis", func(t *testing.T, f serveFixture) {
			f.c.EnvFrom = slices.DeleteFunc(f.c.EnvFrom, func(ef corev1.EnvFromSource) bool { return ef.SecretRef != nil })
		}, "gets no RECONCILER_REDIS_URL from a Secret"},
		{"the Redis URL in the settings ConfigMap", func(t *testing.T, f serveFixture) {
			f.cms["payrecon-config"].Data["RECONCILER_REDIS_URL"] = "redis://redis:6379/0"
		}, "RECONCILER_REDIS_URL set outside the Secret"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newServeFixture(t)
			c.mistake(t, f)
			got := problems(t, f)
			if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, c.want) }) {
				t.Errorf("problems %q; want one containing %q", got, c.want)
			}
		})
	}
}

// ---------------------------------------------------------------------------------------
// The statement CronJob

// The daily bill: 10:30 China time, retried (exit 1) while the bill is not published, with a
// deadline on the whole Job; bad configuration (exit 2) fails at once.
func TestStatementCronJob(t *testing.T) {
	ms := loadManifests(t)
	cj := only[batchv1.CronJob](t, ms, "statement-cronjob.yaml")
	s := cj.Spec
	if s.Schedule != "30 10 * * *" || s.TimeZone == nil || *s.TimeZone != "Asia/Shanghai" {
		t.Errorf("schedule %q zone %v; want 30 10 * * * in Asia/Shanghai", s.Schedule, s.TimeZone)
	}
	if s.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		t.Errorf("concurrencyPolicy %q, want Forbid", s.ConcurrencyPolicy)
	}
	js := s.JobTemplate.Spec
	if js.BackoffLimit == nil || *js.BackoffLimit < 6 {
		t.Errorf("backoffLimit %v: too few retries to wait for a late bill", js.BackoffLimit)
	}
	// The Job's back-off doubles from 10 s up to 6 minutes: the deadline must leave room for
	// every retry, or the last ones never happen.
	var backoff int64
	for i, d := int32(0), int64(10); js.BackoffLimit != nil && i < *js.BackoffLimit; i, d = i+1, min(2*d, 360) {
		backoff += d
	}
	if js.ActiveDeadlineSeconds == nil || *js.ActiveDeadlineSeconds < backoff {
		t.Errorf("activeDeadlineSeconds %v shorter than the retries' back-off (%d s)", js.ActiveDeadlineSeconds, backoff)
	}
	c := container(t, js.Template.Spec.Containers, "reconciler")
	if !slices.Equal(c.Args, []string{"statement"}) {
		t.Errorf("args %q, want [statement] (every account, yesterday)", c.Args)
	}
	if js.PodFailurePolicy == nil {
		t.Fatal("no podFailurePolicy")
	}
	for _, r := range js.PodFailurePolicy.Rules {
		if r.OnExitCodes != nil && slices.Contains(r.OnExitCodes.Values, 1) {
			t.Errorf("rule %+v acts on exit 1: a bill not ready yet must be retried (counted)", r)
		}
	}
}

// The internet-facing callbacks pod holds no Alipay private key: none of the files the
// accounts name as an Alipay private_key_file is mounted in its reconciler container, while
// every file it verifies with is (keyFileProblems checks those).
func TestCallbackPodMountsNoAlipayPrivateKey(t *testing.T) {
	f := newServeFixture(t)
	env := effectiveEnv(*f.c, f.cms)
	if !callbackOnly(*f.c, env) {
		t.Fatalf("serve-deployment.yaml runs %v: the callbacks pod is expected to run serve without a schedule", f.c.Args)
	}
	accounts, err := loadAccounts(t.TempDir(), f.cms[accountsConfigMap].Data[accountsKey])
	if err != nil {
		t.Fatal(err)
	}
	if len(accounts.Alipay) == 0 {
		t.Fatal("the example accounts file has no Alipay account to check")
	}
	for _, a := range accounts.Alipay {
		if _, key, ok := mountedFile(*f.c, f.volumes, a.PrivateKeyFile); ok {
			t.Errorf("alipay account %s: its private key %s is mounted (Secret key %q) in the callbacks pod", a.AppID, a.PrivateKeyFile, key)
		}
	}
	if problems, _ := keyFileProblems(t.TempDir(), *f.c, f.cms, f.secrets, f.volumes); len(problems) != 0 {
		t.Errorf("the callbacks pod lacks files it verifies with: %q", problems)
	}
	// The check has teeth: a container with a schedule signs requests and needs the keys.
	f.setEnv("RECONCILER_SCHEDULE", "*/5 * * * *")
	if problems, _ := keyFileProblems(t.TempDir(), *f.c, f.cms, f.secrets, f.volumes); len(problems) == 0 {
		t.Error("serve with a schedule and no Alipay private key mounted passed the key-file check")
	}
}

// The console pod mounts the accounts file, which it reads to name each sub-merchant's
// provider, and none of the key files the file names: the file checks pass with no key
// Secret mounted (the console opens none), and fail when the file itself is not mounted.
func TestConsolePodMountsTheAccountsFileAndNoKey(t *testing.T) {
	ms := loadManifests(t)
	cms, secrets := configMapsAndSecrets(ms)
	spec := &only[appsv1.Deployment](t, ms, "console-deployment.yaml").Spec.Template.Spec
	c := container(t, spec.Containers, "reconciler")
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
		if v.Secret != nil && v.Secret.SecretName == "payrecon-keys" {
			t.Errorf("the console pod mounts the key Secret as volume %s", v.Name)
		}
	}
	if path := effectiveEnv(c, cms)["RECONCILER_ACCOUNTS_FILE"]; path != accountsFilePath {
		t.Fatalf("the console sees RECONCILER_ACCOUNTS_FILE=%q, want %s", path, accountsFilePath)
	}
	problems, used := keyFileProblems(t.TempDir(), c, cms, secrets, volumes)
	if len(problems) != 0 {
		t.Errorf("the console's files: %q", problems)
	}
	if len(used["payrecon-keys"]) != 0 {
		t.Errorf("the console reads keys of payrecon-keys: %v", used["payrecon-keys"])
	}
	c.VolumeMounts = slices.DeleteFunc(c.VolumeMounts, func(vm corev1.VolumeMount) bool { return vm.Name == "accounts" })
	if problems, _ := keyFileProblems(t.TempDir(), c, cms, secrets, volumes); !slices.ContainsFunc(problems, func(p string) bool {
		return strings.Contains(p, "RECONCILER_ACCOUNTS_FILE") && strings.Contains(p, "is not in a mounted ConfigMap volume")
	}) {
		t.Errorf("a console without the accounts file mounted passed the check: %q", problems)
	}
}
