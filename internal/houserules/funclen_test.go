package houserules

import (
	"os"
	"path/filepath"
	"testing"
)

// TestNoFunctionOverTheLimit holds every non-test function of the module to Limit lines and
// logs the five longest (go test -v shows them).
func TestNoFunctionOverTheLimit(t *testing.T) {
	funcs, err := Measure(repoRoot)
	readEnough(t, err, len(funcs), 100, "functions")
	for i, f := range funcs[:5] {
		t.Logf("#%d %s:%d %s: %d lines", i+1, f.File, f.Line, f.Name, f.Lines)
	}
	for _, f := range funcs {
		if f.Lines > Limit {
			t.Errorf("%s:%d %s is %d lines, over %d: split it", f.File, f.Line, f.Name, f.Lines, Limit)
		}
	}
}

// TestMeasureCountsSignatureToClosingBrace pins what a line count means, on a file of known
// shape.
func TestMeasureCountsSignatureToClosingBrace(t *testing.T) {
	dir := t.TempDir()
	src := "package x\n\nfunc a() {\n\tprintln()\n}\n\ntype T struct{}\n\nfunc (t *T) b() {}\n"
	if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "x_test.go"), []byte("package x\n\nfunc c() {\n\n\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	funcs, err := Measure(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(funcs) != 2 || funcs[0].Name != "a" || funcs[0].Lines != 3 || funcs[1].Name != "T.b" || funcs[1].Lines != 1 {
		t.Fatalf("got %+v, want a (3 lines) and T.b (1 line), the test file skipped", funcs)
	}
}

// repoRoot is the repository, two folders up from this package.
var repoRoot = filepath.Join("..", "..")

// readEnough fails the test when reading the repository failed or found fewer than min
// things: a wrong root would otherwise pass every rule.
func readEnough(t *testing.T, err error, n, min int, what string) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if n < min {
		t.Fatalf("read only %d %s under %s: is the root right?", n, what, repoRoot)
	}
}
