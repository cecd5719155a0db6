package deploy

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// The Secrets, by what they hold (secret.example.yaml).
const (
	ownerSecret    = "payrecon-migrate"  // the schema owner's URL: DDL, and creating the roles
	workerSecret   = "payrecon-worker"   // payrecon_worker's URL and the Redis URL
	reviewerSecret = "payrecon-reviewer" // payrecon_reviewer's URL: review columns and audit rows
	keysSecret     = "payrecon-keys"     // the merchants' keys and the platforms' verifying files
	signInSecret   = "payrecon-review"   // the console's OIDC client, cookie secret and form key
)

// wantSecrets is, for every workload of the manifests (the kustomization's, and the backfill
// Job created by hand), exactly the Secrets its pods read. A workload not listed here, or
// reading one Secret more or less, fails TestEachPodHoldsOnlyItsCredentials.
var wantSecrets = map[string][]string{
	"Job/payrecon-migrate":           {ownerSecret},
	"CronJob/payrecon-reconcile":     {keysSecret, workerSecret},
	"CronJob/payrecon-statement":     {keysSecret, workerSecret},
	"Job/payrecon-backfill-20261101": {keysSecret, workerSecret},
	"Deployment/payrecon-callbacks":  {keysSecret, workerSecret},
	"Deployment/payrecon-console":    {reviewerSecret, signInSecret},
}

// onlyHolder is, for the credentials no second workload may hold whatever wantSecrets says,
// the one workload that may.
var onlyHolder = map[string]string{
	ownerSecret:    "Job/payrecon-migrate",
	reviewerSecret: "Deployment/payrecon-console",
	signInSecret:   "Deployment/payrecon-console",
}

// workload is one object that runs pods, with its pod template (a pointer, so that a test can
// break it).
type workload struct {
	id   string // Kind/name
	file string
	spec *corev1.PodSpec
}

func workloadsOf(ms []manifest) []workload {
	var out []workload
	for _, m := range ms {
		var spec *corev1.PodSpec
		switch o := m.obj.(type) {
		case *batchv1.CronJob:
			spec = &o.Spec.JobTemplate.Spec.Template.Spec
		case *batchv1.Job:
			spec = &o.Spec.Template.Spec
		case *appsv1.Deployment:
			spec = &o.Spec.Template.Spec
		default:
			continue
		}
		out = append(out, workload{id: m.kind + "/" + m.name, file: m.file, spec: spec})
	}
	return out
}

// secretsOf lists, sorted, every Secret a pod template reads, in any of the ways a pod can:
// envFrom, one key through env valueFrom, a Secret volume or a projected volume's source, in
// any container, init containers included.
func secretsOf(spec corev1.PodSpec) []string {
	var out []string
	for _, c := range allContainers(spec) {
		for _, ef := range c.EnvFrom {
			if ef.SecretRef != nil {
				out = append(out, ef.SecretRef.Name)
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
				out = append(out, e.ValueFrom.SecretKeyRef.Name)
			}
		}
	}
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			out = append(out, v.Secret.SecretName)
		}
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.Secret != nil {
					out = append(out, src.Secret.Name)
				}
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// credentialProblems: how the workloads break who-holds-what. Each reads exactly its
// wantSecrets; the owner's, the reviewer's and the sign-in Secret are each held by their one
// workload; only the migrate Job runs migrate (no initContainer does); nothing but the
// console pods runs the console or its sign-in sidecar.
func credentialProblems(ws []workload) []string {
	var problems []string
	fail := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	seen := map[string]bool{}
	for _, w := range ws {
		seen[w.id] = true
		got := secretsOf(*w.spec)
		want, ok := wantSecrets[w.id]
		want = slices.Sorted(slices.Values(want))
		switch {
		case !ok:
			fail("%s (%s) reads Secrets %v and is not in wantSecrets: decide what it may hold", w.id, w.file, got)
		case !slices.Equal(got, want):
			fail("%s (%s) reads Secrets %v, want exactly %v", w.id, w.file, got, want)
		}
		for _, s := range got {
			if holder, ok := onlyHolder[s]; ok && holder != w.id {
				fail("%s (%s) reads %s, which only %s may hold", w.id, w.file, s, holder)
			}
		}
		for _, c := range allContainers(*w.spec) {
			problems = append(problems, commandProblems(w, c)...)
		}
	}
	for id := range wantSecrets {
		if !seen[id] {
			fail("%s is in wantSecrets but in no manifest: a renamed workload escapes the check", id)
		}
	}
	slices.Sort(problems)
	return problems
}

