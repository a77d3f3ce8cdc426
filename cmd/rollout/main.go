// Command rollout is the feature-flag rollout service: `rollout serve` runs
// the HTTP API and dashboard on an embedded SQLite database, `rollout
// simulate` demonstrates what a ring change does to users, and `token`,
// `backup` and `version` administer it. `rollout help` lists them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/cmd/internal/serve"
	"github.com/rollout/rollout/internal/logwriter"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/web"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr, os.Getenv); err != nil {
		if code, ok := errors.AsType[exitCode](err); ok {
			os.Exit(int(code))
		}
		fmt.Fprintln(os.Stderr, "rollout:", errorText(err))
		os.Exit(1)
	}
}

// errorText returns err's text for the command line: without the code of
// the domain error it is or wraps ("invalid: …", "conflict: …"), keeping the
// context wrapped around it, such as a migration's advice on what to do.
func errorText(err error) string {
	e, ok := errors.AsType[*feature.Error](err)
	if !ok {
		return err.Error()
	}
	if text := err.Error(); strings.Contains(text, e.Error()) {
		return strings.Replace(text, e.Error(), e.Message, 1)
	}
	return feature.ErrorMessage(err)
}

const usage = `rollout: feature-flag rollouts with exact, minimal churn.

Usage:
  rollout [serve] [flags]             run the service, the default (creates the database if missing)
  rollout simulate [flags]            show what one ring change does to users
  rollout token create --name NAME --role admin|editor|viewer|sdk|client|evaluate [--db PATH]
                                      create an API token and print its secret, once
  rollout token list [--db PATH]      list the API tokens
  rollout token revoke --name NAME [--db PATH]
                                      revoke an API token
  rollout backup [--db PATH] TARGET   copy the database consistently while it is in use
  rollout migrate --from SOURCE --to TARGET
                                      copy everything into a new, empty database (a SQLite
                                      file or a postgres:// URL) and verify the copy
  rollout export --server URL [--format yaml|json]
                                      write the server's features as a document
  rollout plan -f FILE --server URL [--format json] [--out PLAN]
                                      print what the document would change, with its exact
                                      churn; exit 0: no change, 2: changes, 1: an error
  rollout apply -f FILE | PLAN --server URL [--max-churn F] [--max-total-churn F] [--comment C]
                                      apply the document (or a saved plan) as one batch
  rollout version                     print the version and VCS revision
  rollout help [COMMAND]              print this help, or a command's

Run with no command, or with flags but no command, rollout serves: 'rollout
--db P' is 'rollout serve --db P'. 'rollout COMMAND -h' lists a command's
flags. Flags may come before or after arguments. --db defaults to $ROLLOUT_DB, else rollout.db; only
serve creates a database, the other commands refuse one that does not exist.
`

// run executes the command in args until ctx is done. Help goes to stdout
// and is not an error.
func run(ctx context.Context, args []string, stdout, stderr io.Writer, getenv func(string) string) error {
	if len(args) == 0 {
		args = []string{"serve"}
	}
	cmd := args[0]
	switch {
	case cmd == "help" && len(args) > 1: // rollout help token list
		return run(ctx, append(args[1:len(args):len(args)], "-h"), stdout, stderr, getenv)
	case cmd == "help" || isHelpFlag(cmd):
		fmt.Fprint(stdout, usage)
		return nil
	case cmd == "-version" || cmd == "--version":
		cmd = "version"
		args = args[1:]
	case strings.HasPrefix(cmd, "-"):
		cmd = "serve"
	default:
		args = args[1:]
	}
	var err error
	switch cmd {
	case "serve":
		var s *serve.Server
		if s, err = parseServe(args, stdout, stderr, getenv); err == nil {
			stopGC := serve.TuneGC(getenv)
			err = s.Run(ctx)
			stopGC()
		}
	case "simulate":
		err = runSimulate(args, stdout)
	case "token":
		err = runToken(ctx, args, stdout, stderr, getenv)
	case "backup":
		err = runBackup(ctx, args, stdout, stderr, getenv)
	case "migrate":
		err = runMigrate(ctx, args, stdout, stderr)
	case "version":
		err = runVersion(args, stdout)
	case "export":
		err = runExport(ctx, args, stdout, getenv)
	case "plan":
		err = runPlan(ctx, args, stdout, getenv)
	case "apply":
		err = runApply(ctx, args, stdout, getenv)
	default:
		return fmt.Errorf("unknown command %q: 'rollout help' lists the commands", cmd)
	}
	if errors.Is(err, flag.ErrHelp) {
		return nil // the help is printed
	}
	return err
}

