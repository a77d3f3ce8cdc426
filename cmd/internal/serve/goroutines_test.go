package serve

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/internal/leaktest"
	"github.com/rollout/rollout/store/storetest"
)

// TestCloseLeavesNoGoroutine: a server that has served requests, a stream
// still open and a flood past its connection limit (which logs its warning
// from a goroutine, to a slow log) leaves no goroutine behind once Close
// returns: the HTTP server, the flusher, the follower (and PostgreSQL's
// listener), the ramp runner, the sweepers, the stream's writer and the
// limiter's callback are all joined.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "rollout.db")
			if db == "postgres" {
				path = storetest.PostgresDSN(t)
			}
			defer leaktest.Check(t)()
			serveAndClose(t, path)
		})
	}
}

func serveAndClose(t *testing.T, path string) {
	const limit = 8
	closing := make(chan struct{})
	s := &Server{Addr: "127.0.0.1:0", DBPath: path, MaxConns: limit, Log: slog.New(slowWarning{closing}),
		FlushInterval: time.Millisecond, RampInterval: time.Millisecond}
	if err := s.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	closed := false
	defer func() {
		if !closed {
			close(closing)
			s.Close()
		}
	}()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a hang guard
	defer cancel()
	do := func(method, path, body string) *http.Response {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, method, s.URL()+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		res, err := hc.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		return res
	}
	res := do("POST", "/api/features", `{"key":"f","buckets":[{"name":"A","replicas":3},{"name":"B","replicas":3}]}`)
	io.Copy(io.Discard, res.Body)
	res.Body.Close()
	if res.StatusCode != 201 {
		t.Fatalf("create feature = %d, want 201", res.StatusCode)
	}
	res = do("GET", "/evaluate?feature=f&user=u1", "")
	io.Copy(io.Discard, res.Body)
	res.Body.Close()

	// A stream, left open: Close ends it.
	stream := do("GET", "/sync/v1/stream", "")
	defer stream.Body.Close()
	if stream.StatusCode != 200 {
		t.Fatalf("GET /sync/v1/stream = %d, want 200", stream.StatusCode)
	}
	r := bufio.NewReader(stream.Body)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended before its hello event: %v", err)
		}
		if strings.HasPrefix(line, "event: hello") {
			break
		}
	}

	// A flood of idle connections past the limit.
	addr := strings.TrimPrefix(s.URL(), "http://")
	for i := range 2 * limit {
		c, err := dialIdle(addr, "/healthz")
		if err != nil {
			t.Fatalf("connection %d of the flood: %v", i, err)
		}
		defer c.Close()
	}
	if _, closedConns, _ := s.conns.counts(); closedConns == 0 {
		t.Fatal("no connection closed at the limit: the limiter's callback was not called")
	}

	closed = true
	close(closing)
	if err := s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	// The stream's client sees its end.
	io.Copy(io.Discard, stream.Body)
}

// slowWarning is a log that takes the connection limit's warning only a
// while after closing is closed (and holds no lock meanwhile), so that a
// callback Close did not wait for is still running when Close returns.
type slowWarning struct{ closing chan struct{} }

func (slowWarning) Enabled(context.Context, slog.Level) bool { return true }
func (w slowWarning) WithAttrs([]slog.Attr) slog.Handler     { return w }
func (w slowWarning) WithGroup(string) slog.Handler          { return w }

func (w slowWarning) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "connection limit reached") {
		<-w.closing
		time.Sleep(300 * time.Millisecond)
	}
	return nil
}
