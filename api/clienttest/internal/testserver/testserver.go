// Package testserver runs rollout's API as the binary does, for the tests
// of the client and the provider: over a real SQLite store, its service
// following the store, on a loopback address that survives a restart.
package testserver

import (
	"context"
	"errors"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/experiment"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store"
	"github.com/rollout/rollout/store/sqlite"
)

// Server is a running API server.
type Server struct {
	URL    string
	Addr   string
	DBPath string
	Svc    *rollout.Service
	DB     *store.DB
	Exp    *experiment.Experiments

	srv    *http.Server
	cancel context.CancelFunc
	wg     sync.WaitGroup // the follower and Serve
}

// Start starts a server over a new database in t's temporary directory.
func Start(t testing.TB) *Server {
	t.Helper()
	return StartAt(t, filepath.Join(t.TempDir(), "rollout.db"), "127.0.0.1:0")
}

// StartAt starts a server over the database at dbPath, listening on addr
// (retrying for a few seconds while the port is still taken). It stops
// when t ends, unless stopped before.
func StartAt(t testing.TB, dbPath, addr string) *Server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	db, err := sqlite.Open(ctx, dbPath)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := rollout.NewService(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	exps := experiment.NewEnvironmentExperiments(func(env string) experiment.ExperimentStore { return db.In(env) })
	exp := exps.Of(svc)
	if err := exp.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	var ln net.Listener
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("listen on %s: %v", addr, err)
		}
	}
	s := &Server{
		URL: "http://" + ln.Addr().String(), Addr: ln.Addr().String(), DBPath: dbPath, Svc: svc, DB: db, Exp: exp,
		// As cmd/rollout sets them.
		srv: &http.Server{Handler: api.New(svc, api.Options{Experiments: exps}), ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second, IdleTimeout: 120 * time.Second},
		cancel: cancel,
	}
	s.wg.Go(func() { svc.Follow(ctx, rollout.FollowOptions{}) })
	s.wg.Go(func() {
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("serve: %v", err)
		}
	})
	t.Cleanup(s.Stop)
	return s
}

// Stop stops the server at once, closing its connections (the streams
// too), and closes its database. Stopping twice is harmless.
func (s *Server) Stop() {
	if s.cancel == nil {
		return
	}
	s.srv.Close()
	s.cancel()
	s.wg.Wait()
	s.DB.Close()
	s.cancel = nil
}

// Create stores f through the service.
func (s *Server) Create(t testing.TB, f feature.Feature) {
	t.Helper()
	if _, err := s.Svc.Create(context.Background(), f, rollout.ChangeOptions{}); err != nil {
		t.Fatalf("create %s: %v", f.Key, err)
	}
}
