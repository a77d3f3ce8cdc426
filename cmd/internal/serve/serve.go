// Package serve runs the rollout service as its binaries run it: the store
// (SQLite, or PostgreSQL for many instances), the domain service and API
// tokens, the HTTP API and dashboard, the background flush of evaluation
// counts and the loop that follows the store's change feed, and an HTTP
// server with timeouts and a bound on its connections. cmd/rollout serves
// with it; cmd/rollout-bench measures it.
package serve

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/internal/gcfloor"
	"github.com/rollout/rollout/internal/logwriter"
	"github.com/rollout/rollout/internal/storemetrics"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/experiment"
	"github.com/rollout/rollout/store"
	"github.com/rollout/rollout/store/postgres"
	"github.com/rollout/rollout/store/sqlite"
	"github.com/rollout/rollout/web"
	"github.com/rollout/rollout/webhook"
)

// Defaults of the Server's zero fields.
const (
	DefaultFlushInterval = 10 * time.Second
	DefaultIdleTimeout   = 30 * time.Second
	// DefaultMaxConns bounds the connections where the open-file limit
	// allows; below it, the default is half the limit.
	DefaultMaxConns = 4096
)

// reservedFiles are the file descriptors kept for everything but client
// connections: the listener, the database's files and connections, logs.
const reservedFiles = 64

// TokenRefreshInterval is how soon, at the default sync interval, a token
// created or revoked with the rollout token command or on another instance
// takes effect: tokens are reloaded when the change feed shows a token
// commit.
const TokenRefreshInterval = rollout.DefaultSyncInterval

// Server is the service: its database, domain and HTTP server. Set its
// fields, then Open it (or Run it); tests open one on 127.0.0.1:0 with a
// temporary database.
type Server struct {
	Addr string
	// DBPath is the database: a SQLite file, created if missing, or a
	// postgres:// (postgresql://) URL of a database that exists.
	DBPath string
	Log    *slog.Logger
	// SyncInterval is how often the service polls the store's change feed
	// for changes made by other instances or processes; 0 means
	// rollout.DefaultSyncInterval.
	SyncInterval time.Duration
	// NoNotify turns off PostgreSQL's notifications of changes: the
	// service then relies on polling alone.
	NoNotify bool
	// SessionKeys sign dashboard sessions: the first signs, any verifies
	// (see api.NewAuth), so that a key can be rotated. None means the key
	// kept in the database, made once, so that every instance shares it;
	// but then anyone with the database or a backup of it can sign a
	// session, so production gives them (see ReadSessionKeys).
	SessionKeys [][]byte
	// SSO, when not nil, signs people in to the dashboard with an OpenID
	// Connect provider (see web.NewSSO), which Open discovers, failing
	// when it cannot; tokens (or sessions) are then always required.
	SSO *web.SSOConfig
	// FlushInterval is how often evaluation counts are written to the
	// database; 0 means DefaultFlushInterval.
	FlushInterval time.Duration
	// EventRetentionDays is how long tracked events are kept, in days: 0
	// means experiment.DefaultEventRetention (90 days), a negative number
	// forever.
	EventRetentionDays int
	// Insecure lets the server listen beyond loopback with no token.
	Insecure bool
	// Pprof serves Go's profiler under /debug/pprof/ to admin tokens.
	Pprof bool
	// MaxConns bounds the open client connections (see connLimiter); 0
	// means DefaultMaxConns, or half the open-file limit if that is lower.
	MaxConns int
	// MaxStreams bounds the open streams (GET /sync/v1/stream), which the
	// connection limit never closes, so that they leave connections to
	// evaluation: 0 means half the connection limit; at most three
	// quarters of it. MaxStreamsPerToken bounds those of one token; 0
	// means half of MaxStreams.
	MaxStreams, MaxStreamsPerToken int
	// IdleTimeout closes keep-alive connections idle this long; 0 means
	// DefaultIdleTimeout.
	IdleTimeout time.Duration
	// RampInterval is how often the ramp runner (rollout.Service.RunRamps)
	// looks for due ramp steps; 0 means rollout.DefaultRampInterval. Every
	// instance runs it; each step applies once whichever does.
	RampInterval time.Duration
	// ScheduleInterval is how often the schedule runner
	// (rollout.Service.RunSchedules) looks for due scheduled changes; 0
	// means rollout.DefaultScheduleInterval. Every instance runs it; each
	// schedule applies once whichever does.
	ScheduleInterval time.Duration
	// WebhookInterval is how often the webhook worker looks for events
	// to deliver when it has none; 0 means webhook.DefaultInterval.
	WebhookInterval time.Duration
	// SessionSweep is how often the ended dashboard sessions that have
	// expired are deleted; 0 means auth.DefaultSessionSweep.
	SessionSweep time.Duration
	// RequestLog, SlowRequest and SampleEvaluations choose the requests
	// logged one line each (see api.Options): by default changes, errors
	// and requests slower than api.DefaultSlowRequest, not evaluations.
	RequestLog        api.RequestLog
	SlowRequest       time.Duration
	SampleEvaluations int
	// LogWriter, when Log writes through it, has its dropped lines counted
	// in the metrics, and is flushed and closed by Close.
	LogWriter *logwriter.Writer
	// Clock is the time of the domain (changes, ramp steps, dashboard
	// sessions); nil means time.Now. Tests move it instead of waiting.
	Clock rollout.Clock

	db    Store
	envs  *rollout.Environments
	close func() error // closes db
	ln    net.Listener
	srv   *http.Server
	conns *connLimiter
	err   chan error
	stop  context.CancelFunc // stops the flusher, the follower, the ramp and schedule runners and the sweepers

	// serving is the HTTP server's Serve; background, the flusher, the
	// follower, the ramp and schedule runners and the sweepers (sign-outs, idempotency
	// keys). Close waits for both.
	serving, background sync.WaitGroup
}

