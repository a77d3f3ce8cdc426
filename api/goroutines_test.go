package api_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/api/internal/apitest"
	"github.com/rollout/rollout/internal/leaktest"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store/sqlite"
)

// TestShutdownLeavesNoGoroutine: the API with tokens required, three
// streams open and a change sent on them, shut down as the binary does
// (Closing closed by the server's Shutdown), leaves no goroutine behind:
// each stream's writer and its watch of the tokens are joined by the
// stream's handler, which returns.
func TestShutdownLeavesNoGoroutine(t *testing.T) {
	defer leaktest.Check(t)()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	tokens, err := auth.NewTokens(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, secret, err := tokens.Create(ctx, "app", auth.RoleSDK, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	svc, err := rollout.NewService(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	var background sync.WaitGroup
	defer background.Wait()
	defer cancel()
	background.Go(func() { svc.Follow(ctx, rollout.FollowOptions{Interval: 10 * time.Millisecond}) })

	closing := make(chan struct{})
	srv := &http.Server{Handler: api.New(svc, api.Options{Auth: api.NewAuth(tokens), Closing: closing})}
	srv.RegisterOnShutdown(func() { close(closing) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	background.Go(func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("Serve() = %v", err)
		}
	})

	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	var streams []*bufio.Reader
	for range 3 {
		req, _ := http.NewRequest("GET", "http://"+ln.Addr().String()+"/sync/v1/stream", nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		res, err := (&http.Client{Transport: tr}).Do(req)
		if err != nil {
			t.Fatalf("open a stream: %v", err)
		}
		defer res.Body.Close()
		if res.StatusCode != http.StatusOK {
			t.Fatalf("open a stream: %s", res.Status)
		}
		r := bufio.NewReader(res.Body)
		if line, err := apitest.ReadUntil(r, "event: hello"); err != nil {
			t.Fatalf("the stream's hello: %v (read %q)", err, line)
		}
		streams = append(streams, r)
	}
	if _, err := svc.Create(ctx, feature.Feature{Key: "f", Buckets: []feature.Bucket{{Name: "A", Replicas: 1}}}, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	for i, r := range streams {
		if line, err := apitest.ReadUntil(r, "event: change"); err != nil {
			t.Fatalf("stream %d: the change: %v (read %q)", i, err, line)
		}
	}

	shutdown, stop := context.WithTimeout(context.Background(), 10*time.Second) // a hang guard
	defer stop()
	if err := srv.Shutdown(shutdown); err != nil {
		t.Fatalf("Shutdown() = %v", err)
	}
	for _, r := range streams {
		io.Copy(io.Discard, r) // the client sees each stream end
	}
}
