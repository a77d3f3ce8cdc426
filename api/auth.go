package api

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
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

// Auth checks tokens and issues dashboard sessions, signed with a key that
// every instance sharing a database shares (see NewAuth).
type Auth struct {
	tokens *auth.Tokens
	keys   [][]byte // the first signs; any verifies

	// AnyHost accepts requests for any Host while the API is open (no
	// token exists yet). Without it an open API answers only requests for
	// loopback host names, so that a web page cannot reach it through a
	// DNS name rebound to 127.0.0.1. The binary sets it with --insecure.
	AnyHost bool
}

// NewAuth returns the access control over tokens, signing sessions with
// the first of keys and accepting sessions signed with any of them, so that
// a key is rotated by putting the new one first and dropping the old one
// once its sessions have expired (SessionLifetime). The keys are given to
// every instance, or are the store's SessionKey, so that a session made on
// one instance works on all. No key (or only empty ones) means one made
// now, good for this process only. Nil tokens means everything is open (for
// tests of other concerns).
func NewAuth(tokens *auth.Tokens, keys ...[]byte) *Auth {
	a := &Auth{tokens: tokens}
	for _, k := range keys {
		if len(k) > 0 {
			a.keys = append(a.keys, k)
		}
	}
	if len(a.keys) == 0 {
		key := make([]byte, 32)
		rand.Read(key)
		a.keys = [][]byte{key}
	}
	return a
}

// Enforced reports whether requests need a token (or a session).
func (a *Auth) Enforced() bool { return a != nil && a.tokens != nil && a.tokens.Enforced() }

// Tokens returns the tokens a checks (nil: none, everything is open).
func (a *Auth) Tokens() *auth.Tokens {
	if a == nil {
		return nil
	}
	return a.tokens
}

// middleware identifies the request's token and refuses, with 401 or 403,
// a request its token does not allow on route. Dashboard pages
// (Route.SignIn) without a session redirect to the sign-in page instead.
func (a *Auth) middleware(route Route) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc { return a.check(route, next) }
}

func (a *Auth) check(route Route, next echo.HandlerFunc) echo.HandlerFunc {
	ui := route.SignIn
	record := route.Access != auth.PermEvaluate // see TokenOf
	return func(c echo.Context) error {
		r := c.Request()
		if r.Method == http.MethodOptions {
			return next(c) // CORS preflights carry no credentials
		}
		need := route.Access
		if route.QueryAccess.on(r) {
			need = route.QueryAccess.Access
		}
		tok, presented, ok := a.identify(r)
		if ok && record { // see TokenOf
			c.Set(tokenKey, tok)
		}
		if ok {
			if err := scopeCheck(c, tok); err != nil {
				return err
			}
		}
		if !a.Enforced() {
			if !a.AnyHost && !loopbackHost(r.Host) {
				return feature.Errorf(codeForbidden, "host %q refused: until the first API token exists this server answers only requests for 127.0.0.1, [::1] or localhost", r.Host)
			}
			return next(c)
		}
		if need == Public {
			return next(c)
		}
		switch {
		case !ok && ui && r.Method == http.MethodGet:
			return c.Redirect(http.StatusSeeOther, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()))
		case !ok:
			c.Response().Header().Set("WWW-Authenticate", `Bearer realm="rollout"`)
			if presented {
				return feature.Errorf(codeUnauthorized, "the token is not valid (unknown or revoked)")
			}
			return feature.Errorf(codeUnauthorized, "this server needs a token: send Authorization: Bearer TOKEN (or X-API-Key)")
		case !tok.Role.Allows(need):
			return feature.Errorf(codeForbidden, "token %q has role %s, which may not do this", tok.Name, tok.Role)
		}
		return next(c)
	}
}

