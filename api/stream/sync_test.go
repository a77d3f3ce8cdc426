package stream_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/api/internal/apitest"
	"github.com/rollout/rollout/api/stream"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store/sqlite"
)

// streamServer is the API over a real SQLite store, its service following
// the store as the binary's does, on a loopback server with short read and
// write timeouts that a stream must outlive.
func streamServer(t *testing.T) (*apitest.Server, *rollout.Service) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := rollout.NewService(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); svc.Follow(ctx, rollout.FollowOptions{Interval: 50 * time.Millisecond}) }()
	srv := httptest.NewUnstartedServer(api.New(svc, api.Options{}))
	srv.Config.ReadTimeout, srv.Config.WriteTimeout = 300*time.Millisecond, 300*time.Millisecond
	srv.Start()
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		cancel()
		<-done
		db.Close()
	})
	return &apitest.Server{T: t, URL: srv.URL, Svc: svc, DB: db}, svc
}

// sseEvent is one event of a stream, or a comment.
type sseEvent struct {
	name, id, data, comment string
}

// readEvents sends the stream's events and comments to a channel, closed
// when the stream ends.
func readEvents(t *testing.T, body *bufio.Reader) <-chan sseEvent {
	out := make(chan sseEvent, 100)
	go func() {
		defer close(out)
		var ev sseEvent
		for {
			line, err := body.ReadString('\n')
			if err != nil {
				return
			}
			line = strings.TrimSuffix(line, "\n")
			switch {
			case line == "":
				out <- ev
				ev = sseEvent{}
			case strings.HasPrefix(line, ":"):
				ev.comment = strings.TrimSpace(line[1:])
			case strings.HasPrefix(line, "event: "):
				ev.name = line[7:]
			case strings.HasPrefix(line, "id: "):
				ev.id = line[4:]
			case strings.HasPrefix(line, "data: "):
				ev.data = line[6:]
			}
		}
	}()
	return out
}

// TestSyncStream: the stream says hello with the revision, sends an event
// with the changed keys for each change, keeps a heartbeat, outlives the
// server's read and write timeouts, and ends when the client goes.
func TestSyncStream(t *testing.T) {
	stream.SetHeartbeat(t, 100*time.Millisecond)
	s, svc := streamServer(t)
	s.Seed()
	rev := caughtUp(t, s)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.URL+"/sync/v1/stream", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	for name, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if got := res.Header.Get(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	events := readEvents(t, bufio.NewReader(res.Body))
	next := func(what string) sseEvent {
		t.Helper()
		select {
		case ev, ok := <-events:
			if !ok {
				t.Fatalf("the stream ended, waiting for %s", what)
			}
			return ev
		case <-time.After(5 * time.Second):
			t.Fatalf("no %s within 5 s", what)
		}
		return sseEvent{}
	}
	hello := next("hello")
	if hello.name != "hello" || hello.data != `{"revision":`+itoa(rev)+`}` {
		t.Errorf("first event = %+v, want hello at revision %d", hello, rev)
	}

	// Past the server's timeouts (300 ms), heartbeats keep coming.
	deadline := time.Now().Add(time.Second)
	beats := 0
	for time.Now().Before(deadline) {
		if ev := next("a heartbeat"); ev.comment == "heartbeat" {
			beats++
		}
	}
	if beats < 5 {
		t.Errorf("%d heartbeats in 1 s at 100 ms, want at least 5", beats)
	}

	s.Must(http.StatusOK, "PATCH", "/api/features/limit", map[string]any{"description": "changed"})
	for {
		ev := next("the change")
		if ev.name == "" {
			continue // a heartbeat
		}
		form, _ := svc.Snapshot().SyncFeature("limit")
		want := `{"revision":` + itoa(rev+1) + `,"features":["limit"],"set":[` + string(form) + `]}`
		if ev.name != "change" || ev.data != want || ev.id != itoa(rev+1) {
			t.Errorf("event = %+v, want change %s", ev, want)
		}
		break
	}
	if got := svc.Snapshot().Revision(); got != rev+1 {
		t.Errorf("revision after the change = %d, want %d", got, rev+1)
	}

	// A deletion names the feature deleted.
	s.Must(http.StatusNoContent, "DELETE", "/api/features/killed", nil)
	if ev := nextChange(t, next); ev.data != `{"revision":`+itoa(rev+2)+`,"features":["killed"],"deleted":["killed"]}` {
		t.Errorf("event of a deletion = %+v", ev)
	}
}

// nextChange returns the next change event of a stream, skipping
// heartbeats.
func nextChange(t *testing.T, next func(string) sseEvent) sseEvent {
	t.Helper()
	for {
		if ev := next("a change"); ev.name != "" {
			if ev.name != "change" {
				t.Fatalf("event %+v, want a change", ev)
			}
			return ev
		}
	}
}

// TestSyncStreamLargeChange: a batch whose features' sync forms exceed the
// bound of an event sends only the keys, flagged refetch; every stream
// gets the same event.
func TestSyncStreamLargeChange(t *testing.T) {
	stream.SetMaxChangeEvent(t, 100<<10)
	s, svc := streamServer(t)
	s.Seed()
	caughtUp(t, s)
	var streams []func(string) sseEvent
	for range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		t.Cleanup(cancel)
		req, _ := http.NewRequestWithContext(ctx, "GET", s.URL+"/sync/v1/stream", nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { res.Body.Close() })
		events := readEvents(t, bufio.NewReader(res.Body))
		streams = append(streams, func(what string) sseEvent {
			t.Helper()
			select {
			case ev, ok := <-events:
				if !ok {
					t.Fatalf("the stream ended, waiting for %s", what)
				}
				return ev
			case <-time.After(5 * time.Second):
				t.Fatalf("no %s within 5 s", what)
			}
			return sseEvent{}
		})
		streams[len(streams)-1]("hello")
	}
	big := feature.Feature{Key: "big", Enabled: true, Salt: "big", Overrides: map[string]string{},
		Buckets: []feature.Bucket{{Name: "A", Replicas: 100, Value: json.RawMessage(`"` + strings.Repeat("x", 8000) + `"`)}, {Name: "B", Replicas: 100}}}
	for i := range feature.MaxOverrides {
		big.Overrides[fmt.Sprintf("user-%d", i)] = "B"
	}
	s.Create(big)
	for i, next := range streams {
		ev := nextChange(t, next)
		var data map[string]any
		if err := json.Unmarshal([]byte(ev.data), &data); err != nil {
			t.Fatal(err)
		}
		if data["refetch"] != true || data["set"] != nil || len(ev.data) > 1000 {
			t.Errorf("stream %d: event of a large change = %.200s, want the keys and refetch", i, ev.data)
		}
	}
	if _, ok := svc.Snapshot().SyncFeature("big"); !ok {
		t.Fatal("big is not served")
	}
}

// caughtUp waits until the service's snapshot has caught up with the
// store's revision, and returns it.
func caughtUp(t *testing.T, s *apitest.Server) int64 {
	t.Helper()
	want, err := s.DB.Revision(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); s.Svc.Snapshot().Revision() != want; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the service is at revision %d, the store at %d", s.Svc.Snapshot().Revision(), want)
		}
	}
	return want
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }
