package deploy

import (
	"encoding/json"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// There is no Docker engine in CI, so the image cannot be built here; these tests read the
// Dockerfile and check the properties the deployment relies on.

const (
	dockerfilePath   = "../Dockerfile"
	dockerignorePath = "../.dockerignore"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	line int
	cmd  string // upper case: FROM, RUN, ...
	args string
}

// stage is one FROM and the instructions under it.
type stage struct {
	from  string // the image
	alias string // AS name, lower case
	ins   []instruction
}

func (s stage) all(cmd string) []instruction {
	var out []instruction
	for _, in := range s.ins {
		if in.cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}

func (s stage) last(cmd string) (instruction, bool) {
	all := s.all(cmd)
	if len(all) == 0 {
		return instruction{}, false
	}
	return all[len(all)-1], true
}

func parseDockerfile(t *testing.T, text string) []stage {
	t.Helper()
	var ins []instruction
	var cur strings.Builder
	start := 0
	for i, raw := range strings.Split(text, "\n") {
		line := strings.TrimSpace(raw)
		if cur.Len() == 0 && (line == "" || strings.HasPrefix(line, "#")) {
			continue // blank, comment or parser directive
		}
		if cur.Len() > 0 && strings.HasPrefix(line, "#") {
			continue // comment inside a continued instruction
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if body, ok := strings.CutSuffix(line, `\`); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(line)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		ins = append(ins, instruction{start, strings.ToUpper(cmd), strings.Join(strings.Fields(args), " ")})
		cur.Reset()
	}
	if cur.Len() > 0 {
		t.Fatalf("Dockerfile ends inside a continued instruction")
	}
	var stages []stage
	for _, in := range ins {
		if in.cmd == "FROM" {
			f := strings.Fields(in.args)
			for len(f) > 0 && strings.HasPrefix(f[0], "--") {
				f = f[1:] // --platform=...
			}
			if len(f) == 0 {
				t.Fatalf("line %d: FROM without an image", in.line)
			}
			st := stage{from: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.alias = strings.ToLower(f[2])
			}
			stages = append(stages, st)
			continue
		}
		if len(stages) == 0 {
			if in.cmd != "ARG" {
				t.Fatalf("line %d: %s before the first FROM", in.line, in.cmd)
			}
			continue
		}
		stages[len(stages)-1].ins = append(stages[len(stages)-1].ins, in)
	}
	return stages
}

// execForm decodes an instruction in JSON exec form (["a", "b"]); shell form is an error.
func execForm(t *testing.T, in instruction) []string {
	t.Helper()
	var v []string
	if err := json.Unmarshal([]byte(in.args), &v); err != nil {
		t.Errorf("line %d: %s %s is not in exec form (a JSON array): %v", in.line, in.cmd, in.args, err)
	}
	return v
}

func TestDockerfile(t *testing.T) {
	b, err := os.ReadFile(dockerfilePath)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	stages := parseDockerfile(t, text)
	if len(stages) < 2 {
		t.Fatalf("%d stage(s); want a multi-stage build", len(stages))
	}
	build, final := stages[0], stages[len(stages)-1]

	t.Run("build stage", func(t *testing.T) {
		if build.from != "golang:1.26" && !strings.HasPrefix(build.from, "golang:1.26-") && !strings.HasPrefix(build.from, "golang:1.26.") {
			t.Errorf("build stage FROM %s, want golang:1.26", build.from)
		}
		if build.alias == "" {
			t.Errorf("build stage has no AS name for COPY --from")
		}
		var goBuild instruction
		for _, in := range build.all("RUN") {
			if strings.Contains(in.args, "go build") {
				goBuild = in
			}
		}
		if goBuild.cmd == "" {
			t.Fatal("no RUN go build")
		}
		cgoOff := strings.Contains(goBuild.args, "CGO_ENABLED=0")
		for _, in := range build.all("ENV") {
			if regexp.MustCompile(`(^|\s)CGO_ENABLED[= ]0(\s|$)`).MatchString(in.args) {
				cgoOff = true
			}
		}
		if !cgoOff {
			t.Errorf("CGO_ENABLED=0 is not set for go build: the binary must be static")
		}
		for _, want := range []string{"-trimpath", `-ldflags "-s -w"`, "-o /out/reconciler", "./cmd/reconciler"} {
			if !strings.Contains(goBuild.args, want) {
				t.Errorf("line %d: go build lacks %s: %s", goBuild.line, want, goBuild.args)
			}
		}
	})

	t.Run("final stage", func(t *testing.T) {
		distroless := strings.HasPrefix(final.from, "gcr.io/distroless/static") && strings.HasSuffix(final.from, ":nonroot")
		scratch := final.from == "scratch"
		if !distroless && !scratch {
			t.Errorf("final stage FROM %s, want gcr.io/distroless/static-debian12:nonroot or scratch", final.from)
		}
		copied := false
		for _, in := range final.all("COPY") {
			if strings.Contains(in.args, "--from="+build.alias) && strings.HasSuffix(in.args, "/out/reconciler /reconciler") {
				copied = true
			}
		}
		if !copied {
			t.Errorf("final stage does not COPY --from=%s /out/reconciler /reconciler", build.alias)
		}
		if scratch && !strings.Contains(text, "ca-certificates") {
			t.Errorf("a scratch image needs the CA certificates copied: the platforms are HTTPS")
		}
		user, ok := final.last("USER")
		if !ok {
			t.Fatal("final stage sets no USER")
		}
		uid, _, _ := strings.Cut(user.args, ":")
		// A numeric uid lets Kubernetes' runAsNonRoot verify it; a name cannot be checked.
		if n, err := strconv.Atoi(uid); err != nil || n == 0 {
			t.Errorf("line %d: USER %s, want a numeric non-root uid such as 65532", user.line, user.args)
		}
		if in, ok := final.last("ENTRYPOINT"); !ok {
			t.Error("no ENTRYPOINT")
		} else if v := execForm(t, in); len(v) != 1 || v[0] != "/reconciler" {
			t.Errorf("ENTRYPOINT %q, want [\"/reconciler\"]", v)
		}
		if in, ok := final.last("CMD"); !ok {
			t.Error("no CMD")
		} else if v := execForm(t, in); len(v) != 1 || v[0] != "run" {
			t.Errorf("CMD %q, want [\"run\"]", v)
		}
		exposed := false
		for _, in := range final.all("EXPOSE") {
			for _, p := range strings.Fields(in.args) {
				exposed = exposed || p == "8080" || p == "8080/tcp"
			}
		}
		if !exposed {
			t.Error("EXPOSE 8080 missing")
		}
	})

	t.Run("time zones come from the binary", func(t *testing.T) {
		for _, s := range stages {
			for _, in := range s.ins {
				if strings.Contains(in.args, "zoneinfo") || regexp.MustCompile(`(^|\s)(TZ|ZONEINFO)[= ]`).MatchString(in.args) && in.cmd == "ENV" {
					t.Errorf("line %d: %s %s relies on the image's zone files", in.line, in.cmd, in.args)
				}
			}
		}
		// ... which holds only if the config package embeds the zone database.
		files, _ := filepath.Glob("../config/*.go")
		embedded := false
		fset := token.NewFileSet()
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			af, err := parser.ParseFile(fset, f, nil, parser.ImportsOnly)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range af.Imports {
				embedded = embedded || imp.Path.Value == `"time/tzdata"`
			}
		}
		if !embedded {
			t.Error(`package config no longer imports _ "time/tzdata": RECONCILER_TIMEZONE would fail in the image`)
		}
	})
}

func TestParseDockerfile(t *testing.T) {
	st := parseDockerfile(t, "# syntax=docker/dockerfile:1\nARG V=1\nFROM --platform=$BUILDPLATFORM golang:1.26 AS Build\nRUN a \\\n  # note\n  b\nFROM scratch\nUSER 1:1\n")
	if len(st) != 2 || st[0].alias != "build" || st[0].from != "golang:1.26" || st[1].from != "scratch" {
		t.Fatalf("stages = %+v", st)
	}
	if r := st[0].all("RUN"); len(r) != 1 || r[0].args != "a b" || r[0].line != 4 {
		t.Fatalf("RUN = %+v", r)
	}
}

func TestDockerignore(t *testing.T) {
	b, err := os.ReadFile(dockerignorePath)
	if err != nil {
		t.Fatal(err)
	}
	patterns := map[string]bool{}
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if l != "" && !strings.HasPrefix(l, "#") {
			patterns[strings.TrimSuffix(strings.TrimPrefix(l, "/"), "/")] = true
		}
	}
	for _, p := range []string{".git", "bin", "**/*.test", "**/*.out"} {
		if !patterns[p] {
			t.Errorf(".dockerignore does not exclude %s", p)
		}
	}
	// What the build needs must stay in the context.
	for _, need := range []string{"go.mod", "go.sum", "cmd", "cmd/reconciler", "config", "reconcile", "platformclient", "repo", "repo/postgres/migrations/0001.sql"} {
		for p := range patterns {
			if strings.HasPrefix(p, "!") {
				continue
			}
			if m, _ := filepath.Match(p, need); m || p == "*" || p == "**" {
				t.Errorf(".dockerignore pattern %q excludes %s, which the build needs", p, need)
			}
		}
	}
}