// identify returns the request's token, whether one was presented at all,
// and whether it is valid.
func (a *Auth) identify(r *http.Request) (auth.Token, bool, bool) {
	if a == nil || a.tokens == nil {
		return auth.Token{}, false, false
	}
	// The names in canonical form, looked up without Get's canonicalizing.
	// A bearer token wins over X-API-Key; an empty one hides nothing.
	secret := headerValue(r.Header, "X-Api-Key")
	if h := headerValue(r.Header, "Authorization"); h != "" {
		scheme, rest, _ := strings.Cut(h, " ")
		if bearer := strings.TrimSpace(rest); strings.EqualFold(scheme, "Bearer") && bearer != "" {
			secret = bearer
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
	return auth.Token{}, false, false
}

// streamAccess is what package stream asks of an Auth that has tokens:
// who holds a stream, and whether they still may.
type streamAccess struct{ a *Auth }

func (s streamAccess) TokenID(r *http.Request) string {
	if tok, _, ok := s.a.identify(r); ok {
		return tok.ID
	}
	return ""
}

// Allows reports whether the credentials of r allow need now, as the
// access check (Auth.middleware) would decide for a request with them.
func (s streamAccess) Allows(r *http.Request, need auth.Permission) bool {
	if !s.a.Enforced() || need == Public {
		return true
	}
	tok, _, ok := s.a.identify(r)
	return ok && tok.Role.Allows(need)
}

func (s streamAccess) Changed() <-chan struct{} { return s.a.tokens.Changed() }

// headerValue is h.Get(name) for a name in canonical form.
func headerValue(h http.Header, name string) string {
	if v := h[name]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// SignIn checks secret and, when it is an active token, sets a session
// cookie for it.
func (a *Auth) SignIn(c echo.Context, secret string) (auth.Token, bool) {
	if a == nil || a.tokens == nil {
		return auth.Token{}, false
	}
	tok, ok := a.tokens.Authenticate(strings.TrimSpace(secret))
	if !ok {
		return auth.Token{}, false
	}
	a.setSession(c, tok.ID, a.tokens.Now().Add(SessionLifetime))
	return tok, true
}

// SignInPerson sets the session cookie of a person's stored session s
// (single sign-on): it lasts as long as s, and ends when s is revoked.
func (a *Auth) SignInPerson(c echo.Context, s auth.Session) {
	a.setSession(c, auth.SessionTokenPrefix+s.ID, s.ExpiresAt)
}

// setSession sets the signed session cookie of the token id (or a
// person's session, prefixed auth.SessionTokenPrefix), until expires.
func (a *Auth) setSession(c echo.Context, id string, expires time.Time) {
	payload := id + "|" + strconv.FormatInt(expires.Unix(), 10) + "|" + rand.Text()
	c.SetCookie(&http.Cookie{
		Name:     SessionCookie,
		Value:    base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + a.sign(payload),
		Path:     "/",
		Expires:  expires,
		HttpOnly: true,
		SameSite: http.SameSiteStrictMode,
		Secure:   c.Request().TLS != nil || c.Request().Header.Get("X-Forwarded-Proto") == "https",
	})
}

// SignOut ends the request's session, on every instance that shares the
// database, so that a copy of its cookie no longer works, and clears the
// cookie. Only a live session is ended, once: a cookie that is not one
// (forged, expired, signed out already, or of a revoked token) writes
// nothing, so that sign-outs cannot flood the database and every instance
// with reloads. It fails, keeping the cookie, when the end cannot be
// recorded.
func (a *Auth) SignOut(c echo.Context) error {
	if ck, err := c.Request().Cookie(SessionCookie); err == nil && a != nil && a.tokens != nil {
		if p, ok := a.verify(ck.Value); ok && strings.HasPrefix(p.token, auth.SessionTokenPrefix) {
			// A person's session is revoked, which ends its every cookie.
			if s, live := a.tokens.Session(strings.TrimPrefix(p.token, auth.SessionTokenPrefix)); live {
				if err := a.tokens.RevokeSession(c.Request().Context(), s.ID, s.Actor()); err != nil && feature.ErrorCode(err) != feature.ENotFound {
					return err
				}
			}
		} else if ok && !a.tokens.SessionEnded(p.session) {
			if _, active := a.tokens.ByID(p.token); active {
				if err := a.tokens.EndSession(c.Request().Context(), p.session, p.expires); err != nil {
					return err
				}
			}
		}
	}
	c.SetCookie(&http.Cookie{Name: SessionCookie, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, SameSite: http.SameSiteStrictMode})
	return nil
}

// sealPrefix sets what Seal signs apart from session cookies.
const sealPrefix = "seal\x00"

// Seal returns payload with a's signature, for a value kept by the browser
// that the server must get back unchanged (the single sign-on's state).
// The payload is not secret: it is only encoded.
func (a *Auth) Seal(payload string) string {
	return base64.RawURLEncoding.EncodeToString([]byte(payload)) + "." + a.sign(sealPrefix+payload)
}

// Unseal returns the payload of a value Seal made with any of a's keys.
func (a *Auth) Unseal(value string) (string, bool) {
	enc, sig, ok := strings.Cut(value, ".")
	if !ok {
		return "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || !a.signed(sealPrefix+string(raw), sig) {
		return "", false
	}
	return string(raw), true
}

// sign signs payload with the first key.
func (a *Auth) sign(payload string) string { return signWith(a.keys[0], payload) }

func signWith(key []byte, payload string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(payload))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// signed reports whether sig is payload's signature by any of the keys.
func (a *Auth) signed(payload, sig string) bool {
	for _, k := range a.keys {
		if hmac.Equal([]byte(sig), []byte(signWith(k, payload))) {
			return true
		}
	}
	return false
}

// now is the time of the tokens' clock, which sessions expire by.
func (a *Auth) now() time.Time {
	if a.tokens == nil {
		return time.Now()
	}
	return a.tokens.Now()
}

// sessionPayload is what a session cookie carries, signed.
type sessionPayload struct {
	token, session string
	expires        time.Time
}

// verify checks a session cookie's signature and expiry.
func (a *Auth) verify(value string) (sessionPayload, bool) {
	enc, sig, ok := strings.Cut(value, ".")
	if !ok {
		return sessionPayload{}, false
	}
	raw, err := base64.RawURLEncoding.DecodeString(enc)
	if err != nil || !a.signed(string(raw), sig) {
		return sessionPayload{}, false
	}
	parts := strings.Split(string(raw), "|")
	if len(parts) != 3 {
		return sessionPayload{}, false
	}
	unix, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || a.now().Unix() > unix {
		return sessionPayload{}, false
	}
	return sessionPayload{token: parts[0], session: parts[2], expires: time.Unix(unix, 0)}, true
}

// session returns the active token of a valid, unexpired session cookie
// that was not signed out.
func (a *Auth) session(value string) (auth.Token, bool) {
	p, ok := a.verify(value)
	if ok && strings.HasPrefix(p.token, auth.SessionTokenPrefix) {
		s, live := a.tokens.Session(strings.TrimPrefix(p.token, auth.SessionTokenPrefix))
		return s.Token(), live
	}
	if !ok || a.tokens.SessionEnded(p.session) {
		return auth.Token{}, false
	}
	tok, ok := a.tokens.ByID(p.token)
	if ok {
		a.tokens.Used(tok.ID)
	}
	return tok, ok
}

// loopbackHost reports whether a request's Host names this machine's
// loopback interface: 127.0.0.1 (or any 127/8 address), [::1] or localhost,
// with or without a port.
func loopbackHost(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.Trim(host, "[]"), ".")
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// TokenOf returns the token that authenticated the request, if any. It is
// not recorded for evaluation requests (/evaluate, /ofrep/), which have no
// use for it: not recording it spares their hot path an allocation.
func TokenOf(c echo.Context) (auth.Token, bool) {
	tok, ok := c.Get(tokenKey).(auth.Token)
	return tok, ok
}

// Who returns the token that authenticated the request, if any (see
// TokenOf): the dashboard shows who is signed in.
func (a *Auth) Who(c echo.Context) (auth.Token, bool) { return TokenOf(c) }

// actorOf is who the request acts as: its token's name.
func actorOf(c echo.Context) string {
	if tok, ok := TokenOf(c); ok {
		return tok.Name
	}
	return ""
}