// Store is what the service needs of its database.
type Store interface {
	rollout.Store
	experiment.ExperimentStore
	auth.Store
	webhook.Store
	webhook.Outbox
	// SessionKey returns the 32-byte key the database keeps for signing
	// dashboard sessions, making it on the first call. Every caller, in
	// any process sharing the database, gets the same key.
	SessionKey(ctx context.Context) ([]byte, error)
	// CheckWrite makes a small real write to check that changes can be
	// saved, for readiness checks. It answers within about a second, with
	// EUnavailable when the database cannot be written.
	CheckWrite(ctx context.Context) error
	// SetTimeout bounds each of the store's operations; 0: no bound.
	SetTimeout(time.Duration)
	rollout.EnvironmentStore
	// In returns the store bound to the environment env.
	In(env string) *store.DB
}

// OpenStore opens the database db names (see Server.DBPath), creating a
// SQLite file if missing, and returns it with its Close.
func OpenStore(ctx context.Context, db string) (Store, func() error, error) {
	if IsPostgres(db) {
		if isPostgresURL(db) { // pgx knows the scheme in lower case only
			scheme, rest, _ := strings.Cut(db, "://")
			db = strings.ToLower(scheme) + "://" + rest
		}
		pg, err := postgres.Open(ctx, db)
		if err != nil {
			return nil, nil, redactErr(err, db)
		}
		return pg, pg.Close, nil
	}
	sq, err := sqlite.Open(ctx, db)
	if err != nil {
		// SQLite's message names the last system call that failed, which
		// may not be the cause; look for it.
		if cause := checkWritable(db); cause != nil {
			return nil, nil, fmt.Errorf("open database %s: %w", db, cause)
		}
		return nil, nil, err // store's errors name the database
	}
	return sq, sq.Close, nil
}

// NewHTTPServer returns the http.Server of the service, with its timeouts
// and header limit, serving h.
func NewHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       DefaultIdleTimeout,
		MaxHeaderBytes:    64 << 10,
	}
}

// connLimit returns the connection bound for the open-file limit nofile (0
// if unknown), or an error if s.MaxConns does not fit in it.
func (s *Server) connLimit(nofile uint64) (int, error) {
	if s.MaxConns < 0 {
		return 0, fmt.Errorf("connection limit %d: give a positive number", s.MaxConns)
	}
	if nofile == 0 {
		return orDefault(s.MaxConns, DefaultMaxConns), nil
	}
	if nofile <= 2*reservedFiles {
		return 0, fmt.Errorf("the open-file limit is %d: raise it (ulimit -n) to serve", nofile)
	}
	room := int(min(nofile-reservedFiles, 1<<30))
	if s.MaxConns == 0 {
		return min(DefaultMaxConns, int(min(nofile/2, 1<<30))), nil
	}
	if s.MaxConns > room {
		return 0, fmt.Errorf("connection limit %d does not fit in the open-file limit of %d (at most %d, keeping %d for the database): "+
			"lower --max-conns or raise the limit (ulimit -n)", s.MaxConns, nofile, room, reservedFiles)
	}
	return s.MaxConns, nil
}

