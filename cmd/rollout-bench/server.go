package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/rollout/rollout/cmd/internal/serve"
	"github.com/rollout/rollout/internal/logwriter"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/plan"
	"github.com/rollout/rollout/store/sqlite"
)

// loopback is the only address the tool listens on.
const loopback = "127.0.0.1:0"

// httpServer is a server on a loopback port.
type httpServer struct {
	srv *http.Server
	url string
	err chan error
}

// serveBaseline serves h on a new loopback port with the timeouts of rollout's
// binary.
func serveBaseline(h http.Handler) (*httpServer, error) {
	ln, err := net.Listen("tcp", loopback)
	if err != nil {
		return nil, err
	}
	s := &httpServer{
		srv: serve.NewHTTPServer(h),
		url: "http://" + ln.Addr().String(),
		err: make(chan error, 1),
	}
	go func() { s.err <- s.srv.Serve(ln) }()
	return s, nil
}

func (s *httpServer) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := s.srv.Shutdown(ctx)
	if serr := <-s.err; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}

// bare is the baseline: a handler that answers body to every request.
func bare(body []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["Content-Type"] = []string{"application/json"}
		w.Write(body)
	})
}

// service is rollout as its binary runs it, with the binary's own wiring
// (package cmd/internal/serve): the API and dashboard over a service over
// SQLite, with tokens required, evaluation counts flushed and tokens
// refreshed in the background, and the binary's default logging: changes,
// errors and slow requests, through the queue of a logwriter.Writer.
type service struct {
	srv *serve.Server
	url string
	// evaluate and edit are tokens of roles evaluate and editor, as
	// Authorization headers.
	evaluate, edit http.Header

	logs *os.File
}

// benchBuckets are the buckets of every feature the tool creates: names of
// one length, so that every answer of a scenario has the same size.
var benchBuckets = []feature.Bucket{{Name: "A", Replicas: 100}, {Name: "B", Replicas: 100}, {Name: "C", Replicas: 100}, {Name: "D", Replicas: 100}}

// featureBuckets are the buckets of the features the tool creates:
// benchBuckets, or with --fine those of fineBuckets.
var featureBuckets = benchBuckets

// fineBuckets returns the buckets of a new feature planned 50/50 at the
// fine tolerance (0.05 percentage points), as the dashboard plans a new
// feature: two buckets, A and B, of names as long as benchBuckets'.
func fineBuckets() ([]feature.Bucket, error) {
	p, err := plan.New(map[string]float64{"A": 0.5, "B": 0.5}, plan.Options{Mode: plan.ModeAuto, Order: []string{"A", "B"}})
	if err != nil {
		return nil, err
	}
	if !p.WithinTolerance {
		return nil, fmt.Errorf("the fine plan of 50/50 misses by %v", p.MaxError)
	}
	return p.Buckets, nil
}

func featureKey(i int) string { return fmt.Sprintf("feature-%05d", i) }

// rulesKey is the feature of benchBuckets with the 5 rules of benchRules
// (issue #22's scenario), which populate creates beside the n features.
const rulesKey = "rules-00000"

// benchRules are 5 rules of 2 conditions each that the scenario's
// context (rulesContext) matches none of: every rule is tried, and the
// ring serves, so that every answer has one size.
func benchRules() []feature.Rule {
	c := func(attr, op, v string) feature.Condition {
		cond := feature.Condition{Attribute: attr, Op: op}
		if v != "" {
			cond.Value = json.RawMessage(v)
		}
		return cond
	}
	return []feature.Rule{
		{Name: "staff", Conditions: []feature.Condition{c("email", "ends_with", `"@staff.example"`), c("beta", "eq", "true")}, Serve: feature.Serve{Bucket: "A"}},
		{Name: "enterprise", Conditions: []feature.Condition{c("plan", "eq", `"enterprise"`), c("seats", "gte", "100")}, Serve: feature.Serve{Bucket: "B"}},
		{Name: "dach", Conditions: []feature.Condition{c("country", "in", `["DE","AT","CH"]`), c("plan", "neq", `"free"`)}, Serve: feature.Serve{Ring: true}},
		{Name: "new-app", Conditions: []feature.Condition{c("app_version", "semver_gte", `"5.0.0"`), c("email", "present", "")}, Serve: feature.Serve{Bucket: "C"}},
		{Name: "old", Conditions: []feature.Condition{c("created", "before", `"2020-01-01T00:00:00Z"`), c("plan", "starts_with", `"legacy"`)}, Serve: feature.Serve{Bucket: "D"}},
	}
}

// rulesContext is the 6 attributes besides the targeting key of the
// rules scenario's OFREP requests.
const rulesContext = `"email":"someone@example.com","plan":"pro","country":"FR","seats":12,"beta":false,"app_version":"4.2.1"`

// createFeatures creates n features of featureBuckets, salted by their keys.
func createFeatures(ctx context.Context, svc *rollout.Service, n int) error {
	for i := range n {
		if err := ctx.Err(); err != nil {
			return err
		}
		f := feature.Feature{Key: featureKey(i), Enabled: true, Salt: featureKey(i), Buckets: featureBuckets}
		if _, err := svc.Create(ctx, f, rollout.ChangeOptions{Actor: "rollout-bench"}); err != nil {
			return fmt.Errorf("create feature %d: %w", i, err)
		}
	}
	return nil
}

// startService creates a database in dir holding n features and two
// tokens, then serves it on a loopback port as the binary does.
func startService(ctx context.Context, dir string, n int) (_ *service, err error) {
	path := filepath.Join(dir, "rollout.db")
	s := &service{}
	if err := populate(ctx, path, n, true, s); err != nil {
		return nil, err
	}
	// Logged as the binary logs to stderr, to the null device.
	if s.logs, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0); err != nil {
		return nil, err
	}
	lw := logwriter.New(s.logs, logwriter.DefaultQueue)
	s.srv = &serve.Server{Addr: loopback, DBPath: path, Log: slog.New(slog.NewTextHandler(lw, nil)), LogWriter: lw}
	if err := s.srv.Open(ctx); err != nil {
		s.logs.Close()
		return nil, err
	}
	s.url = s.srv.URL()
	return s, nil
}

// populate creates the database at path with n features (and, with
// rules, the feature rulesKey of the rules scenario beside them), and
// tokens of roles evaluate and editor whose headers it sets in s.
func populate(ctx context.Context, path string, n int, rules bool, s *service) (err error) {
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, db.Close()) }()
	svc, err := rollout.NewService(ctx, db, nil)
	if err != nil {
		return err
	}
	if err := createFeatures(ctx, svc, n); err != nil {
		return err
	}
	if rules {
		f := feature.Feature{Key: rulesKey, Enabled: true, Salt: rulesKey, Buckets: benchBuckets, Rules: benchRules()}
		if _, err := svc.Create(ctx, f, rollout.ChangeOptions{Actor: "rollout-bench"}); err != nil {
			return fmt.Errorf("create feature %s: %w", rulesKey, err)
		}
	}
	tokens, err := auth.NewTokens(ctx, db, nil)
	if err != nil {
		return err
	}
	for _, t := range []struct {
		role auth.Role
		h    *http.Header
	}{{auth.RoleEvaluate, &s.evaluate}, {auth.RoleEditor, &s.edit}} {
		_, secret, err := tokens.Create(ctx, "bench-"+string(t.role), t.role, time.Now())
		if err != nil {
			return err
		}
		*t.h = http.Header{"Authorization": {"Bearer " + secret}}
	}
	return nil
}

func (s *service) close() error {
	return errors.Join(s.srv.Close(), s.logs.Close())
}
