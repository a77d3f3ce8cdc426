// Package web is rollout's dashboard for product managers: server-rendered
// pages that show each feature's buckets with their exact shares of users, the
// churn of every change, and forms that preview a change's churn before
// applying it.
//
// Pages read the rollout.Service of the request's environment directly.
// Every change goes through the JSON API (/api/...) from the page's script,
// in the same environment, first as a dry run whose report the page shows,
// then for real once the user confirms; the API's cross-origin protection
// covers those requests. The templates, script and stylesheet are embedded
// in the binary and load nothing from elsewhere.
//
// People sign in with an API token (session.go) or, where the server has
// single sign-on, with an OpenID Connect provider (sso.go).
//
// The files: web.go (routes, assets, rendering), session.go (sign-in and
// each page's frame), sso.go (single sign-on), environments.go (the
// environment of a page, the switcher, promotions, compare and the admins'
// environments page), list.go (the features list), pages.go (a feature's
// page, the audit log, and its scheduled changes: templates/schedules.html
// with static/schedules.js), view.go (bars, charts and words), overtime.go,
// ramps.go, pm.go, targeting.go (rules, segments), requests.go (change
// requests, the inbox, settings), user.go (what a user gets) and admin.go
// (tokens, webhooks, archived).
package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"html/template"
	"io/fs"
	"log/slog"
	"mime"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/webhook"
)

// DefaultSampleUsers is the number of synthetic users ("user:0", "user:1", …)
// a feature's page evaluates to count the share each bucket serves.
const DefaultSampleUsers = 10_000

// contentSecurityPolicy lets pages run only the embedded script and style,
// talk only to this server, and refuses to be framed.
const contentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// Options configure the dashboard.
type Options struct {
	Logger *slog.Logger // nil: discard
	// SampleUsers is how many synthetic users a feature's page evaluates to
	// show the share each bucket serves beside the exact share; 0 means
	// DefaultSampleUsers.
	SampleUsers int
	// Sessions signs users in with a token; nil: no sign-in page.
	Sessions Sessions
	// Webhooks, when not nil, let admins' pages say when a webhook is
	// paused.
	Webhooks *webhook.Hooks
	// SSO, when not nil, signs people in with an OpenID Connect provider
	// (see NewSSO).
	SSO *SSO
	// Environments are the environments the server serves, the service
	// given to Routes being one of them; nil: that service's alone.
	Environments *rollout.Environments
}

// handler serves the dashboard's pages.
type handler struct {
	svc      *rollout.Service // the default environment's: see in
	envs     *rollout.Environments
	log      *slog.Logger
	sessions Sessions
	hooks    *webhook.Hooks
	sso      *SSO
	sample   int
	pages    map[string]*template.Template
	assets   assets
	// evaluated keeps the list's last evaluation hours a while.
	evaluated lastEvaluations
}

