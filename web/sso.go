package web

import (
	"context"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/labstack/echo/v4"
	"golang.org/x/oauth2"

	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/environment"
	"github.com/rollout/rollout/rollout/feature"
)

// Single sign-on: people sign in to the dashboard with an OpenID Connect
// provider (authorization code with PKCE). /ui/login/sso sends the browser
// to the provider with a state, a nonce and a PKCE challenge, kept signed
// in a short-lived cookie; /ui/login/callback checks the state, exchanges
// the code (with the PKCE verifier), verifies the ID token (signature by
// the provider's keys, issuer, audience, expiry, nonce), maps the role
// claim to a role and starts a stored session (auth.Session), which the
// session cookie then carries.

// SSOConfig configures single sign-on.
type SSOConfig struct {
	// Issuer is the provider's issuer URL, which its discovery document
	// must name exactly.
	Issuer       string
	ClientID     string
	ClientSecret string
	// RedirectURL is the dashboard's /ui/login/callback as registered at
	// the provider; "": made from each request's host and scheme.
	RedirectURL string
	// RoleClaim is the claim that carries the person's groups or roles
	// (a string or a list of strings); "" means "groups".
	RoleClaim string
	// Roles maps the claim's values to the roles they grant; a person
	// with several gets the most powerful (unscoped before scoped), one
	// with none DefaultRole ("" means viewer) in every environment.
	Roles       map[string]Grant
	DefaultRole auth.Role
	// Lifetime is how long a session lasts; 0 means 12 hours.
	Lifetime time.Duration
	// HTTPClient talks to the provider; nil means one with a 10-second
	// timeout.
	HTTPClient *http.Client
}

// Bounds of the sign-in.
const (
	ssoStateLifetime = 10 * time.Minute // from the button to the callback
	ssoExchanges     = 8                // code exchanges with the provider at once
	ssoTimeout       = 10 * time.Second // of one exchange, user info included
	ssoCookie        = "rollout_sso"
	maxSSOParam      = 2048 // bytes of the callback's code and state
)

// Grant is what a value of the role claim grants: a role, in every
// environment or, when Environment is not "", in that one alone (as a
// token scoped to it).
type Grant struct {
	Role        auth.Role
	Environment string
}

// ParseRoleMap reads a mapping such as
// "flag-admins=admin,pm=editor,qa=editor@staging": the values of the role
// claim, each with the role it grants (admin, editor or viewer), in every
// environment or, after an @, in that one alone.
func ParseRoleMap(text string) (map[string]Grant, error) {
	m := map[string]Grant{}
	for _, pair := range strings.Split(text, ",") {
		pair = strings.TrimSpace(pair)
		if pair == "" {
			continue
		}
		group, role, ok := strings.Cut(pair, "=")
		group, role = strings.TrimSpace(group), strings.TrimSpace(role)
		role, env, scoped := strings.Cut(role, "@")
		r := auth.Role(role)
		if !ok || group == "" || !personRole(r) {
			return nil, fmt.Errorf("%q: give GROUP=ROLE or GROUP=ROLE@ENVIRONMENT, ROLE one of admin, editor, viewer", pair)
		}
		if scoped {
			if err := environment.ValidateKey(env); err != nil {
				return nil, fmt.Errorf("%q: %s", pair, feature.ErrorMessage(err))
			}
		}
		m[group] = Grant{Role: r, Environment: env}
	}
	return m, nil
}

// personRole reports whether a person may have role r.
func personRole(r auth.Role) bool {
	return r == auth.RoleAdmin || r == auth.RoleEditor || r == auth.RoleViewer
}

// SSOSessions is what single sign-on needs of the access control
// (api.Auth): to set a person's session cookie and to sign the sign-in's
// state.
type SSOSessions interface {
	SignInPerson(c echo.Context, s auth.Session)
	Seal(payload string) string
	Unseal(value string) (string, bool)
}

// SSO signs people in with an OpenID Connect provider.
type SSO struct {
	cfg      SSOConfig
	ctx      context.Context // carries the HTTP client, for the provider's keys
	provider *oidc.Provider
	verifier *oidc.IDTokenVerifier
	tokens   *auth.Tokens
	sessions SSOSessions
	slots    chan struct{}
}