// commandProblems: migrate runs in the migrate Job only, and `console` (or the sign-in
// sidecar in front of it) in the console pods only, so serve's pods can never start it.
func commandProblems(w workload, c corev1.Container) []string {
	var problems []string
	console := onlyHolder[reviewerSecret]
	runs := func(sub string) bool { return slices.Contains(c.Args, sub) || slices.Contains(c.Command, sub) }
	if runs("migrate") && w.id != onlyHolder[ownerSecret] {
		problems = append(problems, fmt.Sprintf("%s (%s) container %s runs migrate: only the migrate Job does", w.id, w.file, c.Name))
	}
	if (runs("console") || isReviewProxy(c) || strings.Contains(c.Image, "oauth2-proxy")) && w.id != console {
		problems = append(problems, fmt.Sprintf("%s (%s) container %s (%q %q) starts the review console or its sign-in proxy: only %s does", w.id, w.file, c.Name, c.Image, c.Args, console))
	}
	return problems
}

// TestEachPodHoldsOnlyItsCredentials: the migrate Job alone holds the schema owner's URL; the
// console alone the reviewer's (and its sign-in secrets), and nothing of the worker's or the
// merchants' keys; serve, the CronJobs and the backfill the worker's and the keys; serve runs
// nothing that would start the console.
func TestEachPodHoldsOnlyItsCredentials(t *testing.T) {
	ms := loadManifests(t)
	for _, p := range credentialProblems(workloadsOf(ms)) {
		t.Error(p)
	}
	serve := container(t, only[appsv1.Deployment](t, ms, "serve-deployment.yaml").Spec.Template.Spec.Containers, "reconciler")
	if !slices.Equal(serve.Args, []string{"serve"}) {
		t.Errorf("serve-deployment.yaml runs %q, want [serve]: callbacks only", serve.Args)
	}
	console := container(t, only[appsv1.Deployment](t, ms, "console-deployment.yaml").Spec.Template.Spec.Containers, "reconciler")
	if !slices.Equal(console.Args, []string{"console"}) {
		t.Errorf("console-deployment.yaml runs %q, want [console]", console.Args)
	}
}

