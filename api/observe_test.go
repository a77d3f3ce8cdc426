package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout/feature"
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

func newLoggedServer(t *testing.T, opts api.Options) (*testServer, *logBuffer) {
	t.Helper()
	logs := &logBuffer{}
	opts.Logger = slog.New(slog.NewJSONHandler(logs, nil))
	s := newServer(t, "", opts)
	return s, logs
}

// TestRequestLog: with RequestLog all, one line per request, with the
// request ID the response carries: the client's when it sent a sensible
// one, a new one otherwise.
func TestRequestLog(t *testing.T) {
	s, logs := newLoggedServer(t, api.Options{RequestLog: api.LogAll})
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

// TestAppRequestIDs: an app's answer carries the ID it sent, and, when it
// sent none, an ID only when something refers to it: an error answer (and
// its log line), or a request logged whatever its outcome. A slow answer
// logged afterwards has an ID in its log line only. The other routes always
// carry one. An answer to a request without Origin carries no Vary; a
// cross-origin one is answered by the CORS middleware.
func TestAppRequestIDs(t *testing.T) {
	evaluations := []struct {
		method, path string
		body         any
	}{
		{"GET", "/evaluate?feature=checkout&user=u", nil},
		{"POST", "/evaluate", map[string]any{"user": "u", "features": []string{"checkout"}}},
		{"POST", "/ofrep/v1/evaluate/flags/checkout", map[string]any{"context": map[string]any{"targetingKey": "u"}}},
		{"POST", "/ofrep/v1/evaluate/flags", map[string]any{"context": map[string]any{"targetingKey": "u"}}},
	}
	loggedWith := func(t *testing.T, logs *logBuffer, id string) int {
		n := 0
		for _, l := range logs.lines(t, "request") {
			if l["request_id"] == id {
				n++
			}
		}
		return n
	}
	t.Run("default", func(t *testing.T) {
		s, logs := newLoggedServer(t, api.Options{})
		s.seed()
		for _, e := range evaluations {
			r := s.must(200, e.method, e.path, e.body)
			if id := r.header.Get("X-Request-ID"); id != "" {
				t.Errorf("%s %s: X-Request-ID %q on an answer logged nowhere, want none", e.method, e.path, id)
			}
			if v := r.header.Values("Vary"); len(v) > 0 {
				t.Errorf("%s %s without Origin: Vary %q, want none", e.method, e.path, v)
			}
			if r := s.must(200, e.method, e.path, e.body, "X-Request-ID", "app-7"); r.header.Get("X-Request-ID") != "app-7" {
				t.Errorf("%s %s: sent X-Request-ID app-7, answered %q", e.method, e.path, r.header.Get("X-Request-ID"))
			}
			r = s.must(200, e.method, e.path, e.body, "Origin", "https://app.example")
			if r.header.Get("Vary") != "Origin" || r.header.Get("Access-Control-Allow-Origin") != "*" {
				t.Errorf("%s %s from another origin: Vary %q, Access-Control-Allow-Origin %q", e.method, e.path,
					r.header.Get("Vary"), r.header.Get("Access-Control-Allow-Origin"))
			}
		}
		if n := len(logs.lines(t, "request")); n != 0 {
			t.Fatalf("%d request lines for evaluations, want none", n)
		}
		for _, failed := range []struct {
			method, path string
			body         any
			status       int
		}{
			{"GET", "/evaluate?feature=missing&user=u", nil, 404},
			{"POST", "/ofrep/v1/evaluate/flags/missing", map[string]any{"context": map[string]any{"targetingKey": "u"}}, 404},
			{"POST", "/ofrep/v1/evaluate/flags/checkout", map[string]any{"context": map[string]any{}}, 400},
		} {
			r := s.must(failed.status, failed.method, failed.path, failed.body)
			id := r.header.Get("X-Request-ID")
			if len(id) != 26 {
				t.Errorf("%s %s = %d: X-Request-ID %q, want a new one", failed.method, failed.path, failed.status, id)
			}
			if n := loggedWith(t, logs, id); n != 1 {
				t.Errorf("%s %s = %d: %d request lines with its ID %q, want 1", failed.method, failed.path, failed.status, n, id)
			}
		}
		if id := s.must(200, "GET", "/api/features", nil).header.Get("X-Request-ID"); len(id) != 26 {
			t.Errorf("GET /api/features: X-Request-ID %q, want a new one", id)
		}
	})
	for _, tt := range []struct {
		name string
		opts api.Options
	}{
		{"all", api.Options{RequestLog: api.LogAll}},
		{"every evaluation sampled", api.Options{SampleEvaluations: 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, logs := newLoggedServer(t, tt.opts)
			s.seed()
			for _, e := range evaluations {
				id := s.must(200, e.method, e.path, e.body).header.Get("X-Request-ID")
				if len(id) != 26 {
					t.Errorf("%s %s logged: X-Request-ID %q, want a new one", e.method, e.path, id)
				} else if n := loggedWith(t, logs, id); n != 1 {
					t.Errorf("%s %s: %d request lines with its ID %q, want 1", e.method, e.path, n, id)
				}
			}
		})
	}
	t.Run("slow", func(t *testing.T) {
		s, logs := newLoggedServer(t, api.Options{SlowRequest: time.Nanosecond})
		s.seed()
		r := s.must(200, "GET", "/evaluate?feature=checkout&user=u", nil)
		if id := r.header.Get("X-Request-ID"); id != "" {
			t.Errorf("slow evaluation answered with X-Request-ID %q, want none: it was sent before it was known slow", id)
		}
		lines := logs.lines(t, "request")
		if len(lines) != 1 {
			t.Fatalf("%d request lines for one slow evaluation, want 1", len(lines))
		}
		if id, _ := lines[0]["request_id"].(string); len(id) != 26 {
			t.Errorf("slow evaluation logged with request_id %q, want a new one", id)
		}
	})
}

// TestChangeLog: one line per applied change, with its churn; none for a
// dry run or a refused change.
func TestChangeLog(t *testing.T) {
	s, logs := newLoggedServer(t, api.Options{})
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
		add["version"] != 2.0 || add["summary"] != "added bucket D" || add["actor"] != "anonymous" ||
		math.Abs(churn-0.2226766) > 1e-6 {
		t.Errorf("change line = %v, want add_bucket of checkout to version 2 with churn 0.2226766", add)
	}
	del := changes[1]
	if del["kind"] != "archive" || del["feature"] != "killed" || del["version"] != 1.0 || del["summary"] != "archived" || del["churn"] != 0.0 {
		t.Errorf("archive line = %v, want killed at version 1 with churn 0 (it served no one)", del)
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
	busy := fmt.Errorf("ping database: %w", feature.Errorf(feature.EUnavailable, "the database is busy: try again shortly"))
	failure.Store(&busy)
	got := s.must(503, "GET", "/readyz", nil).json(t)
	if want := "the database cannot be reached: the database is busy: try again shortly"; got["reason"] != want {
		t.Errorf("readyz reason = %q, want %q", got["reason"], want)
	}
}

// TestRequestLogModes: which requests each RequestLog logs, through the
// real router: by default changes and errors, never a served evaluation;
// a sample of one in one logs every evaluation.
func TestRequestLogModes(t *testing.T) {
	type req struct {
		name, method, path string
		body               any
		status             int
	}
	reqs := []req{
		{"GET /evaluate", "GET", "/evaluate?feature=checkout&user=u", nil, 200},
		{"POST /evaluate", "POST", "/evaluate", map[string]any{"user": "u", "features": []string{"checkout", "banner"}}, 200},
		{"OFREP single", "POST", "/ofrep/v1/evaluate/flags/checkout", map[string]any{"context": map[string]any{"targetingKey": "u"}}, 200},
		{"OFREP bulk", "POST", "/ofrep/v1/evaluate/flags", map[string]any{"context": map[string]any{"targetingKey": "u"}}, 200},
		{"read", "GET", "/api/features/checkout", nil, 200},
		{"change", "POST", "/api/features", map[string]any{"key": "new", "buckets": []map[string]any{{"name": "A", "replicas": 1}}}, 201},
		{"failed evaluation", "GET", "/evaluate?feature=missing&user=u", nil, 404},
		{"unmatched", "GET", "/nowhere", nil, 404},
	}
	evaluations := map[string]bool{"GET /evaluate": true, "POST /evaluate": true, "OFREP single": true, "OFREP bulk": true}
	tests := []struct {
		name   string
		opts   api.Options
		logged func(name string) bool
	}{
		{"default", api.Options{}, func(n string) bool { return n == "change" || n == "failed evaluation" || n == "unmatched" }},
		{"errors", api.Options{RequestLog: api.LogErrors}, func(n string) bool { return n == "failed evaluation" || n == "unmatched" }},
		{"all", api.Options{RequestLog: api.LogAll}, func(string) bool { return true }},
		{"none", api.Options{RequestLog: api.LogNone}, func(string) bool { return false }},
		{"default with every evaluation sampled", api.Options{SampleEvaluations: 1}, func(n string) bool {
			return evaluations[n] || n == "change" || n == "failed evaluation" || n == "unmatched"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, logs := newLoggedServer(t, tt.opts)
			s.seed()
			for i, r := range reqs {
				id := fmt.Sprintf("req-%d", i)
				s.must(r.status, r.method, r.path, r.body, "X-Request-ID", id)
				n := 0
				for _, l := range logs.lines(t, "request") {
					if l["request_id"] == id {
						n++
					}
				}
				if want := tt.logged(r.name); n != map[bool]int{false: 0, true: 1}[want] {
					t.Errorf("%s (%d): %d request lines, want logged = %v", r.name, r.status, n, want)
				}
			}
		})
	}
}

// countingWriter counts the bytes and lines written to it.
type countingWriter struct {
	mu           sync.Mutex
	bytes, lines int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.bytes += len(p)
	w.lines += bytes.Count(p, []byte("\n"))
	return len(p), nil
}

// TestEvaluationLogVolume: at the default, evaluations through the real
// router write no log line at all, so a day of them at full speed writes
// nothing; with --log-requests all the same requests would fill a disk
// (the test logs both extrapolations). Errors and changes are still logged.
func TestEvaluationLogVolume(t *testing.T) {
	const perKind = 500
	const rate = 30_000 // evaluations per second, the full speed
	evaluations := []func(i int) *http.Request{
		func(i int) *http.Request {
			return httptest.NewRequest("GET", fmt.Sprintf("/evaluate?feature=f&user=u%d", i), nil)
		},
		func(i int) *http.Request {
			return httptest.NewRequest("POST", "/evaluate", strings.NewReader(fmt.Sprintf(`{"user":"u%d","features":["f"]}`, i)))
		},
		func(i int) *http.Request {
			return httptest.NewRequest("POST", "/ofrep/v1/evaluate/flags/f", strings.NewReader(fmt.Sprintf(`{"context":{"targetingKey":"u%d"}}`, i)))
		},
		func(i int) *http.Request {
			return httptest.NewRequest("POST", "/ofrep/v1/evaluate/flags", strings.NewReader(fmt.Sprintf(`{"context":{"targetingKey":"u%d"}}`, i)))
		},
	}
	perDay := func(bytes, requests int) float64 { return float64(bytes) / float64(requests) * rate * 86400 }
	volume := map[api.RequestLog]*countingWriter{}
	for _, mode := range []api.RequestLog{api.LogChanges, api.LogAll} {
		out := &countingWriter{}
		volume[mode] = out
		h, _ := newHandler(t, api.Options{Logger: slog.New(slog.NewTextHandler(out, nil)), RequestLog: mode}, nil)
		for i := range perKind {
			for _, req := range evaluations {
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req(i))
				if rec.Code != http.StatusOK {
					t.Fatalf("%s: evaluation answered %d %s, want 200", mode, rec.Code, rec.Body)
				}
			}
		}
		t.Logf("--log-requests %s: %d evaluations wrote %d lines, %d bytes: %.3g MB a day at %d evaluations/s",
			mode, perKind*len(evaluations), out.lines, out.bytes, perDay(out.bytes, perKind*len(evaluations))/1e6, rate)
		if mode == api.LogChanges {
			continue
		}
		if out.lines != perKind*len(evaluations) {
			t.Errorf("--log-requests all: %d lines for %d evaluations, want one each", out.lines, perKind*len(evaluations))
		}
	}
	def := volume[api.LogChanges]
	if def.lines != 0 || def.bytes != 0 {
		t.Fatalf("default: evaluations wrote %d lines (%d bytes), want none", def.lines, def.bytes)
	}
	// Errors and changes are still logged at the default.
	h, _ := newHandler(t, api.Options{Logger: slog.New(slog.NewTextHandler(def, nil))}, nil)
	for _, r := range []struct {
		req  *http.Request
		want int
	}{
		{httptest.NewRequest("GET", "/evaluate?feature=missing&user=u", nil), 404},
		{httptest.NewRequest("PATCH", "/api/features/f", strings.NewReader(`{"enabled":false}`)), 200},
	} {
		r.req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r.req)
		if rec.Code != r.want {
			t.Fatalf("%s %s = %d %s, want %d", r.req.Method, r.req.URL, rec.Code, rec.Body, r.want)
		}
	}
	if def.lines != 3 { // the error's request line, the change's request and change lines
		t.Errorf("default: an error and a change wrote %d lines, want 3", def.lines)
	}
}