// NewSSO discovers the provider of cfg.Issuer, refusing one whose
// discovery names another issuer, and returns the sign-in that starts
// sessions in tokens and sets their cookies with sessions. It makes tokens
// required (auth.Tokens.Require): a server with single sign-on is never
// open.
func NewSSO(ctx context.Context, cfg SSOConfig, tokens *auth.Tokens, sessions SSOSessions) (*SSO, error) {
	if cfg.Issuer == "" || cfg.ClientID == "" {
		return nil, errors.New("single sign-on needs the issuer URL and the client ID")
	}
	if cfg.RoleClaim == "" {
		cfg.RoleClaim = "groups"
	}
	if cfg.DefaultRole == "" {
		cfg.DefaultRole = auth.RoleViewer
	}
	if !personRole(cfg.DefaultRole) {
		return nil, fmt.Errorf("default role %q: use admin, editor or viewer", cfg.DefaultRole)
	}
	if cfg.Lifetime <= 0 {
		cfg.Lifetime = 12 * time.Hour
	}
	if cfg.HTTPClient == nil {
		cfg.HTTPClient = &http.Client{Timeout: ssoTimeout}
	}
	// The provider keeps this context to fetch its keys later: no deadline.
	keep := oidc.ClientContext(context.WithoutCancel(ctx), cfg.HTTPClient)
	dctx, cancel := context.WithTimeout(oidc.ClientContext(ctx, cfg.HTTPClient), ssoTimeout)
	defer cancel()
	p, err := oidc.NewProvider(dctx, cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("OpenID provider %s: %w", cfg.Issuer, err)
	}
	tokens.Require()
	return &SSO{cfg: cfg, ctx: keep, provider: p, verifier: p.VerifierContext(keep, &oidc.Config{ClientID: cfg.ClientID}),
		tokens: tokens, sessions: sessions, slots: make(chan struct{}, ssoExchanges)}, nil
}

// oauth is the OAuth 2 configuration for a sign-in through redirect.
func (s *SSO) oauth(redirect string) *oauth2.Config {
	return &oauth2.Config{ClientID: s.cfg.ClientID, ClientSecret: s.cfg.ClientSecret, Endpoint: s.provider.Endpoint(),
		RedirectURL: redirect, Scopes: []string{oidc.ScopeOpenID, "email", "profile"}}
}

// redirectURL is the callback URL for c's request.
func (s *SSO) redirectURL(c echo.Context) string {
	if s.cfg.RedirectURL != "" {
		return s.cfg.RedirectURL
	}
	scheme := "http"
	if c.Request().TLS != nil || c.Request().Header.Get("X-Forwarded-Proto") == "https" {
		scheme = "https"
	}
	return scheme + "://" + c.Request().Host + "/ui/login/callback"
}

// ssoState is what the sign-in keeps between the button and the callback.
type ssoState struct {
	state, nonce, verifier, next, redirect string
	expires                                time.Time
}

func (st ssoState) encode() string {
	return strings.Join([]string{st.state, st.nonce, st.verifier, st.next, st.redirect, strconv.FormatInt(st.expires.Unix(), 10)}, "\x1f")
}

func decodeState(s string) (ssoState, bool) {
	f := strings.Split(s, "\x1f")
	if len(f) != 6 {
		return ssoState{}, false
	}
	unix, err := strconv.ParseInt(f[5], 10, 64)
	if err != nil {
		return ssoState{}, false
	}
	return ssoState{state: f[0], nonce: f[1], verifier: f[2], next: f[3], redirect: f[4], expires: time.Unix(unix, 0)}, true
}

