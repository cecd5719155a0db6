package sandbox_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/payrecon/payrecon/platformclient"
	"github.com/payrecon/payrecon/platformclient/alipay"
	"github.com/payrecon/payrecon/platformclient/wechatpay"
	"github.com/payrecon/payrecon/reconcile"
	"github.com/payrecon/payrecon/sandbox"
)

// syncBuffer is a bytes.Buffer safe to write from Run's goroutine and read here.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Len()
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// runSandbox starts Run in the background and returns its base URL and a stop function.
func runSandbox(t *testing.T, dir string, out io.Writer) (string, func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- sandbox.Run(ctx, sandbox.RunOptions{Listen: "127.0.0.1:0", KeysDir: dir, Keys: testKeys(t), Stdout: out,
			Ready: func(u string) { ready <- u }})
	}()
	select {
	case u := <-ready:
		return u, func() error { cancel(); return <-done }
	case err := <-done:
		cancel()
		t.Fatalf("Run: %v", err)
	case <-time.After(10 * time.Second):
		cancel()
		t.Fatal("Run did not start")
	}
	return "", nil
}

// TestRunWritesUsableKeyFiles runs the standalone sandbox, configures both clients only from
// the files it wrote (as a reconciler would), and checks a restart keeps the identity.
func TestRunWritesUsableKeyFiles(t *testing.T) {
	dir := t.TempDir()
	var out syncBuffer
	base, stop := runSandbox(t, dir, &out)

	files := map[string]string{}
	for _, line := range strings.Split(out.String(), "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), "="); ok && strings.HasPrefix(k, "RECONCILER_") {
			files[k] = v
		}
	}
	read := func(k string) []byte {
		b, err := os.ReadFile(files[k])
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		return b
	}
	for _, k := range []string{"RECONCILER_ALIPAY_PRIVATE_KEY_FILE", "RECONCILER_WECHATPAY_PRIVATE_KEY_FILE", "RECONCILER_WECHATPAY_APIV3_KEY_FILE"} {
		if fi, err := os.Stat(files[k]); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v %v, want mode 0600", k, fi.Mode(), err)
		}
	}
	apriv, err := platformclient.LoadPrivateKey(read("RECONCILER_ALIPAY_PRIVATE_KEY_FILE"))
	must(t, err)
	apub, err := platformclient.LoadPublicKey(read("RECONCILER_ALIPAY_PUBLIC_KEY_FILE"))
	must(t, err)
	wpriv, err := platformclient.LoadPrivateKey(read("RECONCILER_WECHATPAY_PRIVATE_KEY_FILE"))
	must(t, err)
	wpub, err := platformclient.LoadPublicKey(read("RECONCILER_WECHATPAY_PUBLIC_KEY_FILE"))
	must(t, err)
	v3, err := wechatpay.ParseAPIv3Key(read("RECONCILER_WECHATPAY_APIV3_KEY_FILE"))
	must(t, err)

	ac, err := alipay.New(alipay.Config{Gateway: files["RECONCILER_ALIPAY_GATEWAY"], AppID: files["RECONCILER_ALIPAY_APP_ID"],
		PrivateKey: apriv, AlipayPublicKey: apub})
	must(t, err)
	wc, err := wechatpay.New(wechatpay.Config{BaseURL: files["RECONCILER_WECHATPAY_BASE_URL"], MchID: files["RECONCILER_WECHATPAY_MCHID"],
		SerialNo: files["RECONCILER_WECHATPAY_SERIAL_NO"], PrivateKey: wpriv, PlatformPublicKey: wpub,
		PublicKeyID: files["RECONCILER_WECHATPAY_PUBLIC_KEY_ID"], APIv3Key: v3})
	must(t, err)

	call(t, "PUT", base+"/sandbox/scenarios/alipay/F1", `{"state":"paid","amount_minor":100}`)
	call(t, "PUT", base+"/sandbox/scenarios/wechatpay/F2", `{"state":"open","amount_minor":100}`)
	if res, err := ac.Query(context.Background(), "F1"); err != nil || res.State != reconcile.StatePaid {
		t.Fatalf("alipay from files: %+v, %v", res, err)
	}
	if res, err := wc.Query(context.Background(), "F2"); err != nil || res.State != reconcile.StateOpen {
		t.Fatalf("wechatpay from files: %+v, %v", res, err)
	}
	if err := stop(); err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
	if !strings.Contains(out.String(), "generated into") {
		t.Fatalf("first run output: %s", out.String())
	}

	var out2 syncBuffer
	_, stop2 := runSandbox(t, dir, &out2)
	must(t, stop2())
	if !strings.Contains(out2.String(), "loaded from") || !strings.Contains(out2.String(), files["RECONCILER_WECHATPAY_PUBLIC_KEY_ID"]) {
		t.Fatalf("restart did not keep the identity: %s", out2.String())
	}
}

func TestMainFlags(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if err := sandbox.Main(context.Background(), []string{"--help"}, &stdout, &stderr); !errors.Is(err, flag.ErrHelp) ||
		!strings.Contains(stderr.String(), "--keys-dir") {
		t.Fatalf("--help: %v %s", err, stderr.String())
	}
	if err := sandbox.Main(context.Background(), []string{"--listen", "127.0.0.1:0"}, &stdout, &stderr); err == nil ||
		!strings.Contains(err.Error(), "--keys-dir") {
		t.Fatalf("missing --keys-dir: %v", err)
	}
	if err := sandbox.Main(context.Background(), []string{"--keys-dir", t.TempDir(), "extra"}, &stdout, &stderr); err == nil {
		t.Fatal("stray argument accepted")
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