// TestEvaluationCORS: browser apps on other origins may call the evaluation
// endpoints and read the ETag; the rest of the API stays same-origin.
func TestEvaluationCORS(t *testing.T) {
	s := newServer(t, "", api.Options{})
	s.seed()
	const origin = "https://app.example"
	for _, path := range []string{"/ofrep/v1/evaluate/flags", "/ofrep/v1/evaluate/flags/checkout", "/evaluate"} {
		r := s.do("OPTIONS", path, nil, "Origin", origin, "Access-Control-Request-Method", "POST",
			"Access-Control-Request-Headers", "content-type,if-none-match")
		allowHeaders := strings.ToLower(r.header.Get("Access-Control-Allow-Headers"))
		if r.status != 204 || r.header.Get("Access-Control-Allow-Origin") != "*" ||
			!strings.Contains(r.header.Get("Access-Control-Allow-Methods"), "POST") ||
			!strings.Contains(allowHeaders, "if-none-match") || !strings.Contains(allowHeaders, "content-type") {
			t.Errorf("preflight of %s = %d %v, want 204 allowing any origin to POST with If-None-Match", path, r.status, r.header)
		}
	}
	r := s.must(200, "POST", "/ofrep/v1/evaluate/flags", map[string]any{"context": map[string]any{"targetingKey": "u"}}, "Origin", origin)
	if r.header.Get("Access-Control-Allow-Origin") != "*" || !strings.Contains(r.header.Get("Access-Control-Expose-Headers"), "ETag") {
		t.Errorf("bulk evaluation from %s: headers %v, want the origin allowed and ETag exposed", origin, r.header)
	}
	r = s.must(200, "GET", "/evaluate?feature=checkout&user=u", nil, "Origin", origin)
	if r.header.Get("Access-Control-Allow-Origin") != "*" {
		t.Errorf("GET /evaluate from %s: headers %v, want the origin allowed", origin, r.header)
	}
	r = s.do("OPTIONS", "/api/features", nil, "Origin", origin, "Access-Control-Request-Method", "POST")
	if r.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("preflight of /api/features allowed origin %q, want none", r.header.Get("Access-Control-Allow-Origin"))
	}
}
