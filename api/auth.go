package api

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/rollout"
)

// Access control. Requests carry a token as "Authorization: Bearer …", as
// "X-API-Key: …" (which OFREP providers send), or, from the dashboard, as a
// session cookie that signing in with a token sets. Until the first token
// exists the API is open; the binary then listens only on loopback.

// SessionCookie is the dashboard's session cookie.
const SessionCookie = "rollout_session"

// SessionLifetime is how long a dashboard session lasts.
const SessionLifetime = 12 * time.Hour

const tokenKey = "rollout.token" // echo.Context key of the request's token

// Auth checks tokens and issues dashboard sessions. Sessions are signed with
// a key made at start, so a restart signs everyone out.
type Auth struct {
	tokens *rollout.Tokens
	key    []byte
}

// NewAuth returns the access control over tokens; nil tokens means
// everything is open (for tests of other concerns).
func NewAuth(tokens *rollout.Tokens) *Auth {
	key := make([]byte, 32)
	rand.Read(key)
	return &Auth{tokens: tokens, key: key}
}

// Enforced reports whether requests need a token.
func (a *Auth) Enforced() bool { return a != nil && a.tokens != nil && a.tokens.Enforced() }

// permission returns what a request needs, and false for public paths.
func permission(method, path string) (rollout.Permission, bool) {
	switch {
	case path == "/healthz" || path == "/readyz":
		return 0, false
	case path == "/ui/login" || path == "/ui/logout" || strings.HasPrefix(path, "/ui/static/"):
		return 0, false
	case path == "/evaluate" || strings.HasPrefix(path, "/ofrep/"):
		return rollout.PermEvaluate, true
	case strings.HasPrefix(path, "/api/tokens"), strings.HasPrefix(path, "/debug/"):
		return rollout.PermAdmin, true
	case method == http.MethodGet || method == http.MethodHead || method == http.MethodOptions:
		return rollout.PermRead, true
	case strings.HasSuffix(path, "/preview"):
		return rollout.PermRead, true // changes nothing
	}
	return rollout.PermWrite, true
}

// Middleware identifies the request's token and refuses, with 401 or 403,
// a request its token does not allow. Dashboard pages without a session
// redirect to the sign-in page instead.
func (a *Auth) Middleware(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if r.Method == http.MethodOptions {
			return next(c) // CORS preflights carry no credentials
		}
		need, guarded := permission(r.Method, r.URL.Path)
		tok, presented, ok := a.identify(r)
		if ok && need != rollout.PermEvaluate { // see TokenOf
			c.Set(tokenKey, tok)
		}
		if !guarded || !a.Enforced() {
			return next(c)
		}
		ui := r.URL.Path == "/" || strings.HasPrefix(r.URL.Path, "/ui")
		switch {
		case !ok && ui && r.Method == http.MethodGet:
			return c.Redirect(http.StatusSeeOther, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()))
		case !ok:
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="rollout"`)
			if presented {
				return rollout.Errorf(codeUnauthorized, "the token is not valid (unknown or revoked)")
			}
			return rollout.Errorf(codeUnauthorized, "this server needs a token: send Authorization: Bearer TOKEN (or X-API-Key)")
		case !tok.Role.Allows(need):
			return rollout.Errorf(codeForbidden, "token %q has role %s, which may not do this", tok.Name, tok.Role)
		}
		return next(c)
	}
}

// identify returns the request's token, whether one was presented at all,
// and whether it is valid.
func (a *Auth) identify(r *http.Request) (rollout.Token, bool, bool) {
	if a == nil || a.tokens == nil {
		return rollout.Token{}, false, false
	}
	// The names in canonical form, looked up without Get's canonicalizing.
	secret := headerValue(r.Header, "X-Api-Key")
	if h := headerValue(r.Header, "Authorization"); h != "" {
		scheme, rest, _ := strings.Cut(h, " ")
		if strings.EqualFold(scheme, "Bearer") {
			secret = strings.TrimSpace(rest)
		}
	}
	if secret != "" {
		tok, ok := a.tokens.Authenticate(secret)
		return tok, true, ok
	}
	if ck, err := r.Cookie(SessionCookie); err == nil {
		tok, ok := a.session(ck.Value)
		return tok, true, ok
	}
	return rollout.Token{}, false, false
}

// headerValue is h.Get(name) for a name in canonical form.
func headerValue(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// SignIn checks secret and, when it is an active token, sets a session
// cookie for it.
func (a *Auth) SignIn(c echo.Context, secret string) (rollout.Token, bool) {
	if a == nil || a.tokens == nil {
		return rollout.Token{}, false
	}
	tok, ok := a.tokens.Authenticate(strings.TrimSpace(secret))
	if !ok {
		return rollout.Token{}, false
	}
	expires := time.Now().Add(SessionLifetime)
	payload := tok.ID + "|" + strconv.FormatInt(expires.Unix(), 10)
	c.SetCookie(&http.Cookie{
		Name:     SessionCookie,
		Value:    base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + a.sign(payload),
		Path:     "/",
		Expires:  expires,
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
		Secure:   c.Request().TLS != nil || c.Request().Header.Get("X-Forwarded-Proto") == "https",
	})
	return tok, true
}

// SignOut clears the session cookie.
func (a *Auth) SignOut(c echo.Context) {
	c.SetCookie(&http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
}

func (a *Auth) sign(payload string) string {
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// session returns the active token of a valid, unexpired session cookie.
func (a *Auth) session(value string) (rollout.Token, bool) {
	enc, sig, ok := strings.Cut(value, ".")
	if !ok {
		return rollout.Token{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || !hmac.Equal([]byte(sig), []byte(a.sign(string(raw)))) {
		return rollout.Token{}, false
	}
	id, exp, ok := strings.Cut(string(raw), "|")
	unix, err := strconv.ParseInt(exp, 10, 64)
	if !ok || err != nil || time.Now().Unix() > unix {
		return rollout.Token{}, false
	}
	return a.tokens.ByID(id)
}

// TokenOf returns the token that authenticated the request, if any. It is
// not recorded for evaluation requests (/evaluate, /ofrep/), which have no
// use for it: not recording it spares their hot path an allocation.
func TokenOf(c echo.Context) (rollout.Token, bool) {
	tok, ok := c.Get(tokenKey).(rollout.Token)
	return tok, ok
}

// actorOf is who the request acts as: its token's name.
func actorOf(c echo.Context) string {
	if tok, ok := TokenOf(c); ok {
		return tok.Name
	}
	return ""
}