func isHelpFlag(arg string) bool {
	return arg == "-h" || arg == "--h" || arg == "-help" || arg == "--help"
}

// parseFlags parses args with fs, allowing flags after positional
// arguments ("backup OUT --db P"), and returns the positional arguments.
// On -h it prints synopsis and fs's flags to stdout and returns
// flag.ErrHelp; its other errors name the command and where to find help.
// A "--" ends the flags.
func parseFlags(fs *flag.FlagSet, synopsis string, args []string, stdout io.Writer) ([]string, error) {
	fs.SetOutput(io.Discard) // errors are returned, help printed below
	fs.Usage = func() {}
	var positional []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, synopsis)
			if hasFlags(fs) {
				fmt.Fprintln(stdout, "\nFlags:")
				fs.SetOutput(stdout)
				fs.PrintDefaults()
				fs.SetOutput(io.Discard)
			}
			return nil, err
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w ('rollout %s -h' lists its flags)", fs.Name(), err, fs.Name())
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if consumed := len(args) - len(rest); consumed > 0 && args[consumed-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// dbFlag defines the --db flag of every command.
// Its default, which may come from the environment, is shown without a
// password.
func dbFlag(fs *flag.FlagSet, getenv func(string) string) *string {
	db := fs.String("db", envOr(getenv, "ROLLOUT_DB", "rollout.db"),
		"the database: a SQLite file, or PostgreSQL's postgres:// URL or key=value settings (env ROLLOUT_DB)")
	fs.Lookup("db").DefValue = serve.RedactDSN(*db)
	return db
}

const serveSynopsis = `usage: rollout serve [flags]

Serves the HTTP API, OFREP and the dashboard on the database --db: a SQLite
file, created if it does not exist, or a PostgreSQL database, as a
postgres:// URL or key=value settings ('host=db user=rollout dbname=rollout'),
shared by any number of instances. The schema is migrated to this version at
start.
`

func parseServe(args []string, stdout, stderr io.Writer, getenv func(string) string) (*serve.Server, error) {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fs.String("addr", envOr(getenv, "ROLLOUT_ADDR", "127.0.0.1:8080"), "listen address (env ROLLOUT_ADDR)")
	db := dbFlag(fs, getenv)
	flush := fs.Duration("flush-interval", serve.DefaultFlushInterval, "how often evaluation counts are written to the database")
	retention := fs.Int("event-retention-days", 90, "delete events apps tracked (POST /api/track) this many days old, hourly; 0 keeps them forever")
	insecure := fs.Bool("insecure", false, "serve without any API token on a non-loopback address (dangerous)")
	pprof := fs.Bool("pprof", false, "serve Go's profiler at /debug/pprof/ (admin tokens only)")
	logFormat := fs.String("log-format", envOr(getenv, "ROLLOUT_LOG_FORMAT", "text"), "log format: text or json (env ROLLOUT_LOG_FORMAT)")
	maxConns := fs.Int("max-conns", 0, fmt.Sprintf("open client connections at most; at the limit a new one closes the longest idle one.\n"+
		"0 means %d, or half the open-file limit if lower (env ROLLOUT_MAX_CONNS)", serve.DefaultMaxConns))
	idle := fs.Duration("idle-timeout", serve.DefaultIdleTimeout, "close keep-alive connections idle this long (env ROLLOUT_IDLE_TIMEOUT)")
	maxStreams := fs.Int("max-streams", 0, "open streams (GET /sync/v1/stream) at most, beyond which a new one is refused with 503;\n"+
		"0 means half the connection limit, and at most three quarters of it (env ROLLOUT_MAX_STREAMS)")
	streamsPerToken := fs.Int("max-streams-per-token", 0, "open streams of one token at most, beyond which a new one is refused with 429; 0 means half of --max-streams")
	scheduleInterval := fs.Duration("schedule-interval", rollout.DefaultScheduleInterval,
		"how often to look for scheduled changes that are due and apply them; a schedule applies this long after its time at most\n"+
			"while the server runs, and at the next start if it came due while none ran (env ROLLOUT_SCHEDULE_INTERVAL)")
	syncInterval := fs.Duration("sync-interval", rollout.DefaultSyncInterval,
		"how often to poll the database for changes made by other instances (env ROLLOUT_SYNC_INTERVAL)")
	notify := fs.Bool("pg-notify", true, "on PostgreSQL, hear of other instances' changes at once by LISTEN/NOTIFY (false: poll only)")
	sessionKey := fs.String("session-key", getenv("ROLLOUT_SESSION_KEY"),
		"hex keys (32 bytes or more each, comma-separated; the first signs, any is accepted) signing dashboard sessions;\n"+
			"default: one kept in the database, which anyone with the database can use (env ROLLOUT_SESSION_KEY)")
	fs.Lookup("session-key").DefValue = "" // never print a key from the environment
	sessionKeyFile := fs.String("session-key-file", getenv("ROLLOUT_SESSION_KEY_FILE"),
		"file of hex session keys, one per line, the first signing (see --session-key); readable by its owner only (env ROLLOUT_SESSION_KEY_FILE)")
	oidcIssuer := fs.String("oidc-issuer", getenv("ROLLOUT_OIDC_ISSUER"), "OpenID Connect issuer URL: people sign in to the dashboard with it (env ROLLOUT_OIDC_ISSUER)")
	oidcClient := fs.String("oidc-client-id", getenv("ROLLOUT_OIDC_CLIENT_ID"), "the dashboard's client ID at the OpenID provider (env ROLLOUT_OIDC_CLIENT_ID)")
	oidcSecretFile := fs.String("oidc-client-secret-file", getenv("ROLLOUT_OIDC_CLIENT_SECRET_FILE"),
		"file holding the client's secret, readable by its owner only (env ROLLOUT_OIDC_CLIENT_SECRET_FILE)")
	oidcRedirect := fs.String("oidc-redirect-url", getenv("ROLLOUT_OIDC_REDIRECT_URL"),
		"the dashboard's URL /ui/login/callback as registered at the provider; default: from each request's host (env ROLLOUT_OIDC_REDIRECT_URL)")
	oidcRoleClaim := fs.String("oidc-role-claim", envOr(getenv, "ROLLOUT_OIDC_ROLE_CLAIM", "groups"), "the ID token's claim that lists a person's groups (env ROLLOUT_OIDC_ROLE_CLAIM)")
	oidcRoles := fs.String("oidc-roles", getenv("ROLLOUT_OIDC_ROLES"), "the role each group grants, such as flag-admins=admin,pm=editor,qa=editor@staging (ROLE@ENV: in that environment alone) (env ROLLOUT_OIDC_ROLES)")
	oidcDefault := fs.String("oidc-default-role", envOr(getenv, "ROLLOUT_OIDC_DEFAULT_ROLE", "viewer"), "the role of people in none of those groups (env ROLLOUT_OIDC_DEFAULT_ROLE)")
	if env := getenv("ROLLOUT_SYNC_INTERVAL"); env != "" {
		d, err := time.ParseDuration(env)
		if err != nil {
			return nil, fmt.Errorf("ROLLOUT_SYNC_INTERVAL=%q: give a duration such as 1s", env)
		}
		*syncInterval = d
	}
	logRequests := fs.String("log-requests", envOr(getenv, "ROLLOUT_LOG_REQUESTS", api.LogChanges.String()),
		"requests logged one line each: changes (state-changing requests, errors and slow requests; evaluations are\n"+
			"only counted in the metrics), errors (errors and slow requests), all, or none (env ROLLOUT_LOG_REQUESTS)")
	slow := fs.Duration("slow-request", api.DefaultSlowRequest, "log requests slower than this, unless --log-requests none (env ROLLOUT_SLOW_REQUEST)")
	sample := fs.Int("log-sample", 0, "also log about one evaluation request in N; 0 logs none (env ROLLOUT_LOG_SAMPLE)")
	if env := getenv("ROLLOUT_SCHEDULE_INTERVAL"); env != "" {
		d, err := time.ParseDuration(env)
		if err != nil {
			return nil, fmt.Errorf("ROLLOUT_SCHEDULE_INTERVAL=%q: give a duration such as 10s", env)
		}
		*scheduleInterval = d
	}
	if env := getenv("ROLLOUT_MAX_CONNS"); env != "" {
		n, err := strconv.Atoi(env)
		if err != nil {
			return nil, fmt.Errorf("ROLLOUT_MAX_CONNS=%q: give a number", env)
		}
		*maxConns = n
	}
	if env := getenv("ROLLOUT_MAX_STREAMS"); env != "" {
		n, err := strconv.Atoi(env)
		if err != nil {
			return nil, fmt.Errorf("ROLLOUT_MAX_STREAMS=%q: give a number", env)
		}
		*maxStreams = n
	}
	if env := getenv("ROLLOUT_IDLE_TIMEOUT"); env != "" {
		d, err := time.ParseDuration(env)
		if err != nil {
			return nil, fmt.Errorf("ROLLOUT_IDLE_TIMEOUT=%q: give a duration such as 30s", env)
		}
		*idle = d
	}
	if env := getenv("ROLLOUT_SLOW_REQUEST"); env != "" {
		d, err := time.ParseDuration(env)
		if err != nil {
			return nil, fmt.Errorf("ROLLOUT_SLOW_REQUEST=%q: give a duration such as 1s", env)
		}
		*slow = d
	}
	if env := getenv("ROLLOUT_LOG_SAMPLE"); env != "" {
		n, err := strconv.Atoi(env)
		if err != nil {
			return nil, fmt.Errorf("ROLLOUT_LOG_SAMPLE=%q: give a number", env)
		}
		*sample = n
	}
	rest, err := parseFlags(fs, serveSynopsis, args, stdout)
	if err != nil {
		return nil, err
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("serve takes no arguments, got %q", rest)
	}
	requestLog, err := api.ParseRequestLog(*logRequests)
	if err != nil {
		return nil, fmt.Errorf("--log-requests %q: use changes, errors, all or none", *logRequests)
	}
	if *slow <= 0 {
		return nil, fmt.Errorf("--slow-request %v: give a positive duration such as 1s", *slow)
	}
	if *sample < 0 {
		return nil, fmt.Errorf("--log-sample %d: give a positive number, or 0 to sample none", *sample)
	}
	if *logFormat != "text" && *logFormat != "json" {
		return nil, fmt.Errorf("--log-format %q: use text or json", *logFormat)
	}
	if *flush <= 0 {
		return nil, fmt.Errorf("--flush-interval %v: give a positive duration such as 10s", *flush)
	}
	if *retention < 0 || *retention > 0 && *retention < 8 {
		return nil, fmt.Errorf("--event-retention-days %d: give at least 8 (apps may send events up to 7 days old), or 0 to keep them forever", *retention)
	}
	if *maxConns < 0 {
		return nil, fmt.Errorf("--max-conns %d: give a positive number, or 0 for the default", *maxConns)
	}
	if *maxStreams < 0 || *streamsPerToken < 0 {
		return nil, fmt.Errorf("--max-streams %d, --max-streams-per-token %d: give positive numbers, or 0 for the defaults", *maxStreams, *streamsPerToken)
	}
	if *idle <= 0 {
		return nil, fmt.Errorf("--idle-timeout %v: give a positive duration such as 30s", *idle)
	}
	if *scheduleInterval < 10*time.Millisecond {
		return nil, fmt.Errorf("--schedule-interval %v: give a duration of 10ms or more, such as 10s", *scheduleInterval)
	}
	if *syncInterval < 10*time.Millisecond {
		return nil, fmt.Errorf("--sync-interval %v: give a duration of 10ms or more, such as 1s", *syncInterval)
	}
	var keys [][]byte
	switch {
	case *sessionKey != "" && *sessionKeyFile != "":
		return nil, errors.New("give the session keys once: --session-key (ROLLOUT_SESSION_KEY) or --session-key-file (ROLLOUT_SESSION_KEY_FILE), not both")
	case *sessionKey != "":
		if keys, err = serve.ParseSessionKeys(*sessionKey); err != nil {
			return nil, fmt.Errorf("--session-key: %w", err)
		}
	case *sessionKeyFile != "":
		if keys, err = serve.ReadSessionKeys(*sessionKeyFile); err != nil {
			return nil, err
		}
	}
	sso, err := parseSSO(*oidcIssuer, *oidcClient, *oidcSecretFile, *oidcRedirect, *oidcRoleClaim, *oidcRoles, *oidcDefault)
	if err != nil {
		return nil, err
	}
	// Log lines are queued and written by one goroutine, so that a slow
	// stderr never stalls a request; lines that do not fit are dropped
	// and counted in rollout_log_lines_dropped_total.
	logs := logwriter.New(stderr, logwriter.DefaultQueue)
	var h slog.Handler = slog.NewTextHandler(logs, nil)
	if *logFormat == "json" {
		h = slog.NewJSONHandler(logs, nil)
	}
	days := *retention
	if days == 0 {
		days = -1 // forever
	}
	return &serve.Server{Addr: *addr, DBPath: *db, Log: slog.New(h), FlushInterval: *flush, EventRetentionDays: days, Insecure: *insecure, Pprof: *pprof,
		MaxConns: *maxConns, MaxStreams: *maxStreams, MaxStreamsPerToken: *streamsPerToken, IdleTimeout: *idle, RequestLog: requestLog, SlowRequest: *slow, SampleEvaluations: *sample, LogWriter: logs,
		SyncInterval: *syncInterval, ScheduleInterval: *scheduleInterval, NoNotify: !*notify, SessionKeys: keys, SSO: sso}, nil
}

func envOr(getenv func(string) string, name, def string) string {
	if v := getenv(name); v != "" {
		return v
	}
	return def
}

// parseSSO checks the single sign-on flags: nil when --oidc-issuer is not
// given.
func parseSSO(issuer, client, secretFile, redirect, claim, roles, def string) (*web.SSOConfig, error) {
	if issuer == "" {
		if client != "" || secretFile != "" || roles != "" {
			return nil, errors.New("--oidc-client-id, --oidc-client-secret-file and --oidc-roles need --oidc-issuer")
		}
		return nil, nil
	}
	if client == "" {
		return nil, errors.New("--oidc-issuer needs --oidc-client-id (ROLLOUT_OIDC_CLIENT_ID)")
	}
	if u, err := url.Parse(issuer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("--oidc-issuer %q: give the provider's issuer URL, https://…", issuer)
	}
	cfg := &web.SSOConfig{Issuer: issuer, ClientID: client, RedirectURL: redirect, RoleClaim: claim, DefaultRole: auth.Role(def)}
	if secretFile != "" {
		secret, err := serve.ReadSecretFile(secretFile)
		if err != nil {
			return nil, fmt.Errorf("--oidc-client-secret-file: %w", err)
		}
		cfg.ClientSecret = secret
	}
	m, err := web.ParseRoleMap(roles)
	if err != nil {
		return nil, fmt.Errorf("--oidc-roles: %w", err)
	}
	cfg.Roles = m
	if r := auth.Role(def); r != auth.RoleAdmin && r != auth.RoleEditor && r != auth.RoleViewer {
		return nil, fmt.Errorf("--oidc-default-role %q: use admin, editor or viewer", def)
	}
	return cfg, nil
}
