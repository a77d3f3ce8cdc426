// Command rollout is the feature-flag rollout service: `rollout serve` (the
// default) runs the HTTP API on an embedded SQLite database, and
// `rollout simulate` demonstrates what a ring change does to users.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/store"
	"github.com/rollout/rollout/web"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "rollout:", err)
		}
		os.Exit(1)
	}
}

const usage = `usage: rollout [serve] [flags]      run the service (the default)
       rollout simulate [flags]     show what a ring change does to users
       rollout token create|list|revoke [flags]
                                    manage API tokens
       rollout backup [--db PATH] TARGET
                                    copy the database consistently, online
       rollout migrate --from SOURCE --to TARGET
                                    copy everything into a new database
                                    (SQLite file or postgres:// URL) and verify
Run 'rollout COMMAND -h' for a command's flags.
`

// run executes the command in args until ctx is done.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	switch cmd {
	case "serve":
		m, err := parseServe(args, stderr, getenv)
		if err != nil {
			return err
		}
		return m.Run(ctx)
	case "simulate":
		return runSimulate(args, stdout)
	case "token":
		return runToken(ctx, args, stdout, stderr, getenv)
	case "backup":
		return runBackup(ctx, args, stderr, getenv)
	case "migrate":
		return runMigrate(ctx, args, stdout, stderr)
	case "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", cmd)
}

// Main is the service: its database, domain and HTTP server. Tests open one
// on 127.0.0.1:0 with a temporary database.
type Main struct {
	Addr   string
	DBPath string
	Log    *slog.Logger
	// FlushInterval is how often evaluation counts are written to the
	// database; 0 means the default, 10 seconds.
	FlushInterval time.Duration
	// Insecure lets the server listen beyond loopback with no token.
	Insecure bool
	// Pprof serves Go's profiler under /debug/pprof/ to admin tokens.
	Pprof bool

	db      *store.DB
	svc     *rollout.Service
	ln      net.Listener
	srv     *http.Server
	err     chan error
	stop    context.CancelFunc // stops the exposure flusher
	flushed chan struct{}      // closed when the flusher has made its last flush
}

func parseServe(args []string, stderr io.Writer, getenv func(string) string) (*Main, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", envOr(getenv, "ROLLOUT_ADDR", "127.0.0.1:8080"), "listen address (env ROLLOUT_ADDR)")
	db := fs.String("db", envOr(getenv, "ROLLOUT_DB", "rollout.db"), "SQLite database file (env ROLLOUT_DB)")
	flush := fs.Duration("flush-interval", 10*time.Second, "how often evaluation counts are written to the database")
	insecure := fs.Bool("insecure", false, "serve without any API token on a non-loopback address (dangerous)")
	pprof := fs.Bool("pprof", false, "serve Go's profiler at /debug/pprof/ (admin tokens only)")
	logFormat := fs.String("log-format", envOr(getenv, "ROLLOUT_LOG_FORMAT", "text"), "log format: text or json (env ROLLOUT_LOG_FORMAT)")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("serve takes no arguments, got %q", fs.Args())
	}
	var h slog.Handler
	switch *logFormat {
	case "text":
		h = slog.NewTextHandler(stderr, nil)
	case "json":
		h = slog.NewJSONHandler(stderr, nil)
	default:
		return nil, fmt.Errorf("--log-format %q: use text or json", *logFormat)
	}
	if *flush <= 0 {
		return nil, fmt.Errorf("--flush-interval %v: give a positive duration such as 10s", *flush)
	}
	return &Main{Addr: *addr, DBPath: *db, Log: slog.New(h), FlushInterval: *flush, Insecure: *insecure, Pprof: *pprof}, nil
}

func envOr(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}