// Routes returns the dashboard's routes, for the API to serve beside its own
// (api.Options.Routes): / redirects to /ui/, the features list, each
// feature's page under /ui/features/KEY, the changes, the sign-in page, and
// the embedded assets under /ui/static/. Pages need a token that may read;
// the sign-in page and the assets need none. Everything under /ui carries
// a strict Content-Security-Policy. Each page reads the service of the
// request's environment (its ?env=, its token's, else svc's: see in); their
// script changes features through the JSON API, which the same server
// serves, in the same environment. The handlers are safe for concurrent
// use.
func Routes(svc *rollout.Service, opts Options) []api.Route {
	h := &handler{svc: svc, envs: opts.Environments, log: opts.Logger, sample: opts.SampleUsers, sessions: opts.Sessions, hooks: opts.Webhooks, sso: opts.SSO, assets: loadAssets()}
	if h.envs == nil {
		h.envs = rollout.OneEnvironment(svc)
	}
	if h.log == nil {
		h.log = slog.New(slog.DiscardHandler)
	}
	if h.sample <= 0 {
		h.sample = DefaultSampleUsers
	}
	h.pages = parsePages(h.assets)

	toUI := func(c echo.Context) error { return c.Redirect(http.StatusFound, "/ui/") }
	notFound := func(c echo.Context) error {
		return h.fail(c, http.StatusNotFound, "Page not found", "There is no page at "+c.Request().URL.Path+".")
	}
	ui := []echo.MiddlewareFunc{securityHeaders}
	const get, post = http.MethodGet, http.MethodPost
	return pages(securityHeaders(h.unknownEnvironment), append(h.adminRoutes(ui), []api.Route{
		{Method: get, Path: "/", Access: auth.PermRead, SignIn: true, Handler: toUI},
		{Method: get, Path: "/ui", Access: auth.PermRead, SignIn: true, Handler: toUI},
		{Method: get, Path: "/ui/", Access: auth.PermRead, SignIn: true, Handler: h.list, Middleware: ui},
		{Method: get, Path: "/ui/features/:key", Access: auth.PermRead, SignIn: true, Handler: h.feature, Middleware: ui},
		{Method: get, Path: "/ui/changes", Access: auth.PermRead, SignIn: true, Handler: h.changes, Middleware: ui},
		{Method: get, Path: "/ui/requests", Access: auth.PermRead, SignIn: true, Handler: h.requests, Middleware: ui},
		{Method: get, Path: "/ui/inbox", Access: auth.PermRead, SignIn: true, Handler: h.inbox, Middleware: ui},
		{Method: get, Path: "/ui/settings", Access: auth.PermRead, SignIn: true, Handler: h.settings, Middleware: ui},
		{Method: get, Path: "/ui/user", Access: auth.PermRead, SignIn: true, Handler: h.user, Middleware: ui},
		{Method: get, Path: "/ui/segments", Access: auth.PermRead, SignIn: true, Handler: h.segments, Middleware: ui},
		{Method: get, Path: "/ui/environments/compare", Access: auth.PermRead, SignIn: true, Handler: h.compare, Middleware: ui},
		{Method: post, Path: "/ui/features/:key/test", Access: auth.PermRead, Handler: h.testContext, Middleware: ui},
		{Method: get, Path: "/ui/static/*", Access: api.Public, Handler: h.static, Middleware: ui},
		{Method: get, Path: "/ui/login", Access: api.Public, Handler: h.loginForm, Middleware: ui},
		{Method: post, Path: "/ui/login", Access: api.Public, Handler: h.login, Middleware: ui},
		{Method: get, Path: "/ui/login/sso", Access: api.Public, Handler: h.ssoStart, Middleware: ui},
		{Method: get, Path: "/ui/login/callback", Access: api.Public, Handler: h.ssoCallback, Middleware: ui},
		{Method: post, Path: "/ui/logout", Access: api.Public, Handler: h.logout, Middleware: ui},
		{Method: get, Path: "/ui/*", Access: auth.PermRead, SignIn: true, Handler: notFound, Middleware: ui},
		// Other methods under /ui: 404, with the headers of every page,
		// as echo's groups answer them.
		{Method: echo.RouteNotFound, Path: "/ui", Handler: echo.NotFoundHandler, Middleware: ui},
		{Method: echo.RouteNotFound, Path: "/ui/*", Handler: echo.NotFoundHandler, Middleware: ui},
	}...))
}

// pages sets unresolved as what every page (a GET that signs in) answers
// for an environment that does not exist, and returns routes.
func pages(unresolved echo.HandlerFunc, routes []api.Route) []api.Route {
	for i, r := range routes {
		if r.SignIn && r.Method == http.MethodGet {
			routes[i].Unresolved = unresolved
		}
	}
	return routes
}

// unknownEnvironment answers a page asked of an environment that does not
// exist: a page saying so, not the API's JSON.
func (h *handler) unknownEnvironment(c echo.Context) error {
	return h.fail(c, http.StatusNotFound, "Unknown environment",
		"There is no environment "+strconv.Quote(api.UnknownEnvironment(c))+". Pick one in the header's switcher.")
}

// securityHeaders sets the headers every dashboard response carries.
func securityHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", contentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("Cache-Control", "no-store")
		return next(c)
	}
}

// assets are the embedded static files, by name, and a version that changes
// with their content so that their URLs can be cached for good.
type assets struct {
	files   map[string][]byte
	version string
}

func loadAssets() assets {
	a := assets{files: map[string][]byte{}}
	sum := sha256.New()
	err := fs.WalkDir(staticFiles, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := staticFiles.ReadFile(p)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(p, "static/")
		a.files[name] = data
		sum.Write([]byte(name))
		sum.Write(data)
		return nil
	})
	if err != nil {
		panic("web: read embedded assets: " + err.Error())
	}
	a.version = hex.EncodeToString(sum.Sum(nil))[:12]
	return a
}

// url returns the URL of the named asset, versioned by content.
func (a assets) url(name string) (string, error) {
	if _, ok := a.files[name]; !ok {
		return "", errors.New("web: no asset " + name)
	}
	return "/ui/static/" + name + "?v=" + a.version, nil
}

