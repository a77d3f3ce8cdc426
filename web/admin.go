package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/webhook"
)

// The admin pages (tokens, webhooks; environments in environments.go) and
// the archived features. Each is a
// page whose script (admin.js) reads and changes what it shows through the
// JSON API: /api/tokens, /api/webhooks, /api/features?archived=true and the
// restore and purge routes, each with the access the API declares.

// adminPage is the data of tokens.html, webhooks.html and archived.html.
type adminPage struct {
	frame
	Title string
}

// adminRoutes are the dashboard's admin pages and the archived features.
func (h *handler) adminRoutes(ui []echo.MiddlewareFunc) []api.Route {
	page := func(name, title string) echo.HandlerFunc {
		return func(c echo.Context) error {
			return h.render(c, http.StatusOK, name, &adminPage{Title: title})
		}
	}
	const get = http.MethodGet
	return []api.Route{
		{Method: get, Path: "/ui/admin/tokens", Access: auth.PermAdmin, SignIn: true, Handler: page("tokens", "API tokens"), Middleware: ui},
		{Method: get, Path: "/ui/admin/webhooks", Access: auth.PermAdmin, SignIn: true, Handler: page("webhooks", "Webhooks"), Middleware: ui},
		{Method: get, Path: "/ui/admin/environments", Access: auth.PermAdmin, SignIn: true, Handler: h.environments, Middleware: ui},
		{Method: get, Path: "/ui/archived", Access: auth.PermRead, SignIn: true, Handler: page("archived", "Archived features"), Middleware: ui},
	}
}

// pausedHooks counts the paused webhooks, for the admins' notice; 0 when
// they cannot be read (the page still shows).
func (h *handler) pausedHooks(c echo.Context) int {
	if h.hooks == nil {
		return 0
	}
	all, err := h.hooks.List(c.Request().Context())
	if err != nil {
		h.logError(c, "count paused webhooks", err)
		return 0
	}
	n := 0
	for _, w := range all {
		if w.State == webhook.Paused {
			n++
		}
	}
	return n
}