// start is GET /ui/login/sso: it sends the browser to the provider.
func (h *handler) ssoStart(c echo.Context) error {
	s := h.sso
	if s == nil {
		return h.fail(c, http.StatusNotFound, "Page not found", "Single sign-on is not configured on this server.")
	}
	st := ssoState{state: oauth2.GenerateVerifier(), nonce: oauth2.GenerateVerifier(), verifier: oauth2.GenerateVerifier(),
		next: safeNext(c.QueryParam("next")), redirect: s.redirectURL(c), expires: time.Now().Add(ssoStateLifetime)}
	c.SetCookie(&http.Cookie{Name: ssoCookie, Value: s.sessions.Seal(st.encode()), Path: "/ui/login", MaxAge: int(ssoStateLifetime / time.Second),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, // sent on the provider's redirect back
		Secure: c.Request().TLS != nil || c.Request().Header.Get("X-Forwarded-Proto") == "https"})
	u := s.oauth(st.redirect).AuthCodeURL(st.state, oidc.Nonce(st.nonce), oauth2.S256ChallengeOption(st.verifier))
	return c.Redirect(http.StatusSeeOther, u)
}

// ssoRefused answers a sign-in that failed with the sign-in page, saying
// why, with status.
func (h *handler) ssoRefused(c echo.Context, status int, why string) error {
	h.log.Info("single sign-on refused", "why", why)
	return h.render(c, status, "login", &loginPage{frame: frame{SignInPage: true}, Title: "Sign in", Next: "/ui/", SSO: true, Error: "Single sign-on failed: " + why})
}

// ssoCallback is GET /ui/login/callback, where the provider sends the
// browser back.
func (h *handler) ssoCallback(c echo.Context) error {
	s := h.sso
	if s == nil {
		return h.fail(c, http.StatusNotFound, "Page not found", "Single sign-on is not configured on this server.")
	}
	// The state is for this one callback.
	c.SetCookie(&http.Cookie{Name: ssoCookie, Value: "", Path: "/ui/login", MaxAge: -1, HttpOnly: true})
	q := c.QueryParams()
	if e := q.Get("error"); e != "" {
		return h.ssoRefused(c, http.StatusUnauthorized, "the provider answered "+abbreviateValue(e)+".")
	}
	code, state := q.Get("code"), q.Get("state")
	if code == "" || state == "" || len(code) > maxSSOParam || len(state) > maxSSOParam {
		return h.ssoRefused(c, http.StatusBadRequest, "the provider's answer has no code or state.")
	}
	ck, err := c.Cookie(ssoCookie)
	if err != nil {
		return h.ssoRefused(c, http.StatusBadRequest, "this browser did not start the sign-in (or took longer than 10 minutes): try again.")
	}
	payload, ok := s.sessions.Unseal(ck.Value)
	st, ok2 := decodeState(payload)
	if !ok || !ok2 || time.Now().After(st.expires) || subtle.ConstantTimeCompare([]byte(st.state), []byte(state)) != 1 {
		return h.ssoRefused(c, http.StatusBadRequest, "the sign-in's state does not match this browser's: try again.")
	}
	select {
	case s.slots <- struct{}{}:
		defer func() { <-s.slots }()
	default:
		c.Response().Header().Set("Retry-After", "5")
		return h.ssoRefused(c, http.StatusServiceUnavailable, "too many sign-ins at once: try again in a moment.")
	}
	ctx, cancel := context.WithTimeout(oidc.ClientContext(c.Request().Context(), s.cfg.HTTPClient), ssoTimeout)
	defer cancel()
	person, subject, grant, err := s.identify(ctx, code, st)
	if err != nil {
		return h.ssoRefused(c, http.StatusUnauthorized, err.Error()+".")
	}
	if grant.Environment != "" {
		if _, ok := h.envs.Get(grant.Environment); !ok {
			return h.ssoRefused(c, http.StatusForbidden, "your group grants a role in environment "+grant.Environment+", which does not exist: ask an admin.")
		}
	}
	sess, err := s.tokens.StartSessionIn(c.Request().Context(), person, subject, grant.Role, grant.Environment, s.cfg.Lifetime)
	if err != nil {
		if feature.ErrorCode(err) == feature.EInvalid {
			return h.ssoRefused(c, http.StatusUnauthorized, feature.ErrorMessage(err))
		}
		return h.internal(c, err)
	}
	s.sessions.SignInPerson(c, sess)
	h.log.Info("dashboard sign-in", "person", sess.Person, "role", sess.Role, "environment", sess.Environment, "via", "sso")
	// A page of this site moves on, so that the strict session cookie
	// is sent: a redirect would still belong to the provider's
	// navigation.
	return h.render(c, http.StatusOK, "signedin", &signedInPage{Title: "Signed in", Next: st.next})
}

