package api

import (
	"strings"

	"github.com/rollout/rollout/rollout"
)

// public marks a route that needs no token.
const public rollout.Permission = -1

// routeAccess is what each route needs, by method and route pattern: the
// pattern echo matched, never the request path's text, so that escapes such
// as %2F, dot segments or doubled slashes cannot make a request look like
// another route. It lists the API's routes and the dashboard's (web.Register):
// a route missing from it needs an admin token (see accessOf), and a test
// checks that every registered route is listed.
var routeAccess = map[string]rollout.Permission{
	"GET /healthz":  public,
	"HEAD /healthz": public,
	"GET /readyz":   public,
	"HEAD /readyz":  public,

	"GET /evaluate":                      rollout.PermEvaluate,
	"POST /evaluate":                     rollout.PermEvaluate,
	"POST /ofrep/v1/evaluate/flags/:key": rollout.PermEvaluate,
	"POST /ofrep/v1/evaluate/flags":      rollout.PermEvaluate,
	// The sync API and the counts of apps that evaluate in process
	// (package client): tokens of the sdk role, not the client role of
	// browsers. The snapshot holds every feature's configuration.
	"GET /sync/v1/snapshot": rollout.PermSync,
	"GET /sync/v1/stream":   rollout.PermSync,
	"POST /api/exposures":   rollout.PermSync,

	"GET /metrics":       rollout.PermRead,
	"GET /debug/pprof/*": rollout.PermAdmin,

	"GET /api/features":                         rollout.PermRead,
	"POST /api/features":                        rollout.PermWrite,
	"GET /api/features/:key":                    rollout.PermRead,
	"PATCH /api/features/:key":                  rollout.PermWrite,
	"DELETE /api/features/:key":                 rollout.PermWrite,
	"POST /api/features/:key/buckets":           rollout.PermWrite,
	"PUT /api/features/:key/buckets":            rollout.PermWrite,
	"POST /api/features/:key/plan":              rollout.PermRead, // changes nothing
	"PUT /api/features/:key/buckets/:name":      rollout.PermWrite,
	"DELETE /api/features/:key/buckets/:name":   rollout.PermWrite,
	"PUT /api/features/:key/overrides/:user":    rollout.PermWrite,
	"DELETE /api/features/:key/overrides/:user": rollout.PermWrite,
	"POST /api/features/:key/preview":           rollout.PermRead, // changes nothing
	"POST /api/features/:key/reshuffle":         rollout.PermWrite,
	"POST /api/features/:key/rollback":          rollout.PermWrite,
	"GET /api/features/:key/versions":           rollout.PermRead,
	"GET /api/features/:key/versions/:version":  rollout.PermRead,
	"GET /api/features/:key/users/:user":        rollout.PermRead,
	"GET /api/features/:key/exposures":          rollout.PermRead,
	"GET /api/ramps":                            rollout.PermRead,
	"GET /api/features/:key/ramps":              rollout.PermRead,
	"POST /api/features/:key/ramps":             rollout.PermWrite,
	"GET /api/features/:key/ramps/:id":          rollout.PermRead,
	"POST /api/features/:key/ramps/:id/pause":   rollout.PermWrite,
	"POST /api/features/:key/ramps/:id/resume":  rollout.PermWrite,
	"POST /api/features/:key/ramps/:id/cancel":  rollout.PermWrite,
	"GET /api/changes":                          rollout.PermRead,

	// The dashboard.
	"GET /":                 rollout.PermRead,
	"GET /ui":               rollout.PermRead,
	"GET /ui/":              rollout.PermRead,
	"GET /ui/features/:key": rollout.PermRead,
	"GET /ui/changes":       rollout.PermRead,
	"GET /ui/*":             rollout.PermRead,
	"GET /ui/static/*":      public,
	"GET /ui/login":         public,
	"POST /ui/login":        public,
	"POST /ui/logout":       public,
}

// accessOf returns what a request needs, given its method and the route
// pattern echo matched for it ("" when nothing matched: echo answers 404
// and no handler of ours runs). Anything else missing from routeAccess — a
// route registered without an entry, or a method the pattern does not
// serve (echo's 405) — needs an admin token, so that forgetting to list a
// route fails closed.
func accessOf(method, pattern string) rollout.Permission {
	if need, ok := accessByMethod[method][pattern]; ok {
		return need
	}
	if pattern == "" {
		return public
	}
	return rollout.PermAdmin
}

// accessByMethod is routeAccess by method, then pattern: looking a request
// up in it builds no "METHOD pattern" string, which every request would
// allocate.
var accessByMethod = func() map[string]map[string]rollout.Permission {
	out := map[string]map[string]rollout.Permission{}
	for route, need := range routeAccess {
		method, pattern, _ := strings.Cut(route, " ")
		if out[method] == nil {
			out[method] = map[string]rollout.Permission{}
		}
		out[method][pattern] = need
	}
	return out
}()
