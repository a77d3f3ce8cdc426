package web

import (
	"net/http"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/rollout/rollout/rollout/auth"
)

// Sessions signs dashboard users in with an API token and out again
// (api.Auth is the one the binary uses).
type Sessions interface {
	// Enforced reports whether the server needs tokens at all.
	Enforced() bool
	// SignIn checks the token and, when valid, sets the session cookie.
	SignIn(c echo.Context, secret string) (auth.Token, bool)
	// SignOut ends the session and clears its cookie.
	SignOut(c echo.Context) error
	// Who returns the token the request was made with, if any.
	Who(c echo.Context) (auth.Token, bool)
}

// frame is what every page's header and forms need to know about who is
// looking: their name and whether they may change features.
type frame struct {
	Who      string    // the signed-in token's name; "" when none
	Role     auth.Role // its role
	ReadOnly bool      // signed in with a token that cannot change features
	SignOut  bool      // the header offers to sign out
	// Admin: the token may manage tokens and webhooks (anyone while the
	// API is open); PausedHooks counts the paused webhooks, for admins.
	Admin       bool
	PausedHooks int
	// InboxCount counts the open change requests of others that the person
	// may decide (see inboxCount).
	InboxCount int
	// The environment the page shows, and the switcher's (environments.go).
	Env envView
	// Envs are the environments the viewer may see, each with this page's
	// link in it: all of them, or the one a scoped token sees.
	Envs []envView
	// Scope is the environment the signed-in token is scoped to; "":
	// every one.
	Scope string
	// SignInPage: the page signs people in; shown to someone not signed
	// in, its header links to no page they cannot open yet.
	SignInPage bool
}

func (f *frame) frameOf() *frame { return f }

// framed is a page's data that carries a frame.
type framed interface{ frameOf() *frame }

// fillFrame says who is signed in on the page's data.
func (h *handler) fillFrame(c echo.Context, f *frame) {
	defer func() {
		if f.Admin {
			f.PausedHooks = h.pausedHooks(c)
		}
		f.InboxCount = h.inboxCount(c, f)
		h.fillEnv(c, f)
	}()
	if h.sessions == nil || !h.sessions.Enforced() {
		f.Admin = true
		return
	}
	tok, ok := h.sessions.Who(c)
	if !ok {
		return
	}
	f.Who, f.Role, f.SignOut, f.Scope = tok.Name, tok.Role, true, tok.Environment
	f.ReadOnly = !tok.Role.Allows(auth.PermWrite)
	f.Admin = tok.Role.Allows(auth.PermAdmin)
}

// loginPage is the data of login.html.
type loginPage struct {
	frame
	Title, Next, Error string
	SSO                bool // the page offers single sign-on
}

func (h *handler) loginForm(c echo.Context) error {
	if h.sessions == nil || !h.sessions.Enforced() {
		return c.Redirect(http.StatusSeeOther, "/ui/")
	}
	return h.render(c, http.StatusOK, "login", &loginPage{frame: frame{SignInPage: true}, Title: "Sign in", Next: safeNext(c.QueryParam("next")), SSO: h.sso != nil})
}

// login checks the submitted token; the form is protected against
// cross-site forgery by the API's cross-origin check, which covers every
// route.
func (h *handler) login(c echo.Context) error {
	next := safeNext(c.FormValue("next"))
	if h.sessions == nil || !h.sessions.Enforced() {
		return c.Redirect(http.StatusSeeOther, next)
	}
	tok, ok := h.sessions.SignIn(c, c.FormValue("token"))
	if !ok {
		return h.render(c, http.StatusUnauthorized, "login", &loginPage{frame: frame{SignInPage: true}, Title: "Sign in", Next: next, SSO: h.sso != nil,
			Error: "That token is not valid: it is unknown or was revoked."})
	}
	h.log.Info("dashboard sign-in", "token", tok.Name, "role", tok.Role)
	return c.Redirect(http.StatusSeeOther, next)
}

func (h *handler) logout(c echo.Context) error {
	if h.sessions != nil {
		if err := h.sessions.SignOut(c); err != nil {
			h.log.Error("sign-out failed", "err", err)
			return h.fail(c, http.StatusServiceUnavailable, "Not signed out",
				"Signing out could not be recorded because the database cannot be written just now. Try again in a moment.")
		}
	}
	return c.Redirect(http.StatusSeeOther, "/ui/login")
}

// safeNext keeps a post-sign-in redirect on this server's dashboard.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/ui/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/ui/"
	}
	return next
}