// ssoClaims are the ID token's (or user info's) claims rollout reads.
type ssoClaims struct {
	Subject           string `json:"sub"`
	Email             string `json:"email"`
	PreferredUsername string `json:"preferred_username"`
}

// identify exchanges the code and verifies the ID token: who signed in,
// and their role.
func (s *SSO) identify(ctx context.Context, code string, st ssoState) (person, subject string, grant Grant, err error) {
	tok, err := s.oauth(st.redirect).Exchange(ctx, code, oauth2.VerifierOption(st.verifier))
	if err != nil {
		return "", "", Grant{}, errors.New("the provider refused the code")
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		return "", "", Grant{}, errors.New("the provider sent no ID token")
	}
	idt, err := s.verifier.Verify(ctx, raw)
	if err != nil {
		var expired *oidc.TokenExpiredError
		if errors.As(err, &expired) {
			return "", "", Grant{}, errors.New("the ID token has expired")
		}
		return "", "", Grant{}, errors.New("the ID token is not valid (" + s.idTokenProblem(raw, err) + ")")
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(st.nonce)) != 1 {
		return "", "", Grant{}, errors.New("the ID token was not issued for this sign-in")
	}
	var c ssoClaims
	all := map[string]any{}
	if err := idt.Claims(&c); err != nil {
		return "", "", Grant{}, errors.New("the ID token's claims cannot be read")
	}
	_ = idt.Claims(&all)
	if c.Email == "" || all[s.cfg.RoleClaim] == nil {
		// Some providers keep these for the user info endpoint.
		if ui, err := s.provider.UserInfo(ctx, oauth2.StaticTokenSource(tok)); err == nil && ui.Subject == idt.Subject {
			more := map[string]any{}
			if ui.Claims(&more) == nil {
				if c.Email == "" {
					c.Email = ui.Email
				}
				if all[s.cfg.RoleClaim] == nil {
					all[s.cfg.RoleClaim] = more[s.cfg.RoleClaim]
				}
			}
		}
	}
	person = c.Email
	if person == "" {
		person = c.PreferredUsername
	}
	if person == "" {
		person = idt.Subject
	}
	return person, idt.Subject, s.roleOf(all[s.cfg.RoleClaim]), nil
}

// idTokenProblem says briefly why the verifier refused the ID token raw
// with err. The token's unverified issuer only chooses the words.
func (s *SSO) idTokenProblem(raw string, err error) string {
	var claims struct {
		Issuer string `json:"iss"`
	}
	if parts := strings.Split(raw, "."); len(parts) == 3 {
		if payload, err := base64.RawURLEncoding.DecodeString(parts[1]); err == nil && json.Unmarshal(payload, &claims) == nil &&
			claims.Issuer != s.cfg.Issuer {
			return "issued by another provider"
		}
	}
	msg := err.Error()
	switch {
	case strings.Contains(msg, "issuer"):
		return "issued by another provider"
	case strings.Contains(msg, "audience"):
		return "issued for another client"
	case strings.Contains(msg, "signature"):
		return "its signature does not match the provider's keys"
	}
	return "malformed"
}

// roleOf maps the role claim's value (a string, space- or comma-separated,
// or a list) to the most powerful grant it makes: the highest role, in
// every environment before one alone.
func (s *SSO) roleOf(claim any) Grant {
	var values []string
	switch v := claim.(type) {
	case string:
		values = strings.FieldsFunc(v, func(r rune) bool { return r == ' ' || r == ',' })
	case []any:
		for _, e := range v {
			if str, ok := e.(string); ok {
				values = append(values, str)
			}
		}
	}
	best := Grant{Role: s.cfg.DefaultRole}
	rank := func(g Grant) int {
		r := 2 * slices.Index(auth.Roles, g.Role)
		if g.Environment != "" {
			r++
		}
		return r
	}
	for _, v := range values {
		if g, ok := s.cfg.Roles[v]; ok && rank(g) < rank(best) {
			best = g
		}
	}
	return best
}

// signedInPage is the data of signedin.html.
type signedInPage struct {
	frame
	Title, Next string
}
