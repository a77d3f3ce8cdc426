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
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/rollout/rollout/cmd/internal/serve"
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
	case "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown command %q", cmd)
}

func parseServe(args []string, stderr io.Writer, getenv func(string) string) (*serve.Server, error) {
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
	return &serve.Server{Addr: *addr, DBPath: *db, Log: slog.New(h), FlushInterval: *flush, Insecure: *insecure, Pprof: *pprof}, nil
}

func envOr(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}