// TestCredentialChecksCatchMistakes: each way of handing a pod a credential it must not hold
// (envFrom, one key through env, a Secret volume, a projected volume, an initContainer), or
// of starting the console beside the callbacks, is caught.
func TestCredentialChecksCatchMistakes(t *testing.T) {
	find := func(t *testing.T, ws []workload, id string) *corev1.PodSpec {
		t.Helper()
		for _, w := range ws {
			if w.id == id {
				return w.spec
			}
		}
		t.Fatalf("no workload %s", id)
		return nil
	}
	reconciler := func(s *corev1.PodSpec) *corev1.Container {
		for i := range s.Containers {
			if s.Containers[i].Name == "reconciler" {
				return &s.Containers[i]
			}
		}
		return nil
	}
	envFrom := func(secret string) corev1.EnvFromSource {
		return corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: secret}}}
	}
	cases := []struct {
		name, workload string
		mistake        func(s *corev1.PodSpec)
		want           string
	}{
		{"the owner's URL in serve through envFrom", "Deployment/payrecon-callbacks", func(s *corev1.PodSpec) {
			c := reconciler(s)
			c.EnvFrom = append(c.EnvFrom, envFrom(ownerSecret))
		}, "reads payrecon-migrate, which only Job/payrecon-migrate may hold"},
		{"a migrate initContainer back in the CronJob", "CronJob/payrecon-reconcile", func(s *corev1.PodSpec) {
			s.InitContainers = append(s.InitContainers, corev1.Container{Name: "migrate", Image: imageName, Args: []string{"migrate"},
				EnvFrom: []corev1.EnvFromSource{envFrom(ownerSecret)}})
		}, "runs migrate: only the migrate Job does"},
		{"the owner's URL as one env key in the console", "Deployment/payrecon-console", func(s *corev1.PodSpec) {
			c := reconciler(s)
			c.Env = append(c.Env, corev1.EnvVar{Name: "RECONCILER_DATABASE_URL", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: ownerSecret}, Key: "RECONCILER_DATABASE_URL"}}})
		}, "Deployment/payrecon-console (console-deployment.yaml) reads payrecon-migrate"},
		{"the owner's Secret as a volume of the statement CronJob", "CronJob/payrecon-statement", func(s *corev1.PodSpec) {
			s.Volumes = append(s.Volumes, corev1.Volume{Name: "owner", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: ownerSecret}}})
		}, "CronJob/payrecon-statement (statement-cronjob.yaml) reads payrecon-migrate"},
		{"the owner's Secret projected into the backfill", "Job/payrecon-backfill-20261101", func(s *corev1.PodSpec) {
			s.Volumes = append(s.Volumes, corev1.Volume{Name: "all", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: ownerSecret}}}}}}})
		}, "Job/payrecon-backfill-20261101 (backfill-indexed-job.yaml) reads payrecon-migrate"},
		{"the reviewer's URL back in serve", "Deployment/payrecon-callbacks", func(s *corev1.PodSpec) {
			c := reconciler(s)
			c.Env = append(c.Env, corev1.EnvVar{Name: "RECONCILER_REVIEW_DATABASE_URL", ValueFrom: &corev1.EnvVarSource{
				SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: reviewerSecret}, Key: "RECONCILER_DATABASE_URL"}}})
		}, "reads payrecon-reviewer, which only Deployment/payrecon-console may hold"},
		{"the merchants' keys in the console", "Deployment/payrecon-console", func(s *corev1.PodSpec) {
			s.Volumes = append(s.Volumes, corev1.Volume{Name: "keys", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: keysSecret}}})
		}, "want exactly [payrecon-review payrecon-reviewer]"},
		{"the worker's URL in the console", "Deployment/payrecon-console", func(s *corev1.PodSpec) {
			c := reconciler(s)
			c.EnvFrom = append(c.EnvFrom, envFrom(workerSecret))
		}, "want exactly [payrecon-review payrecon-reviewer]"},
		{"serve starting the console", "Deployment/payrecon-callbacks", func(s *corev1.PodSpec) {
			s.Containers = append(s.Containers, corev1.Container{Name: "console", Image: imageName, Args: []string{"console"}})
		}, "starts the review console or its sign-in proxy"},
		{"the sign-in sidecar back in serve", "Deployment/payrecon-callbacks", func(s *corev1.PodSpec) {
			s.Containers = append(s.Containers, corev1.Container{Name: proxyContainer, Image: proxyImage})
		}, "starts the review console or its sign-in proxy"},
	}
	if got := credentialProblems(workloadsOf(loadManifests(t))); len(got) != 0 {
		t.Fatalf("the manifests as they are: %q", got)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ws := workloadsOf(loadManifests(t))
			c.mistake(find(t, ws, c.workload))
			got := credentialProblems(ws)
			if !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, c.want) }) {
				t.Errorf("problems %q; want one containing %q", got, c.want)
			}
		})
	}
	// A new workload nobody decided on fails too, whatever it holds.
	ws := append(workloadsOf(loadManifests(t)), workload{id: "Deployment/payrecon-new", file: "new.yaml", spec: &corev1.PodSpec{}})
	if got := credentialProblems(ws); !slices.ContainsFunc(got, func(p string) bool { return strings.Contains(p, "is not in wantSecrets") }) {
		t.Errorf("an unlisted workload passed: %q", got)
	}
}
