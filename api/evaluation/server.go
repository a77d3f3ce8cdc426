// Package evaluation is the part of rollout's HTTP API that apps call on
// their hot path: evaluation (GET and POST /evaluate), OpenFeature's OFREP
// (POST /ofrep/v1/evaluate/flags[/{key}]), the sync API's snapshot for apps
// that evaluate in their own process (GET /sync/v1/snapshot, package
// client) and the counts of their evaluations (POST /api/exposures). Its
// Server reads the service's immutable snapshot, never the store, and
// changes nothing but exposure counts.
//
// Package api declares these routes in its one route table (their method,
// path, permission and body limit) with a Server's handlers, and answers
// their errors in its one error handler; the sync API's stream
// (GET /sync/v1/stream) is package stream's, with the budget of the other
// streams. What a Server needs of the rest, it declares: Service (the
// snapshot and the exposure counts), Metrics (the evaluations served) and
// Options.Decode (the API's JSON decoder).
//
// The files:
//
//   - server.go: Server, its Options and what it needs of the rest.
//   - evaluate.go: GET and POST /evaluate, their answers written by hand into
//     pooled buffers, and the parsing of their requests.
//   - ofrep.go: OFREP's single and bulk evaluations, their errors
//     (OFREPError) and bulk ETags, and the JSON readers the evaluation
//     routes share.
//   - context.go: the context of an evaluation, read from GET /evaluate's
//     query or a request's JSON.
//   - answers.go: the answer of each outcome, encoded once per snapshot.
//   - explain.go: POST /evaluate's "explain":true, bounded by
//     MaxExplainFeatures.
//   - costly.go: the slots in which costly evaluations run apart.
//   - snapshot.go: what the server derives from each snapshot: its number,
//     when it was seen, and bulk evaluation's ETag tag.
//   - sync.go: GET /sync/v1/snapshot, encoded and gzipped once per
//     snapshot, and POST /api/exposures (with the users experiments
//     count).
package evaluation

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollout/rollout/rollout/experiment"
	"github.com/rollout/rollout/rollout/exposure"
	"github.com/rollout/rollout/rollout/feature"
)

// Service is what a Server reads and changes: *rollout.Service.
type Service interface {
	// Snapshot returns the current snapshot, which evaluations read.
	Snapshot() *feature.Snapshot
	// AddExposureBatch counts a batch of an app's evaluations once.
	AddExposureBatch(ctx context.Context, batch string, counts []feature.Exposure) (exposure.BatchResult, error)
}

// Metrics count what a Server serves (package api's Metrics). A Server
// keeps, in each outcome it serves, the answer for its Metrics: the
// implementation must be comparable, and equal for the same metrics.
type Metrics interface {
	// Evaluations returns the counter of the evaluations of feature that
	// served bucket ("": none) for reason: a series of
	// rollout_evaluations_total.
	Evaluations(feature, bucket, reason string) prometheus.Counter
	// ForgetFeatures drops the series of the features keys, which were
	// deleted.
	ForgetFeatures(keys []string)
}

// Options configure a Server.
type Options struct {
	// Metrics count the evaluations served; required.
	Metrics Metrics
	// Decode reads the request body as exactly one JSON object into v, and
	// words what is wrong with it, as the API's other routes read theirs;
	// required. It reads POST /api/exposures, and a POST /evaluate body out
	// of the ordinary (see readEvaluateRequest).
	Decode func(c echo.Context, v any) error
	// WriteWindow bounds the write of each chunk of a snapshot (see
	// writeParts): a stream's write window.
	WriteWindow time.Duration
	// Costly bounds the costly evaluations that run at once (see
	// costly.go); the zero value is the defaults.
	Costly CostlyLimits
	// Experiments record the users that batches of exposures name;
	// nil: those users are ignored.
	Experiments Experiments
}

// Experiments record the users apps' in-app clients served
// (*experiment.Experiments): a batch of exposures names them, and its answer
// lists the features whose users to name.
type Experiments interface {
	// ExposedUsers records users and returns how many it recorded, and
	// the IDs of the feature rows experiments run on.
	ExposedUsers(ctx context.Context, users []experiment.ExposedUser) (int, []string, error)
}

// Server answers apps' requests from the service's snapshot. Its handlers
// are echo handlers, for package api's route table. Safe for concurrent
// use.
type Server struct {
	svc         Service
	metrics     Metrics
	decode      func(c echo.Context, v any) error
	writeWindow time.Duration
	snap        atomic.Pointer[snapshotState]
	sync        syncCache
	costly      *costly // the slots of costly evaluations
	experiments Experiments
}

// New returns a Server over svc, which takes in svc's current snapshot.
func New(svc Service, opts Options) *Server {
	s := &Server{svc: svc, metrics: opts.Metrics, decode: opts.Decode, writeWindow: opts.WriteWindow,
		costly: newCostly(opts.Costly), experiments: opts.Experiments}
	s.snapshotState()
	return s
}

// Snapshot takes in the service's current snapshot if it is new, and
// returns it with its number among the snapshots the server has served (1
// for the one it started with) and when the server first saw it. Package
// api calls it after each change it applies and before each scrape of its
// metrics, so that a swap is seen at once.
func (s *Server) Snapshot() (snap *feature.Snapshot, seq uint64, seen time.Time) {
	st := s.snapshotState()
	return st.snap, st.seq, st.seen
}

// Error codes of package api's, which its error handler answers 400 and
// 413.
const (
	codeBadRequest = "bad_request"
	codeTooLarge   = "too_large"
)

func badRequest(format string, args ...any) error {
	return feature.Errorf(codeBadRequest, format, args...)
}

// headerValue is h.Get(name) for a name in canonical form.
func headerValue(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}