// streamLimits returns the stream budgets within the connection limit
// maxConns, or an error if s's do not fit in it.
func (s *Server) streamLimits(maxConns int) (streams, perToken int, err error) {
	most := maxConns * 3 / 4
	switch {
	case s.MaxStreams < 0 || s.MaxStreamsPerToken < 0:
		return 0, 0, fmt.Errorf("stream limits %d and %d per token: give positive numbers", s.MaxStreams, s.MaxStreamsPerToken)
	case s.MaxStreams > most:
		return 0, 0, fmt.Errorf("stream limit %d does not leave a quarter of the connection limit %d to other requests (at most %d): "+
			"lower --max-streams or raise --max-conns", s.MaxStreams, maxConns, most)
	}
	streams = orDefault(s.MaxStreams, max(maxConns/2, 1))
	perToken = orDefault(s.MaxStreamsPerToken, max(streams/2, 1))
	return streams, min(perToken, streams), nil
}

// orDefault returns v, or def if v is 0.
func orDefault[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// Open opens the database (creating it if missing), loads every feature and
// starts serving. Its errors name what failed once.
func (s *Server) Open(ctx context.Context) error {
	if s.Log == nil {
		s.Log = slog.New(slog.DiscardHandler)
	}
	nofile, err := raiseOpenFileLimit()
	if err != nil {
		return fmt.Errorf("read the open-file limit: %w", err)
	}
	maxConns, err := s.connLimit(nofile)
	if err != nil {
		return err
	}
	maxStreams, streamsPerToken, err := s.streamLimits(maxConns)
	if err != nil {
		return err
	}
	db, closeDB, err := OpenStore(ctx, s.DBPath)
	if err != nil {
		return err
	}
	s.db, s.close = db, closeDB
	fail := func(err error) error { closeDB(); return err }
	metrics := api.NewMetrics()
	if s.LogWriter != nil {
		metrics.CountLogDrops(s.LogWriter)
	}
	envs, err := rollout.NewEnvironments(ctx, db, func(env string) rollout.Store {
		return storemetrics.New(metrics.Registry(), db.In(env))
	}, s.Clock)
	if err != nil {
		return fail(fmt.Errorf("database %s: %w", s.where(), err)) // "load features: …"
	}
	s.envs = envs
	svc, ok := envs.Service(rollout.Production)
	if !ok { // production was deleted: the first environment is the default
		svc = envs.Services()[0]
	}
	tokens, err := auth.NewTokens(ctx, db, s.Clock)
	if err != nil {
		return fail(fmt.Errorf("database %s: %w", s.where(), err)) // "list tokens: …"
	}
	if s.SSO != nil {
		tokens.Require() // people sign in: never open
	}
	if err := s.checkAccess(tokens); err != nil {
		return fail(err)
	}
	keys := s.SessionKeys
	if len(keys) == 0 {
		key, err := db.SessionKey(ctx)
		if err != nil {
			return fail(fmt.Errorf("database %s: session key: %w", s.where(), err))
		}
		keys = [][]byte{key}
		if tokens.Enforced() {
			s.Log.Warn("dashboard sessions are signed with the key kept in the database: anyone with the database or a backup " +
				"of it can sign a session for any active token. Give the key from a file (--session-key-file) or the environment (ROLLOUT_SESSION_KEY)")
		}
	}
	// Each environment's experiments, over the store bound to it; the
	// running ones of those that exist read before serving.
	experiments := experiment.NewEnvironmentExperiments(func(env string) experiment.ExperimentStore { return db.In(env) })
	experiments.EventRetention = time.Duration(s.EventRetentionDays) * 24 * time.Hour
	for _, env := range envs.Services() {
		if err := experiments.Of(env).Refresh(ctx); err != nil {
			return fail(fmt.Errorf("database %s: environment %s: %w", s.where(), env.Environment(), err)) // "running experiments: …"
		}
	}
	access := api.NewAuth(tokens, keys...)
	var sso *web.SSO
	if s.SSO != nil {
		if sso, err = web.NewSSO(ctx, *s.SSO, tokens, access); err != nil {
			return fail(fmt.Errorf("single sign-on: %w", err))
		}
	}
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return fail(err) // "listen tcp ADDR: …"
	}
	s.ln = ln
	bg, stop := context.WithCancel(context.Background())
	closing := make(chan struct{})
	hooks := webhook.NewHooks(db, s.Clock)
	e := api.New(svc, api.Options{Logger: s.Log, Metrics: metrics, Ready: db.CheckWrite, Auth: access, Pprof: s.Pprof, Closing: closing,
		Environments: envs, Experiments: experiments,
		Webhooks:   hooks,
		RequestLog: s.RequestLog, SlowRequest: s.SlowRequest, SampleEvaluations: s.SampleEvaluations,
		MaxStreams: maxStreams, MaxStreamsPerToken: streamsPerToken,
		Routes: web.Routes(svc, web.Options{Logger: s.Log, Sessions: access, Webhooks: hooks, SSO: sso, Environments: envs})})
	s.conns = newConnLimiter(maxConns, func() {
		s.Log.Warn("connection limit reached: closing the longest idle connections to make room for new ones",
			"max_conns", maxConns)
	})
	s.srv = NewHTTPServer(e)
	s.srv.IdleTimeout = orDefault(s.IdleTimeout, DefaultIdleTimeout)
	s.srv.ConnState = s.conns.ConnState
	s.srv.ConnContext = s.conns.ConnContext
	s.srv.RegisterOnShutdown(sync.OnceFunc(func() { close(closing) })) // Shutdown may run twice
	s.err = make(chan error, 1)
	s.serving.Go(func() { s.err <- s.srv.Serve(s.conns.listener(ln)) })

	s.stop = stop
	s.background.Go(func() {
		// Every instance delivers; each webhook is leased to one at a
		// time (package webhook).
		webhook.New(db, webhook.Options{Clock: s.Clock}).Run(bg, s.WebhookInterval, func(err error) {
			s.Log.Error("deliver webhooks", "err", err)
		})
	})
	s.background.Go(func() {
		tokens.SweepSessionsEvery(bg, s.SessionSweep, func(err error) {
			s.Log.Error("delete expired dashboard sign-outs", "err", err)
		})
	})
	s.background.Go(func() {
		svc.ExpireIdempotencyEvery(bg, 0, func(err error) {
			s.Log.Error("expire idempotency keys", "err", err)
		})
	})
	follow := rollout.FollowOptions{
		Interval: orDefault(s.SyncInterval, rollout.DefaultSyncInterval),
		Committed: func(commits []rollout.Commit) {
			for _, c := range commits {
				switch c.Kind {
				case rollout.CommitToken:
					if err := tokens.Refresh(bg); err != nil && bg.Err() == nil {
						s.Log.Error("refresh API tokens", "err", err)
					}
				case rollout.CommitEnvironment:
					if err := envs.Refresh(bg); err != nil && bg.Err() == nil {
						s.Log.Error("refresh environments", "err", err)
					}
				}
			}
		},
		Report: func(err error) { s.Log.Error("follow the database's changes", "err", err) },
	}
	notifier, notifies := db.(interface {
		Notifications(context.Context) <-chan int64
	})
	// Each environment's service flushes its exposures and its
	// experiments' first exposures, runs its ramps and follows its feed; token and environment commits are every
	// environment's, so the default one alone acts on them.
	envs.Run(bg, func(ctx context.Context, env *rollout.Service) {
		var work sync.WaitGroup
		work.Go(func() {
			env.FlushExposuresEvery(ctx, orDefault(s.FlushInterval, DefaultFlushInterval), func(err error) {
				s.Log.Error("flush evaluation counts", "environment", env.Environment(), "err", err)
			})
		})
		work.Go(func() {
			experiments.Run(ctx, env, orDefault(s.FlushInterval, DefaultFlushInterval), func(err error) {
				s.Log.Error("record experiments' first exposures", "environment", env.Environment(), "err", err)
			})
		})
		work.Go(func() {
			env.RunRamps(ctx, s.RampInterval, func(err error) {
				s.Log.Error("apply ramp steps", "environment", env.Environment(), "err", err)
			})
		})
		work.Go(func() {
			env.RunSchedules(ctx, s.ScheduleInterval, api.ScheduledChange, func(err error) {
				s.Log.Error("apply scheduled changes", "environment", env.Environment(), "err", err)
			})
		})
		f := follow
		if env != svc {
			f.Committed = nil
		}
		if notifies && !s.NoNotify {
			f.Notify = notifier.Notifications(ctx) // nil but for PostgreSQL
		}
		env.Follow(ctx, f)
		work.Wait()
	})
	s.Log.Info("rollout serving", "url", s.URL(), "db", s.where(), "features", svc.Snapshot().Len(),
		"revision", svc.Snapshot().Revision(), "sync_interval", follow.Interval, "notifications", notifies && !s.NoNotify, "environments", len(envs.List()),
		"max_conns", maxConns, "max_streams", maxStreams, "open_file_limit", nofile)
	return nil
}

