package api

import (
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout/auth"
)

// TestRequestLoggerLogs: which requests each mode logs, slow ones included;
// evaluations only when failed, slow, or sampled.
func TestRequestLoggerLogs(t *testing.T) {
	const slow = time.Second
	type req struct {
		name          string
		method, route string
		status        int
		d             time.Duration
	}
	reqs := []req{
		{"evaluation", "GET", "/evaluate", 200, time.Millisecond},
		{"ofrep", "POST", "/ofrep/v1/evaluate/flags/:key", 200, time.Millisecond},
		{"bulk", "POST", "/evaluate", 200, time.Millisecond},
		{"slow evaluation", "GET", "/evaluate", 200, slow + time.Nanosecond},
		{"failed evaluation", "GET", "/evaluate", 400, time.Millisecond},
		{"server error", "GET", "/api/features", 500, time.Millisecond},
		{"read", "GET", "/api/features", 200, time.Millisecond},
		{"preview", "POST", "/api/features/:key/preview", 200, time.Millisecond},
		{"create", "POST", "/api/features", 201, time.Millisecond},
		{"delete", "DELETE", "/api/features/:key", 204, time.Millisecond},
		{"sign-in", "POST", "/ui/login", 303, time.Millisecond},
		{"unlisted route", "POST", "/api/unlisted", 200, time.Millisecond},
		{"unmatched", "GET", "", 404, time.Millisecond},
		{"exactly the threshold", "GET", "/api/features", 200, slow},
	}
	// want[mode][request name]; absent means not logged.
	want := map[RequestLog]map[string]bool{
		LogChanges: {"slow evaluation": true, "failed evaluation": true, "server error": true, "create": true,
			"delete": true, "sign-in": true, "unlisted route": true, "unmatched": true},
		LogErrors: {"slow evaluation": true, "failed evaluation": true, "server error": true, "unmatched": true},
		LogNone:   {},
		LogAll:    {},
	}
	for _, r := range reqs {
		want[LogAll][r.name] = true
	}
	for mode, logged := range want {
		l := requestLogger{mode: mode, slow: slow}
		for _, r := range reqs {
			if got := l.logs(r.method, accessOf(r.method, r.route), r.status, r.d, false); got != logged[r.name] {
				t.Errorf("%s: logs(%s %q, %d, %v) = %v, want %v", mode, r.method, r.route, r.status, r.d, got, logged[r.name])
			}
		}
	}
}

// accessOf returns what a request of method to the route pattern needs, as
// the server decides it: the API's routes, the dashboard's sign-in, and
// undeclared routes.
func accessOf(method, pattern string) auth.Permission {
	access := RouteAccess(Options{Routes: []Route{{Method: "POST", Path: "/ui/login", Access: Public}}})
	if need, ok := access[method+" "+pattern]; ok {
		return need
	}
	return undeclared(method, pattern).Access
}

// TestRequestLoggerSample: a sample of one in one takes every evaluation,
// one in four about a quarter, and a sampled evaluation is logged; sampling
// adds nothing to a mode that logs none, nor to a read.
func TestRequestLoggerSample(t *testing.T) {
	every := requestLogger{mode: LogChanges, slow: time.Second, sample: 1}
	if !every.sampled() || !every.logs("GET", auth.PermEvaluate, 200, 0, every.sampled()) {
		t.Error("sample 1 does not log an evaluation")
	}
	if every.logs("GET", auth.PermRead, 200, 0, true) {
		t.Error("a sampled read is logged, though reads are not evaluations")
	}
	quarter := requestLogger{mode: LogChanges, slow: time.Second, sample: 4}
	n := 0
	for range 4000 {
		if quarter.sampled() {
			n++
		}
	}
	if n < 800 || n > 1200 {
		t.Errorf("sample 4 took %d of 4000 evaluations, want about 1000", n)
	}
	none := requestLogger{mode: LogNone, slow: time.Second, sample: 1}
	if none.sampled() || none.logs("GET", auth.PermEvaluate, 200, 0, true) {
		t.Error("mode none samples or logs an evaluation")
	}
	off := requestLogger{mode: LogChanges, slow: time.Second}
	if off.sampled() {
		t.Error("sample 0 samples an evaluation")
	}
}

func TestParseRequestLog(t *testing.T) {
	for _, l := range []RequestLog{LogChanges, LogAll, LogErrors, LogNone} {
		got, err := ParseRequestLog(l.String())
		if err != nil || got != l {
			t.Errorf("ParseRequestLog(%q) = %v, %v, want %v", l.String(), got, err, l)
		}
	}
	for _, bad := range []string{"", "ALL", "verbose"} {
		if _, err := ParseRequestLog(bad); err == nil {
			t.Errorf("ParseRequestLog(%q) succeeded, want an error", bad)
		}
	}
}

// TestNewRequestID: IDs from many batches are all different, 26 characters
// of the base32 alphabet, each a header value no append can write into
// another's.
func TestNewRequestID(t *testing.T) {
	seen := map[string]bool{}
	for range 10_000 {
		v := newRequestID()
		if len(v) != 1 || cap(v) != 1 {
			t.Fatalf("value %q has len %d, cap %d; want 1, 1", v, len(v), cap(v))
		}
		id := v[0]
		if len(id) != 26 || strings.Trim(id, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") != "" {
			t.Fatalf("ID %q: want 26 characters of the base32 alphabet", id)
		}
		if seen[id] {
			t.Fatalf("ID %q handed out twice", id)
		}
		seen[id] = true
	}
}
