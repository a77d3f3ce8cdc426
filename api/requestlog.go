package api

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/rollout/rollout/rollout/auth"
)

// RequestLog chooses which requests get a "request" log line. Every request
// is counted in the metrics whatever it chooses; changes applied also get
// their "change" line.
type RequestLog int

const (
	// LogChanges, the default, logs state-changing requests (POST, PUT,
	// PATCH, DELETE to routes that change something: not evaluation, not
	// previews), errors (4xx and 5xx) and slow requests, so that an
	// operator's log stays readable at tens of thousands of evaluations a
	// second.
	LogChanges RequestLog = iota
	// LogAll logs every request.
	LogAll
	// LogErrors logs errors and slow requests only.
	LogErrors
	// LogNone logs no request.
	LogNone
)

// DefaultSlowRequest is the duration over which a request is slow, and
// logged unless RequestLog is LogNone.
const DefaultSlowRequest = time.Second

var requestLogNames = [...]string{LogChanges: "changes", LogAll: "all", LogErrors: "errors", LogNone: "none"}

func (l RequestLog) String() string {
	if l >= 0 && int(l) < len(requestLogNames) {
		return requestLogNames[l]
	}
	return fmt.Sprintf("RequestLog(%d)", int(l))
}

// ParseRequestLog returns the RequestLog named all, changes, errors or none.
func ParseRequestLog(name string) (RequestLog, error) {
	for l, n := range requestLogNames {
		if n == name {
			return RequestLog(l), nil
		}
	}
	return 0, fmt.Errorf("request log %q: use all, changes, errors or none", name)
}

// requestLogger decides which requests are logged.
type requestLogger struct {
	mode RequestLog
	slow time.Duration
	// sample logs about one evaluation in sample (0: none), beyond those
	// mode logs.
	sample uint64
}

// sampled reports whether an evaluation starting now is one of the sample
// to log; it is decided when the request starts, so that the request has
// its ID (see observe) before it is answered.
func (l requestLogger) sampled() bool {
	return l.sample > 0 && l.mode != LogNone && rand.Uint64N(l.sample) == 0
}

// logs reports whether the request is to be logged: its method, the
// permission its route needs, its status and duration, and whether it is
// a sampled evaluation.
func (l requestLogger) logs(method string, need auth.Permission, status int, d time.Duration, sampled bool) bool {
	switch l.mode {
	case LogNone:
		return false
	case LogAll:
		return true
	}
	if status >= 400 || d > l.slow {
		return true
	}
	if need.ForApps() {
		return sampled
	}
	return l.mode == LogChanges && isChange(method, need)
}

// isChange reports whether a request of method to a route needing need
// may change state: an unsafe method to a route that is neither
// evaluation nor a read (such as a preview). Sign-in and sign-out count.
func isChange(method string, need auth.Permission) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return !need.ForApps() && need != auth.PermRead
}
