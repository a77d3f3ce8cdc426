// Package experiments is the part of rollout's HTTP API that runs
// experiments: their metrics (/api/metrics), the events apps track
// (POST /api/track, with an app's token), and each feature's experiments
// with their results (/api/features/K/experiments). Its handlers decode,
// call package experiment (the domain) and encode.
//
// Package api declares these routes in its one route table (their method,
// path, permission, body limit, and the rate limit of POST /api/track per
// token, which exposures share) with a Server's handlers, and answers their
// errors in its one error handler. What a Server needs of the rest, it
// declares: Requests (the API's JSON decoder, who sends a request, and the
// experiments of its environment).
//
// The files:
//
//   - server.go: Server and what it needs of the rest.
//   - experiments.go: the handlers of metrics, tracked events and
//     experiments, and the bound of POST /api/track's body.
package experiments

import (
	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/rollout/experiment"
)

// Requests is what a Server asks of package api about a request.
type Requests interface {
	// Decode reads the request body as exactly one JSON object into v,
	// and words what is wrong with it, as the API's other routes read
	// theirs.
	Decode(c echo.Context, v any) error
	// DecodeOptional is Decode for a body that may be absent, such as a
	// DELETE's: an empty body leaves v as it is.
	DecodeOptional(c echo.Context, v any) error
	// Actor names who sends the request, for the audit trail: its token's
	// name, "" with none.
	Actor(c echo.Context) string
	// Experiments returns the experiments of the request's environment
	// (its token's, its ?env=, or production), and the API's error for an
	// environment that does not exist.
	Experiments(c echo.Context) (*experiment.Experiments, error)
}

// Server answers the routes of experiments. Safe for concurrent use.
type Server struct {
	req Requests
}

// New returns a Server over req.
func New(req Requests) *Server { return &Server{req: req} }
