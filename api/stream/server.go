// Package stream is the part of rollout's HTTP API that holds a connection
// open: the sync API's stream of changes for apps that evaluate in their own
// process (GET /sync/v1/stream, package client) and the dashboard's
// (GET /api/events), both Server-Sent Events, with the budget every stream
// has (in all and per token), the end of a stream whose token no longer
// allows it, and the writer that drops a client that does not read.
//
// Package api declares these routes in its one route table (their method,
// path and permission, and Route.Stream, which puts them inside Admit) with
// a Server's handlers, and answers their errors in its one error handler.
// What a Server needs of the rest, it declares: Access (the API's tokens and
// sessions) and Service (the commits and snapshot of the request's
// environment).
//
// The files:
//
//   - server.go: Server, its Options and what it needs of the rest.
//   - budget.go: the budget of streams (Admit), their end when revoked,
//     and the writer of every stream.
//   - sync.go: GET /sync/v1/stream, its change events encoded once for all
//     the streams.
//   - events.go: GET /api/events, the dashboard's stream of changes.
package stream

import (
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
)

// Access is what a Server asks of the API's access control (package api's
// Auth): who holds a stream, and whether they still may.
type Access interface {
	// TokenID returns the ID of the valid token (or session) that r's
	// credentials name, "" for none.
	TokenID(r *http.Request) string
	// Allows reports whether r's credentials allow need now, as the
	// access check would decide for a request with them.
	Allows(r *http.Request, need auth.Permission) bool
	// Changed returns a channel closed at the next reload of the tokens.
	Changed() <-chan struct{}
}

// Service is what a stream follows: the service of the request's
// environment (*rollout.Service).
type Service interface {
	// Subscribe returns the batches of commits the service takes in, and
	// the function that ends the subscription; the channel is closed when
	// the subscriber falls too far behind.
	Subscribe() (<-chan []rollout.Commit, func())
	// Snapshot returns the current snapshot.
	Snapshot() *feature.Snapshot
}

// Options configure a Server.
type Options struct {
	// Access identifies the holders of streams and ends those no longer
	// allowed; nil: everything is open, and streams are counted as one
	// holder's.
	Access Access
	// Log receives the warning that the budget was reached; nil:
	// discarded.
	Log *slog.Logger
	// Registerer receives the streams' metrics; required.
	Registerer prometheus.Registerer
	// Max bounds the open streams, and PerToken those of one token; 0
	// means DefaultMax, and half of Max.
	Max, PerToken int
	// Closing, when closed, ends every stream, so that a graceful
	// shutdown need not wait for them; nil: never.
	Closing <-chan struct{}
}

// Server answers the API's streams and keeps their budget. Safe for
// concurrent use.
type Server struct {
	access        Access // nil: everything is open
	log           *slog.Logger
	max, perToken int
	window        time.Duration // of each write (see streamWriteWindow)
	closing       <-chan struct{}
	events        changeEvents

	mu      sync.Mutex
	open    int
	byToken map[string]int // open streams by token ID ("": no token)
	warned  bool           // that the budget was reached

	refused *prometheus.CounterVec // reason: budget, token
	ended   *prometheus.CounterVec // reason: revoked, slow
}

// New returns a Server with opts, its metrics registered.
func New(opts Options) *Server {
	st := &Server{access: opts.Access, log: opts.Log, max: opts.Max, perToken: opts.PerToken,
		window: streamWriteWindow, closing: opts.Closing, byToken: map[string]int{}}
	if st.log == nil {
		st.log = slog.New(slog.DiscardHandler)
	}
	if st.max <= 0 {
		st.max = DefaultMax
	}
	if st.perToken <= 0 {
		st.perToken = max(st.max/2, 1)
	}
	st.refused = register(opts.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rollout_streams_refused_total",
		Help: "Streams refused at their budget: budget (the server's), token (the token's share).",
	}, []string{"reason"}))
	st.ended = register(opts.Registerer, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rollout_streams_ended_total",
		Help: "Streams the server ended: revoked (the token no longer allows them), slow (the client did not read).",
	}, []string{"reason"}))
	register(opts.Registerer, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rollout_streams_open",
		Help: "Streams open (GET /sync/v1/stream).",
	}, func() float64 { return float64(st.openCount()) }))
	return st
}

// WriteWindow is how long each write of a stream may take, beyond the time
// its size takes at the slowest rate a client may read: package api gives
// it to the evaluation routes' large answers too.
func (st *Server) WriteWindow() time.Duration { return st.window }