// static serves an embedded asset; a URL with the current version is cached
// for good.
func (h *handler) static(c echo.Context) error {
	name := c.Param("*")
	data, ok := h.assets.files[name]
	if !ok {
		return h.fail(c, http.StatusNotFound, "Page not found", "There is no file at "+c.Request().URL.Path+".")
	}
	if c.QueryParam("v") == h.assets.version {
		c.Response().Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		c.Response().Header().Set("Cache-Control", "no-cache")
	}
	typ := mime.TypeByExtension(path.Ext(name))
	if typ == "" {
		typ = "application/octet-stream"
	}
	return c.Blob(http.StatusOK, typ, data)
}

// parsePages parses each page's template together with the layout.
func parsePages(a assets) map[string]*template.Template {
	funcs := template.FuncMap{
		"asset":           a.url,
		"pct":             pct,
		"num":             num,
		"when":            when,
		"iso":             iso,
		"plural":          plural,
		"thousands":       thousands,
		"reason":          reason,
		"ratio":           func(n, of int) float64 { return float64(n) / float64(of) },
		"share":           func(n, of int64) float64 { return float64(n) / float64(of) },
		"thousands64":     func(n int64) string { return thousands(int(n)) },
		"add":             func(a, b int) int { return a + b },
		"sub":             func(a, b float64) float64 { return a - b },
		"dec":             func(n int) int { return n - 1 },
		"defaultReplicas": defaultReplicas,
		"stateLabel":      stateLabel,
		"until":           until,
		"sentence":        sentence,
		"rampReason":      rampReason,
		"pvalue":          pvalue,
		"pis": func(p float64) string {
			v := pvalue(p)
			if v[0] == '<' {
				return "p " + v
			}
			return "p = " + v
		},
		"exact":      exactPct,
		"rampOf":     rampOf,
		"pct1":       pct1,
		"list":       func(v ...string) []string { return v },
		"ago":        ago,
		"join":       strings.Join,
		"statusName": statusName,
		"kindLabel":  func(k string) string { return kindLabel(audit.Kind(k)) },
	}
	base := template.Must(template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/parts.html", "templates/pm.html"))
	pages := map[string]*template.Template{}
	for _, name := range []string{"list", "feature", "error", "login", "changes", "user", "requests", "settings", "tokens", "webhooks", "archived", "segments", "signedin", "compare", "environments"} {
		files := []string{"templates/" + name + ".html"}
		if name == "feature" || name == "segments" {
			files = append(files, "templates/targeting.html")
		}
		if name == "feature" {
			files = append(files, "templates/prerequisites.html")
		}
		if name == "feature" || name == "compare" {
			files = append(files, "templates/promote.html")
		}
		if name == "feature" {
			files = append(files, "templates/schedules.html")
		}
		pages[name] = template.Must(template.Must(base.Clone()).ParseFS(templateFiles, files...))
	}
	return pages
}

// render writes the named page with status. The page is rendered in full
// before anything is written, so a template failure is a clean 500.
func (h *handler) render(c echo.Context, status int, name string, data any) error {
	if f, ok := data.(framed); ok && name != "login" && name != "signedin" {
		h.fillFrame(c, f.frameOf())
	}
	var buf bytes.Buffer
	if err := h.pages[name].ExecuteTemplate(&buf, "layout.html", data); err != nil {
		h.logError(c, "render "+name, err)
		return c.HTML(http.StatusInternalServerError, "<!doctype html><title>Error</title><p>The page could not be rendered; the server logged why.")
	}
	return c.HTMLBlob(status, buf.Bytes())
}

// errorPage is the data of error.html.
type errorPage struct {
	frame
	Title     string
	Message   string
	RequestID string
}

// fail answers with an HTML error page.
func (h *handler) fail(c echo.Context, status int, title, message string) error {
	return h.render(c, status, "error", &errorPage{Title: title, Message: message})
}

// internal logs err with the request ID and answers with a generic page that
// shows the ID, never the cause.
func (h *handler) internal(c echo.Context, err error) error {
	h.logError(c, "dashboard request failed", err)
	id := c.Response().Header().Get(echo.HeaderXRequestID)
	return h.render(c, http.StatusInternalServerError, "error", &errorPage{
		Title:     "Something went wrong",
		Message:   "The server could not show this page. It logged the cause; give the request ID below to whoever runs it.",
		RequestID: id,
	})
}

func (h *handler) logError(c echo.Context, msg string, err error) {
	h.log.Error(msg, "request_id", c.Response().Header().Get(echo.HeaderXRequestID),
		"method", c.Request().Method, "path", c.Request().URL.Path, "err", err)
}
