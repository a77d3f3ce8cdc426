package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout/auth"
)

// TestUndeclaredRouteNeedsAdmin: a route added to the router without a
// declaration, and a method a declared pattern does not serve (echo's
// 405), need an admin token: forgetting to declare a route fails closed.
func TestUndeclaredRouteNeedsAdmin(t *testing.T) {
	g := newGuardedServer(t)
	g.e.GET("/undeclared", func(c echo.Context) error { return c.String(http.StatusOK, "served") })
	for _, tt := range []struct {
		method, path string
		want         map[string]int // by role
	}{
		{"GET", "/undeclared", map[string]int{"none": 401, "client": 403, "sdk": 403, "viewer": 403, "editor": 403, "admin": 200}},
		{"PUT", "/api/features", map[string]int{"none": 401, "viewer": 403, "editor": 403, "admin": 405}},
		{"DELETE", "/ui/features/f", map[string]int{"none": 401, "viewer": 403, "editor": 403, "admin": 404}},
		{"GET", "/nothing/here", map[string]int{"none": 404, "viewer": 404, "admin": 404}},
	} {
		for role, want := range tt.want {
			if got, body := g.send(t, role, tt.method, tt.path, nil); got != want {
				t.Errorf("%s %s as %s = %d %.120s, want %d", tt.method, tt.path, role, got, body, want)
			}
		}
	}
}

// TestRouteDeclaredTwice: a route declared twice is refused when the
// server is made, rather than one declaration silently replacing the other.
func TestRouteDeclaredTwice(t *testing.T) {
	g := newGuardedServer(t)
	defer func() {
		if msg, _ := recover().(string); !strings.Contains(msg, "GET /api/features is declared twice") {
			t.Errorf("New with GET /api/features declared twice: panic %q, want it named", msg)
		}
	}()
	api.New(g.svc, api.Options{Routes: []api.Route{{Method: http.MethodGet, Path: "/api/features", Access: auth.PermRead,
		Handler: func(c echo.Context) error { return nil }}}})
}
