package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
)

// logBuffer collects JSON log lines written from the server's goroutines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the logged lines whose message is msg.
func (b *logBuffer) lines(t *testing.T, msg string) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for line := range strings.Lines(b.buf.String()) {
		var v map[string]any
		if err := json.Unmarshal([]byte(line), &v); err != nil {
			t.Fatalf("log line is not JSON: %v: %s", err, line)
		}
		if v["msg"] == msg {
			out = append(out, v)
		}
	}
	return out
}

func newLoggedServer(t *testing.T) (*testServer, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	s := newServer(t, "", api.Options{Logger: slog.New(slog.NewJSONHandler(logs, nil))})
	return s, logs
}

// TestRequestLog: one line per request, with the request ID the response
// carries: the client's when it sent a sensible one, a new one otherwise.
func TestRequestLog(t *testing.T) {
	s, logs := newLoggedServer(t)
	s.seed()
	tests := []struct {
		name, sent string
		honoured   bool
	}{
		{"honoured", "req-7f3a.b_c:1", true},
		{"generated when absent", "", false},
		{"generated for spaces", "two words", false},
		{"generated when too long", strings.Repeat("x", 129), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var header []string
			if tt.sent != "" {
				header = []string{"X-Request-ID", tt.sent}
			}
			r := s.must(200, "GET", "/evaluate?feature=checkout&user=u", nil, header...)
			id := r.header.Get("X-Request-ID")
			if tt.honoured && id != tt.sent || !tt.honoured && (id == "" || id == tt.sent) {
				t.Fatalf("X-Request-ID sent %q, answered %q", tt.sent, id)
			}
			var found []map[string]any
			for _, l := range logs.lines(t, "request") {
				if l["request_id"] == id {
					found = append(found, l)
				}
			}
			if len(found) != 1 {
				t.Fatalf("%d request lines with request_id %q, want 1", len(found), id)
			}
			l := found[0]
			if l["method"] != "GET" || l["path"] != "/evaluate" || l["route"] != "/evaluate" || l["status"] != 200.0 || l["level"] != "INFO" {
				t.Errorf("request line = %v", l)
			}
		})
	}
}

// TestChangeLog: one line per applied change, with its churn; none for a
// dry run or a refused change.
func TestChangeLog(t *testing.T) {
	s, logs := newLoggedServer(t)
	s.seed()
	s.must(200, "POST", "/api/features/checkout/buckets?dry_run=true", map[string]any{"name": "D", "replicas": 3})
	s.must(409, "POST", "/api/features/checkout/buckets?max_churn=0.1", map[string]any{"name": "D", "replicas": 3})
	r := s.must(200, "POST", "/api/features/checkout/buckets", map[string]any{"name": "D", "replicas": 3}, "X-Request-ID", "add-d")
	s.must(204, "DELETE", "/api/features/killed", nil)

	changes := logs.lines(t, "change")
	if len(changes) != 2 {
		t.Fatalf("%d change lines, want 2 (no dry run, no refused change): %v", len(changes), changes)
	}
	add := changes[0]
	// The README's example: adding D to A, B, C (3 replicas each) moves
	// 22.27 % of users.
	churn, _ := add["churn"].(float64)
	if add["request_id"] != r.header.Get("X-Request-ID") || add["kind"] != "add_bucket" || add["feature"] != "checkout" ||
		add["version"] != 2.0 || add["summary"] != "added bucket D (3 replicas)" || add["actor"] != "anonymous" ||
		math.Abs(churn-0.2226766) > 1e-6 {
		t.Errorf("change line = %v, want add_bucket of checkout to version 2 with churn 0.2226766", add)
	}
	del := changes[1]
	if del["kind"] != "delete" || del["feature"] != "killed" || del["version"] != 1.0 || del["summary"] != "deleted" || del["churn"] != 0.0 {
		t.Errorf("delete line = %v, want killed at version 1 with churn 0 (it served no one)", del)
	}
}

// TestHealth: /healthz says the process is up; /readyz whether the database
// can be reached, with the reason when it cannot.
func TestHealth(t *testing.T) {
	s := newServer(t, "", api.Options{})
	s.seed()
	if got := s.must(200, "GET", "/healthz", nil).json(t); got["status"] != "ok" {
		t.Errorf("healthz = %v", got)
	}
	if got := s.must(200, "GET", "/readyz", nil).json(t); got["status"] != "ready" || got["features"] != 6.0 {
		t.Errorf("readyz = %v, want ready with 6 features", got)
	}
	if err := s.db.Close(); err != nil {
		t.Fatal(err)
	}
	got := s.must(503, "GET", "/readyz", nil).json(t)
	if reason, _ := got["reason"].(string); got["status"] != "unavailable" || !strings.Contains(reason, "database") {
		t.Errorf("readyz with the database closed = %v, want unavailable with the reason", got)
	}
	s.must(200, "GET", "/healthz", nil)
	s.must(200, "GET", "/evaluate?feature=checkout&user=u", nil) // evaluation never needs the database
}

// TestReadyzReason: the reason of a failing readiness check is the store's
// message for its users.
func TestReadyzReason(t *testing.T) {
	var failure atomic.Pointer[error]
	ready := func(context.Context) error {
		if err := failure.Load(); err != nil {
			return *err
		}
		return nil
	}
	s := newServer(t, "", api.Options{Ready: ready})
	s.must(200, "GET", "/readyz", nil)
	busy := fmt.Errorf("ping database: %w", rollout.Errorf(rollout.EUnavailable, "the database is busy: try again shortly"))
	failure.Store(&busy)
	got := s.must(503, "GET", "/readyz", nil).json(t)
	if want := "the database cannot be reached: the database is busy: try again shortly"; got["reason"] != want {
		t.Errorf("readyz reason = %q, want %q", got["reason"], want)
	}
}
