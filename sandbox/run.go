package sandbox

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/rs/zerolog"
)

// RunOptions configure a standalone sandbox.
type RunOptions struct {
	// Listen is the address to serve on; default 127.0.0.1:8090.
	Listen string
	// KeysDir holds the sandbox's keys: loaded when it has a set (sandbox.json), otherwise a
	// fresh set is generated and written there, with the files a reconciler is configured
	// with. Required.
	KeysDir string
	// Keys, if set, is the key set written into an empty KeysDir instead of generating one
	// (tests use it to skip key generation).
	Keys   *Keys
	Logger zerolog.Logger
	// Stdout receives the summary: the base URL and the RECONCILER_* settings to use.
	Stdout io.Writer
	// Ready, if set, is called with the base URL once the listener is bound.
	Ready func(baseURL string)
}

// Run serves the sandbox until ctx ends, then shuts down gracefully.
func Run(ctx context.Context, opts RunOptions) error {
	if opts.KeysDir == "" {
		return errors.New("sandbox: --keys-dir is required (keys are loaded from it, or generated into it)")
	}
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:8090"
	}
	if opts.Stdout == nil {
		opts.Stdout = io.Discard
	}
	keys, id, files, err := LoadKeyFiles(opts.KeysDir)
	generated := false
	if errors.Is(err, ErrNoKeys) {
		if keys = opts.Keys; keys == nil {
			if keys, err = GenerateKeys(0); err != nil {
				return err
			}
		}
		id = Identity{}.withDefaults()
		if files, err = WriteKeyFiles(opts.KeysDir, keys, id); err != nil {
			return err
		}
		generated = true
	} else if err != nil {
		return fmt.Errorf("sandbox: %w", err)
	}
	// The second account of each platform (the other credential mode) is made anew at every
	// start; the accounts file written below always describes the running sandbox.
	second, err := SecondAccounts(0)
	if err != nil {
		return err
	}
	providers, err := ProviderAccounts(0)
	if err != nil {
		return err
	}
	sb, err := New(Options{Keys: keys, Identity: id, Logger: opts.Logger, Accounts: second.Join(providers)})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", opts.Listen)
	if err != nil {
		return fmt.Errorf("sandbox: listen %s: %w", opts.Listen, err)
	}
	base := baseURL(ln.Addr())
	accountsFile, err := sb.WriteAccountsFile(filepath.Join(opts.KeysDir, "accounts"), base, 50)
	if err != nil {
		ln.Close()
		return err
	}
	srv := &http.Server{Handler: sb, ReadHeaderTimeout: 10 * time.Second}

	printSettings(opts.Stdout, base, opts.KeysDir, generated, AccountsEnv(accountsFile), sb.Env(base, files))
	opts.Logger.Info().Str("url", base).Msg("sandbox serving")
	if opts.Ready != nil {
		opts.Ready(base)
	}

	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		sb.Close()
		return fmt.Errorf("sandbox: %w", err)
	case <-ctx.Done():
	}
	sb.Close() // release hanging requests and stop deliveries first, or Shutdown waits for them
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		return fmt.Errorf("sandbox: shutdown: %w", err)
	}
	<-served
	return nil
}

// printSettings tells where the sandbox listens, where its keys are, and the RECONCILER_*
// settings of a reconciler that uses every account (all) or each platform's default one.
func printSettings(w io.Writer, base, keysDir string, generated bool, all, defaults []string) {
	verb := "loaded from"
	if generated {
		verb = "generated into"
	}
	fmt.Fprintf(w, "sandbox listening on %s (keys %s %s)\n", base, verb, keysDir)
	fmt.Fprintf(w, "control API: %s/sandbox/\n", base)
	fmt.Fprintf(w, "settings for a reconciler, every account (two per platform, one in each credential mode, and a service provider per platform with two sub-merchants):\n")
	for _, kv := range all {
		fmt.Fprintf(w, "  %s\n", kv)
	}
	fmt.Fprintf(w, "or only the default account of each platform:\n")
	for _, kv := range defaults {
		fmt.Fprintf(w, "  %s\n", kv)
	}
}

// Main is the `reconciler sandbox` command: flags --listen and --keys-dir, then Run until
// ctx ends. --help prints usage and returns flag.ErrHelp.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sandbox", flag.ContinueOnError)
	fs.SetOutput(stderr)
	listen := fs.String("listen", "127.0.0.1:8090", "address to serve both platforms and the control API on")
	keysDir := fs.String("keys-dir", "", "directory to load the sandbox keys from, or to generate them into (required)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: reconciler sandbox --listen ADDR --keys-dir DIR\n\n"+
			"Runs a local simulator of Alipay (/gateway.do) and WeChat Pay API v3 (/v3/pay/transactions/...)\n"+
			"with a JSON control API under /sandbox/. Prints the RECONCILER_* settings that point at it.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("sandbox: unexpected arguments %q", strings.Join(fs.Args(), " "))
	}
	log := zerolog.New(stderr).With().Timestamp().Logger()
	return Run(ctx, RunOptions{Listen: *listen, KeysDir: *keysDir, Logger: log, Stdout: stdout})
}

func baseURL(a net.Addr) string {
	tcp, ok := a.(*net.TCPAddr)
	if !ok {
		return "http://" + a.String()
	}
	host := tcp.IP.String()
	if tcp.IP.IsUnspecified() {
		host = "127.0.0.1"
	}
	return "http://" + net.JoinHostPort(host, fmt.Sprint(tcp.Port))
}