// Open opens the database, loads every feature and starts serving.
func (m *Main) Open(ctx context.Context) error {
	if m.Log == nil {
		m.Log = slog.New(slog.DiscardHandler)
	}
	db, err := store.Open(ctx, m.DBPath)
	if err != nil {
		return fmt.Errorf("open database %s: %w", m.DBPath, err)
	}
	m.db = db
	metrics := api.NewMetrics()
	svc, err := rollout.NewService(ctx, metrics.Store(db), nil)
	if err != nil {
		db.Close()
		return err
	}
	m.svc = svc
	tokens, err := rollout.NewTokens(ctx, db)
	if err != nil {
		db.Close()
		return err
	}
	if err := m.checkAccess(tokens); err != nil {
		db.Close()
		return err
	}
	ln, err := net.Listen("tcp", m.Addr)
	if err != nil {
		db.Close()
		return err
	}
	m.ln = ln
	auth := api.NewAuth(tokens)
	e := api.New(svc, api.Options{Logger: m.Log, Metrics: metrics, Ready: db.Ping, Auth: auth, Pprof: m.Pprof})
	web.Register(e, svc, web.Options{Logger: m.Log, Sessions: auth})
	m.srv = &http.Server{
		Handler:           e,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
	m.err = make(chan error, 1)
	go func() { m.err <- m.srv.Serve(ln) }()

	interval := m.FlushInterval
	if interval <= 0 {
		interval = 10 * time.Second
	}
	flushCtx, stop := context.WithCancel(context.Background())
	m.stop, m.flushed = stop, make(chan struct{})
	go func() {
		defer close(m.flushed)
		svc.FlushExposuresEvery(flushCtx, interval, func(err error) {
			m.Log.Error("flush evaluation counts", "err", err)
		})
	}()
	go tokens.RefreshEvery(flushCtx, TokenRefreshInterval, func(err error) {
		m.Log.Error("refresh API tokens", "err", err)
	})
	m.Log.Info("rollout serving", "url", m.URL(), "db", m.DBPath, "features", svc.Snapshot().Len())
	return nil
}

// TokenRefreshInterval is how soon a token created or revoked with the
// rollout token command takes effect in a running server.
const TokenRefreshInterval = 2 * time.Second

// checkAccess refuses to serve an open API beyond loopback: with no token,
// anyone who can reach the address could change every feature.
func (m *Main) checkAccess(tokens *rollout.Tokens) error {
	switch {
	case tokens.Enforced():
		m.Log.Info("API tokens are required")
	case isLoopback(m.Addr):
		m.Log.Warn("no API token exists: the API and dashboard are open to anyone on this machine; " +
			"create one with: rollout token create --name admin --role admin")
	case m.Insecure:
		m.Log.Warn("!!! INSECURE: no API token exists and --insecure is set: ANYONE who can reach " + m.Addr +
			" can change every feature. Create a token: rollout token create --name admin --role admin")
	default:
		return fmt.Errorf("refusing to listen on %s with no API token: anyone who can reach it could change every feature. "+
			"Create one first (rollout token create --name admin --role admin --db %s), listen on 127.0.0.1, or pass --insecure", m.Addr, m.DBPath)
	}
	return nil
}

// isLoopback reports whether addr listens only on a loopback interface.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// URL returns the base URL the service answers on.
func (m *Main) URL() string { return "http://" + m.ln.Addr().String() }

// Close stops accepting requests, lets those under way finish for up to
// ten seconds, and closes the database.
func (m *Main) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	if m.srv != nil {
		errs = append(errs, m.srv.Shutdown(ctx))
	}
	if m.stop != nil {
		m.stop() // the flusher flushes once more, after the last request
		<-m.flushed
	}
	if m.db != nil {
		errs = append(errs, m.db.Close())
	}
	return errors.Join(errs...)
}

// Run opens the service and serves until ctx is done, then shuts down.
func (m *Main) Run(ctx context.Context) error {
	if err := m.Open(ctx); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
		m.Log.Info("shutting down")
	case err := <-m.err:
		m.Close()
		return err
	}
	return m.Close()
}
