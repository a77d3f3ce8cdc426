package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/store"
)

// loopback is the only address the tool listens on.
const loopback = "127.0.0.1:0"

// httpServer is a server on a loopback port.
type httpServer struct {
	srv *http.Server
	url string
	err chan error
}

// serve serves h on a new loopback port with the timeouts of rollout's
// binary.
func serve(h http.Handler) (*httpServer, error) {
	ln, err := net.Listen("tcp", loopback)
	if err != nil {
		return nil, err
	}
	s := &httpServer{
		srv: &http.Server{
			Handler:           h,
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       30 * time.Second,
			WriteTimeout:      30 * time.Second,
			IdleTimeout:       120 * time.Second,
			MaxHeaderBytes:    64 << 10,
		},
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

// service is rollout as its binary runs it (see cmd/rollout's Main): the
// API over a service over SQLite, with tokens required, evaluation counts
// flushed and tokens refreshed in the background, every request logged.
type service struct {
	db   *store.DB
	svc  *rollout.Service
	http *httpServer
	// evaluate and edit are tokens of roles evaluate and editor, as
	// Authorization headers.
	evaluate, edit http.Header

	logs *os.File
	stop context.CancelFunc
	done chan struct{}
}

// benchBuckets are the buckets of every feature the tool creates: names of
// one length, so that every answer of a scenario has the same size.
var benchBuckets = []rollout.Bucket{{Name: "A", Replicas: 100}, {Name: "B", Replicas: 100}, {Name: "C", Replicas: 100}, {Name: "D", Replicas: 100}}

func featureKey(i int) string { return fmt.Sprintf("feature-%05d", i) }

// createFeatures creates n features of benchBuckets, salted by their keys.
func createFeatures(ctx context.Context, svc *rollout.Service, n int) error {
	for i := range n {
		if err := ctx.Err(); err != nil {
			return err
		}
		f := rollout.Feature{Key: featureKey(i), Enabled: true, Salt: featureKey(i), Buckets: benchBuckets}
		if _, err := svc.Create(ctx, f, rollout.ChangeOptions{Actor: "rollout-bench"}); err != nil {
			return fmt.Errorf("create feature %d: %w", i, err)
		}
	}
	return nil
}

// startService starts rollout on a loopback port over a new database in
// dir holding n features.
func startService(ctx context.Context, dir string, n int) (_ *service, err error) {
	db, err := store.Open(ctx, filepath.Join(dir, "rollout.db"))
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			db.Close()
		}
	}()
	metrics := api.NewMetrics()
	svc, err := rollout.NewService(ctx, metrics.Store(db), nil)
	if err != nil {
		return nil, err
	}
	if err := createFeatures(ctx, svc, n); err != nil {
		return nil, err
	}
	tokens, err := rollout.NewTokens(ctx, db)
	if err != nil {
		return nil, err
	}
	s := &service{db: db, svc: svc}
	for _, t := range []struct {
		role rollout.Role
		h    *http.Header
	}{{rollout.RoleEvaluate, &s.evaluate}, {rollout.RoleEditor, &s.edit}} {
		_, secret, err := tokens.Create(ctx, "bench-"+string(t.role), t.role, time.Now())
		if err != nil {
			return nil, err
		}
		*t.h = http.Header{"Authorization": {"Bearer " + secret}}
	}
	// Every request is logged, as the binary logs it to stderr, with one
	// write to the null device.
	if s.logs, err = os.OpenFile(os.DevNull, os.O_WRONLY, 0); err != nil {
		return nil, err
	}
	log := slog.New(slog.NewTextHandler(s.logs, nil))
	e := api.New(svc, api.Options{Logger: log, Metrics: metrics, Ready: db.Ping, Auth: api.NewAuth(tokens)})
	if s.http, err = serve(e); err != nil {
		s.logs.Close()
		return nil, err
	}
	bg, stop := context.WithCancel(context.Background())
	s.stop, s.done = stop, make(chan struct{})
	go func() {
		defer close(s.done)
		svc.FlushExposuresEvery(bg, 10*time.Second, func(error) {})
	}()
	go tokens.RefreshEvery(bg, 2*time.Second, func(error) {})
	return s, nil
}

func (s *service) close() error {
	err := s.http.close()
	s.stop()
	<-s.done
	return errors.Join(err, s.logs.Close(), s.db.Close())
}