// where names the database for logs and messages, without a password.
func (s *Server) where() string { return RedactDSN(s.DBPath) }

// createTokenCommand is the command that makes a first token in this
// server's database, the password of its DSN, if any, left as xxxxx.
func (s *Server) createTokenCommand() string {
	cmd := "rollout token create --name admin --role admin --db " + shellQuote(s.where())
	if strings.Contains(s.where(), mask) && !strings.Contains(s.DBPath, mask) {
		cmd += " (put the password in place of " + mask + ")"
	}
	return cmd
}

// shellQuote quotes s for a POSIX shell unless it needs no quotes.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:@%+,=") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// checkAccess refuses to serve an open API beyond loopback: with no token,
// anyone who can reach the address could change every feature.
func (s *Server) checkAccess(tokens *auth.Tokens) error {
	switch {
	case tokens.Enforced():
		s.Log.Info("API tokens are required")
	case isLoopback(s.Addr):
		s.Log.Warn("no API token exists: the API and dashboard are open to anyone on this machine; " +
			"create one with: " + s.createTokenCommand())
	case s.Insecure:
		s.Log.Warn("!!! INSECURE: no API token exists and --insecure is set: ANYONE who can reach " + s.Addr +
			" can change every feature. Create a token: " + s.createTokenCommand())
	default:
		return fmt.Errorf("refusing to listen on %s with no API token: anyone who can reach it could change every feature. "+
			"The database %s is ready: create a token (%s) and start again, "+
			"listen on 127.0.0.1, or pass --insecure", s.Addr, s.where(), s.createTokenCommand())
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
func (s *Server) URL() string { return "http://" + s.ln.Addr().String() }

// Close stops accepting requests, lets those under way finish for up to
// ten seconds, closes the database, and writes the log lines still queued
// in LogWriter, if any, waiting for them up to the same ten seconds.
func (s *Server) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var errs []error
	if s.srv != nil {
		errs = append(errs, s.srv.Shutdown(ctx))
		s.serving.Wait()
		s.conns.wait()
		if _, closed, refused := s.conns.counts(); closed+refused > 0 {
			s.Log.Info("connections closed at the connection limit", "closed_to_make_room", closed, "refused", refused)
		}
	}
	if s.stop != nil {
		s.stop() // the flushers flush once more, after the last request
		s.background.Wait()
		s.envs.Wait()
	}
	if s.close != nil {
		errs = append(errs, s.close())
	}
	if s.LogWriter != nil {
		if err := s.LogWriter.Close(ctx); err != nil {
			errs = append(errs, fmt.Errorf("write the last log lines: %w", err))
		}
	}
	return errors.Join(errs...)
}

// Run opens the service and serves until ctx is done, then shuts down.
func (s *Server) Run(ctx context.Context) error {
	if err := s.Open(ctx); err != nil {
		if s.LogWriter != nil { // the lines logged while opening
			closing, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			s.LogWriter.Close(closing)
		}
		return err
	}
	select {
	case <-ctx.Done():
		s.Log.Info("shutting down")
	case err := <-s.err:
		s.Close()
		return err
	}
	return s.Close()
}

// HeapFloor is the heap goal a serving process keeps at least (package
// internal/gcfloor): rollout's live heap is a few megabytes, and each
// request allocates a few kilobytes, net/http's own mostly; at Go's
// default a collection, marking the whole live heap, came every thousand
// requests or so, about a tenth of an evaluation's instructions. With
// this floor one comes every ten thousand or so, for a heap of at most
// this size more while the live heap is small.
const HeapFloor = 32 << 20

// TuneGC keeps the process's heap goal at HeapFloor or above until the
// returned function is called, unless the environment (getenv) sets GOGC or
// GOMEMLIMIT: the operator's choice then stands.
func TuneGC(getenv func(string) string) (stop func()) {
	if !gcfloor.Wanted(getenv) {
		return func() {}
	}
	return gcfloor.Start(HeapFloor)
}
