package web_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"html"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"log/slog"

	"github.com/chromedp/chromedp"
	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/zitadel/oidc/v3/example/server/exampleop"
	"github.com/zitadel/oidc/v3/example/server/storage"
	zoidc "github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/oauth2"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/store/sqlite"
	"github.com/rollout/rollout/web"
	"github.com/rollout/rollout/webhook"
)

// The people of the test's OpenID provider: ann is in flag-admins, pat in
// pm (and a group no role names), vic in none.
var ssoPeople = []struct {
	id, user, pass, email string
	groups                []string
}{
	{"u-ann", "ann", "ann-pass", "ann@example.com", []string{"flag-admins"}},
	{"u-pat", "pat", "pat-pass", "pat@example.com", []string{"pm", "staff"}},
	{"u-vic", "vic", "vic-pass", "vic@example.com", nil},
	{"u-sam", "sam", "sam-pass", "sam@example.com", []string{"qa"}},
}

// people is the provider's user store.
type people struct{ users map[string]*storage.User }

func newPeople() people {
	p := people{users: map[string]*storage.User{}}
	for _, u := range ssoPeople {
		p.users[u.id] = &storage.User{ID: u.id, Username: u.user, Password: u.pass, Email: u.email, EmailVerified: true, FirstName: u.user}
	}
	return p
}

func (p people) GetUserByID(id string) *storage.User { return p.users[id] }
func (p people) GetUserByUsername(name string) *storage.User {
	for _, u := range p.users {
		if u.Username == name {
			return u
		}
	}
	return nil
}
func (p people) ExampleClientID() string { return "service" }

// groupsStorage is the example provider's storage with a groups claim in
// the ID token, as Keycloak's or Dex's group mappers put it.
type groupsStorage struct{ *storage.Storage }

func (s groupsStorage) SetUserinfoFromRequest(ctx context.Context, ui *zoidc.UserInfo, req op.IDTokenRequest, scopes []string) error {
	if err := s.Storage.SetUserinfoFromRequest(ctx, ui, req, scopes); err != nil {
		return err
	}
	for _, p := range ssoPeople {
		if p.id == req.GetSubject() && p.groups != nil {
			ui.AppendClaims("groups", p.groups)
		}
	}
	return nil
}

// startProvider starts a real OpenID provider (zitadel/oidc's op, with its
// example storage and login form) on loopback, knowing the client
// "rollout" (secret "rollout-secret") that redirects to redirect.
func startProvider(t *testing.T, redirect string) string {
	t.Helper()
	srv := httptest.NewUnstartedServer(nil)
	issuer := "http://" + srv.Listener.Addr().String()
	st := storage.NewStorageWithClients(newPeople(), map[string]*storage.Client{
		"rollout": storage.WebClient("rollout", "rollout-secret", redirect),
	})
	// The example provider logs every request to slog's default logger.
	slog.SetDefault(slog.New(slog.DiscardHandler))
	srv.Config.Handler = exampleop.SetupServer(issuer, groupsStorage{st}, nil, false)
	srv.Start()
	t.Cleanup(srv.Close)
	return issuer
}

// ssoWorld is rollout's API and dashboard with single sign-on through a
// real provider, on loopback.
type ssoWorld struct {
	a      *app
	tokens *auth.Tokens
	base   string // rollout's URL
	issuer string
	// later moves the clock of sessions forward.
	later atomic.Int64
	// tamper, when set, rewrites the ID token the provider answers the
	// code exchange with, on its way to rollout.
	tamper atomic.Pointer[func(string) string]
}

// tamperer is the transport of rollout's requests to the provider.
type tamperer struct{ w *ssoWorld }

func (tr tamperer) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := http.DefaultTransport.RoundTrip(r)
	f := tr.w.tamper.Load()
	if err != nil || f == nil || !strings.HasSuffix(r.URL.Path, "/token") {
		return res, err
	}
	body, err := io.ReadAll(res.Body)
	res.Body.Close()
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if json.Unmarshal(body, &m) == nil {
		if raw, ok := m["id_token"].(string); ok {
			m["id_token"] = (*f)(raw)
			body, _ = json.Marshal(m)
		}
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	res.ContentLength = int64(len(body))
	res.Header.Del("Content-Length")
	return res, nil
}

func newSSOWorld(t *testing.T) *ssoWorld {
	t.Helper()
	ctx := context.Background()
	w := &ssoWorld{}
	srv := httptest.NewUnstartedServer(nil)
	w.base = "http://" + srv.Listener.Addr().String()
	w.issuer = startProvider(t, w.base+"/ui/login/callback")

	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	clock := func() time.Time { return time.Now().Add(time.Duration(w.later.Load())) }
	w.tokens, err = auth.NewTokens(ctx, db, clock)
	if err != nil {
		t.Fatal(err)
	}
	envs, err := rollout.NewEnvironments(ctx, db, func(env string) rollout.Store { return db.In(env) }, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc, _ := envs.Service(rollout.Production)
	access := api.NewAuth(w.tokens, nil)
	roles, err := web.ParseRoleMap("flag-admins=admin, pm=editor, qa=editor@staging")
	if err != nil {
		t.Fatal(err)
	}
	sso, err := web.NewSSO(ctx, web.SSOConfig{Issuer: w.issuer, ClientID: "rollout", ClientSecret: "rollout-secret",
		Roles: roles, HTTPClient: &http.Client{Transport: tamperer{w}, Timeout: 10 * time.Second}},
		w.tokens, access)
	if err != nil {
		t.Fatal(err)
	}
	hooks := webhook.NewHooks(db, nil)
	e := api.New(svc, api.Options{Auth: access, Plans: testPlanLimits, Webhooks: hooks, Environments: envs,
		Routes: web.Routes(svc, web.Options{Sessions: access, Webhooks: hooks, SSO: sso, Environments: envs})})
	w.a = &app{e: e, svc: svc, db: db}
	w.a.seed(t)
	if _, err := envs.Create(ctx, rollout.Environment{Key: "staging", Name: "Staging"}, rollout.EnvironmentOptions{CopyFrom: rollout.Production}); err != nil {
		t.Fatal(err)
	}
	srv.Config.Handler = e
	srv.Start()
	t.Cleanup(srv.Close)
	return w
}

// client is a browser-like HTTP client with its own cookies.
func client(t *testing.T) *http.Client {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &http.Client{Jar: jar, Timeout: 30 * time.Second}
}

// signIn signs in as user with password through the provider's login form
// and returns the client, the status and the body of rollout's answer to
// the callback.
func (w *ssoWorld) signIn(t *testing.T, user, pass string) (*http.Client, int, string) {
	t.Helper()
	c := client(t)
	res, err := c.Get(w.base + "/ui/login/sso?next=/ui/features/checkout")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	id := res.Request.URL.Query().Get("authRequestID")
	if !strings.HasPrefix(res.Request.URL.String(), w.issuer) || id == "" {
		t.Fatalf("the sign-in button led to %s, not the provider's login form", res.Request.URL)
	}
	res, err = c.PostForm(w.issuer+"/login/username", url.Values{"id": {id}, "username": {user}, "password": {pass}})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	if !strings.HasPrefix(res.Request.URL.String(), w.base+"/ui/login/callback") {
		t.Fatalf("signing in at the provider led to %s, not rollout's callback", res.Request.URL)
	}
	return c, res.StatusCode, string(body)
}

// page GETs path with c without following redirects: the status, where it
// redirects and the body.
func page(t *testing.T, c *http.Client, u string) (int, string, string) {
	t.Helper()
	nc := *c
	nc.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	res, err := nc.Get(u)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header.Get("Location"), string(body)
}

// send makes an API request with c's cookies.
func send(t *testing.T, c *http.Client, method, u, body string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(method, u, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	res, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// TestSSOSignIn: a person signs in with the provider and acts under their
// name, with the role their groups map to; the audit trail names them;
// creating the first API token leaves their session alone.
func TestSSOSignIn(t *testing.T) {
	w := newSSOWorld(t)
	if !w.tokens.Enforced() {
		t.Fatal("a server with single sign-on is open before any token exists")
	}
	if code, loc, _ := page(t, client(t), w.base+"/ui/"); code != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/login") {
		t.Fatalf("GET /ui/ signed out = %d → %q, want a redirect to the sign-in page", code, loc)
	}
	if _, _, body := page(t, client(t), w.base+"/ui/login"); !strings.Contains(body, `id="sso-sign-in"`) {
		t.Error("the sign-in page offers no single sign-on button")
	}

	ann, code, body := w.signIn(t, "ann", "ann-pass")
	if code != http.StatusOK || !strings.Contains(body, `id="signed-in-next" href="/ui/features/checkout"`) {
		t.Fatalf("callback = %d %s, want the signed-in page moving on to the page asked for", code, body)
	}
	code, _, body = page(t, ann, w.base+"/ui/features/checkout")
	if code != http.StatusOK || !strings.Contains(body, `<b id="who">ann@example.com via sso</b> <span class="role">(admin)</span>`) {
		t.Fatalf("GET /ui/features/checkout as ann = %d; want the page naming ann, admin:\n%.400s", code, body)
	}
	// Ann changes a feature: the audit trail names her.
	if code, body := send(t, ann, http.MethodPut, w.base+"/api/features/dark-mode/overrides/qa-1", `{"bucket":"on"}`); code != http.StatusOK {
		t.Fatalf("ann sets an override = %d %s", code, body)
	}
	events, err := w.a.svc.AuditEvents(context.Background(), audit.Query{Kind: audit.Override})
	if err != nil || len(events) == 0 || events[0].Actor != "ann@example.com via sso" {
		t.Fatalf("audit after ann's change = %+v, %v; want her, via sso", events, err)
	}
	// The first API token, created by ann, does not end her session.
	if code, body := send(t, ann, http.MethodPost, w.base+"/api/tokens", `{"name":"ci","role":"sdk"}`); code != http.StatusCreated {
		t.Fatalf("ann creates the first token = %d %s", code, body)
	}
	if code, _, _ := page(t, ann, w.base+"/ui/"); code != http.StatusOK {
		t.Errorf("GET /ui/ after the first token = %d, want 200: the session must live on", code)
	}
	code, body = send(t, ann, http.MethodGet, w.base+"/api/sessions", "")
	if code != http.StatusOK || !strings.Contains(body, `"person":"ann@example.com"`) || !strings.Contains(body, `"role":"admin"`) {
		t.Errorf("GET /api/sessions = %d %s, want ann's admin session", code, body)
	}
}

// TestSSORoles: groups map to roles, the most powerful winning; none
// means viewer, who may read but not change.
func TestSSORoles(t *testing.T) {
	w := newSSOWorld(t)
	for _, c := range []struct {
		user, pass string
		role       auth.Role
		change     int // the status of a change
	}{
		{"pat", "pat-pass", auth.RoleEditor, http.StatusOK},
		{"vic", "vic-pass", auth.RoleViewer, http.StatusForbidden},
		{"ann", "ann-pass", auth.RoleAdmin, http.StatusOK},
	} {
		cl, code, body := w.signIn(t, c.user, c.pass)
		if code != http.StatusOK {
			t.Fatalf("%s's sign-in = %d %s", c.user, code, body)
		}
		_, _, body = page(t, cl, w.base+"/ui/")
		if want := `(` + string(c.role) + `)</span>`; !strings.Contains(body, want) {
			t.Errorf("%s's header lacks %q", c.user, want)
		}
		if code, body := send(t, cl, http.MethodPut, w.base+"/api/features/dark-mode/overrides/qa-"+c.user, `{"bucket":"on"}`); code != c.change {
			t.Errorf("%s sets an override = %d %s, want %d", c.user, code, body, c.change)
		}
		if code, _ := send(t, cl, http.MethodGet, w.base+"/api/tokens", ""); (code == http.StatusOK) != (c.role == auth.RoleAdmin) {
			t.Errorf("%s lists tokens = %d", c.user, code)
		}
	}
	// A wrong password never gets to rollout; the provider says so.
	c := client(t)
	res, err := c.Get(w.base + "/ui/login/sso")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	res, err = c.PostForm(w.issuer+"/login/username", url.Values{"id": {res.Request.URL.Query().Get("authRequestID")}, "username": {"pat"}, "password": {"nope"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if strings.HasPrefix(res.Request.URL.String(), w.base) {
		t.Error("a wrong password at the provider reached rollout's callback")
	}
	if got, _ := w.tokens.Sessions(context.Background()); len(got) != 3 {
		t.Errorf("%d sessions, want 3 (one per sign-in)", len(got))
	}
}

// TestSSORefusesIssuer: a provider whose discovery names another issuer
// is refused at start; an ID token of another (real) provider, and one
// whose claims were changed, are refused at sign-in; no session starts.
func TestSSORefusesIssuer(t *testing.T) {
	w := newSSOWorld(t)
	ctx := context.Background()
	// The configured issuer is not the one the discovery document names.
	tokens, _ := auth.NewTokens(ctx, w.a.db, nil)
	if _, err := web.NewSSO(ctx, web.SSOConfig{Issuer: w.issuer + "/realms/other", ClientID: "rollout"}, tokens, api.NewAuth(tokens)); err == nil {
		t.Error("NewSSO with an issuer the discovery does not name: no error")
	}

	other := startProvider(t, w.base+"/ui/login/callback")
	foreign := idTokenFrom(t, other, w.base)
	swap := func(string) string { return foreign }
	w.tamper.Store(&swap)
	_, code, body := w.signIn(t, "ann", "ann-pass")
	if code != http.StatusUnauthorized || !strings.Contains(body, "issued by another provider") {
		t.Errorf("sign-in with another provider's ID token = %d %q, want 401 saying so", code, refusal(body))
	}

	// A changed claim breaks the signature.
	forge := func(raw string) string {
		parts := strings.Split(raw, ".")
		payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
		var claims map[string]any
		json.Unmarshal(payload, &claims)
		claims["groups"] = []string{"flag-admins"}
		claims["sub"] = "u-vic"
		b, _ := json.Marshal(claims)
		parts[1] = base64.RawURLEncoding.EncodeToString(b)
		return strings.Join(parts, ".")
	}
	w.tamper.Store(&forge)
	_, code, body = w.signIn(t, "vic", "vic-pass")
	if code != http.StatusUnauthorized || !strings.Contains(body, "signature does not match") {
		t.Errorf("sign-in with a tampered ID token = %d %q, want 401 saying so", code, refusal(body))
	}
	if got, _ := w.tokens.Sessions(ctx); len(got) != 0 {
		t.Errorf("sessions after refused sign-ins: %+v", got)
	}
	// Untouched, the same sign-in works: the refusals were the tampering's.
	w.tamper.Store(nil)
	if _, code, body := w.signIn(t, "vic", "vic-pass"); code != http.StatusOK {
		t.Errorf("an untouched sign-in = %d %q", code, refusal(body))
	}
}

// idTokenFrom signs ann in at the provider issuer directly, as rollout
// would, and returns the ID token it issues.
func idTokenFrom(t *testing.T, issuer, rolloutBase string) string {
	t.Helper()
	ctx := context.Background()
	p, err := oidc.NewProvider(ctx, issuer)
	if err != nil {
		t.Fatal(err)
	}
	conf := oauth2.Config{ClientID: "rollout", ClientSecret: "rollout-secret", Endpoint: p.Endpoint(),
		RedirectURL: rolloutBase + "/ui/login/callback", Scopes: []string{"openid", "email"}}
	verifier := oauth2.GenerateVerifier()
	c := client(t)
	c.CheckRedirect = func(r *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(r.URL.String(), rolloutBase) {
			return http.ErrUseLastResponse
		}
		return nil
	}
	res, err := c.Get(conf.AuthCodeURL("st", oauth2.S256ChallengeOption(verifier)))
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	res, err = c.PostForm(issuer+"/login/username", url.Values{"id": {res.Request.URL.Query().Get("authRequestID")}, "username": {"ann"}, "password": {"ann-pass"}})
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	loc, err := url.Parse(res.Header.Get("Location"))
	if err != nil || loc.Query().Get("code") == "" {
		t.Fatalf("no code from %s: %d %q", issuer, res.StatusCode, res.Header.Get("Location"))
	}
	tok, err := conf.Exchange(ctx, loc.Query().Get("code"), oauth2.VerifierOption(verifier))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := tok.Extra("id_token").(string)
	if raw == "" {
		t.Fatal("no ID token")
	}
	return raw
}

// TestSSOSessionEnds: a session expires; one signed out, or revoked by an
// admin, stops working at once, its cookie copied or not.
func TestSSOSessionEnds(t *testing.T) {
	w := newSSOWorld(t)
	ann, _, _ := w.signIn(t, "ann", "ann-pass")
	pat, _, _ := w.signIn(t, "pat", "pat-pass")
	vic, _, _ := w.signIn(t, "vic", "vic-pass")

	// Sign-out: the cookie is cleared, and a copy of it no longer works.
	u, _ := url.Parse(w.base)
	copied := client(t)
	copied.Jar.SetCookies(u, pat.Jar.Cookies(u))
	if code, _ := send(t, pat, http.MethodPost, w.base+"/ui/logout", ""); code != http.StatusOK { // followed to the sign-in page
		t.Fatalf("sign-out = %d", code)
	}
	if code, loc, _ := page(t, copied, w.base+"/ui/"); code != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/login") {
		t.Errorf("GET /ui/ with a signed-out session's cookie = %d → %q, want the sign-in page", code, loc)
	}
	if code, _ := send(t, copied, http.MethodGet, w.base+"/api/features", ""); code != http.StatusUnauthorized {
		t.Errorf("API with a signed-out session's cookie = %d, want 401", code)
	}

	// An admin revokes vic's session.
	all, err := w.tokens.Sessions(context.Background())
	if err != nil || len(all) != 2 {
		t.Fatalf("sessions = %+v, %v; want ann's and vic's", all, err)
	}
	var vics string
	for _, s := range all {
		if s.Person == "vic@example.com" {
			vics = s.ID
		}
	}
	if code, body := send(t, vic, http.MethodDelete, w.base+"/api/sessions/"+vics, ""); code != http.StatusForbidden {
		t.Errorf("vic (viewer) revokes a session = %d %s, want 403", code, body)
	}
	if code, body := send(t, ann, http.MethodDelete, w.base+"/api/sessions/"+vics, ""); code != http.StatusNoContent {
		t.Fatalf("ann revokes vic's session = %d %s", code, body)
	}
	if code, body := send(t, ann, http.MethodDelete, w.base+"/api/sessions/"+vics, ""); code != http.StatusNotFound || !strings.Contains(body, `"error"`) {
		t.Errorf("revoking it again = %d %s, want a 404 JSON error", code, body)
	}
	if code, _ := send(t, vic, http.MethodGet, w.base+"/api/features", ""); code != http.StatusUnauthorized {
		t.Errorf("vic's revoked session = %d, want 401", code)
	}
	events, _ := w.a.svc.AuditEvents(context.Background(), audit.Query{Kind: audit.SessionRevoke, Ascending: true})
	if len(events) != 2 || events[0].Actor != "pat@example.com via sso" || events[0].Summary != "signed out" ||
		events[1].Actor != "ann@example.com via sso" || events[1].Subject != "vic@example.com" {
		t.Errorf("session_revoke events = %+v, want pat's sign-out and ann's revoke of vic's session", events)
	}

	// Ann's session expires after 12 hours.
	if code, _, _ := page(t, ann, w.base+"/ui/"); code != http.StatusOK {
		t.Fatalf("ann before expiry = %d", code)
	}
	w.later.Store(int64(12*time.Hour + time.Minute))
	if code, loc, _ := page(t, ann, w.base+"/ui/"); code != http.StatusSeeOther || !strings.HasPrefix(loc, "/ui/login") {
		t.Errorf("GET /ui/ after 12 hours = %d → %q, want the sign-in page", code, loc)
	}
	if code, _ := send(t, ann, http.MethodGet, w.base+"/api/features", ""); code != http.StatusUnauthorized {
		t.Errorf("API after 12 hours = %d, want 401", code)
	}
}

// TestSSOCallbackAbuse: a callback that this browser did not start, with
// another state, or with a provider's error, is refused with 4xx, starts
// no session and calls no provider.
func TestSSOCallbackAbuse(t *testing.T) {
	w := newSSOWorld(t)
	c := client(t)
	for _, q := range []string{
		"", "?code=x", "?state=y", "?code=x&state=y",
		"?error=access_denied&error_description=no",
		"?code=" + strings.Repeat("x", 5000) + "&state=y",
	} {
		code, _, body := page(t, c, w.base+"/ui/login/callback"+q)
		if code < 400 || code >= 500 || !strings.Contains(body, "Single sign-on failed") {
			t.Errorf("callback%.40s = %d, want 4xx with the reason", q, code)
		}
	}
	// A state of this browser's sign-in, but not the one given.
	res, err := c.Get(w.base + "/ui/login/sso")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if code, _, _ := page(t, c, w.base+"/ui/login/callback?code=abc&state=forged"); code != http.StatusBadRequest {
		t.Errorf("callback with another state = %d, want 400", code)
	}
	// A forged state cookie.
	u, _ := url.Parse(w.base + "/ui/login/callback")
	c.Jar.SetCookies(u, []*http.Cookie{{Name: "rollout_sso", Value: "c3Q.forged", Path: "/ui/login"}})
	if code, _, _ := page(t, c, w.base+"/ui/login/callback?code=abc&state=st"); code != http.StatusBadRequest {
		t.Errorf("callback with a forged state cookie = %d, want 400", code)
	}
	if got, _ := w.tokens.Sessions(context.Background()); len(got) != 0 {
		t.Errorf("sessions after refused callbacks: %+v", got)
	}
}

// refusal is the sign-in page's error message in body.
func refusal(body string) string {
	_, after, _ := strings.Cut(body, `id="login-error">`)
	msg, _, _ := strings.Cut(after, "</p>")
	return html.UnescapeString(msg)
}

// TestBrowserSSO: in Chromium, the sign-in page's single sign-on button
// leads to the provider's login form and back, signed in on the page first
// asked for, under the person's name and role; at 390 px the button is in
// view and nothing overflows; signing out returns to the sign-in page.
func TestBrowserSSO(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: a browser test takes seconds")
	}
	w := newSSOWorld(t)
	b := startBrowserAt(t, w.a, w.base)
	b.do(chromedp.Navigate(w.base+"/ui/features/checkout"), waitFor("#sso-sign-in"))
	b.screenshot("sso-login-wide", 1280)
	b.do(chromedp.EmulateViewport(390, 900))
	if over := evaluate[bool](b, `document.documentElement.scrollWidth > innerWidth`); over {
		t.Error("the sign-in page overflows at 390 px")
	}
	if r := evaluate[float64](b, `document.getElementById('sso-sign-in').getBoundingClientRect().right`); r > 390 {
		t.Errorf("the single sign-on button ends at %v px, past 390", r)
	}
	b.screenshot("sso-login-narrow", 390)
	b.dark()
	b.screenshot("sso-login-dark-wide", 1280)
	b.screenshot("sso-login-dark-narrow", 390)
	b.do(chromedp.Click(chromedp.CSS("#sso-sign-in")), waitFor("#username"),
		fill("#username", "pat"), fill("#password", "pat-pass"), chromedp.Submit(chromedp.CSS("#password")),
		waitFor("#who"))
	if got := b.text("#who"); got != "pat@example.com via sso" {
		t.Errorf("signed in as %q, want pat@example.com via sso", got)
	}
	if got := evaluate[string](b, `location.pathname`); got != "/ui/features/checkout" {
		t.Errorf("after signing in: %s, want the page first asked for", got)
	}
	if got := b.text(".who .role"); got != "(editor)" {
		t.Errorf("role shown %q, want (editor)", got)
	}
	b.screenshot("sso-signed-in-dark-narrow", 390)
	b.do(chromedp.Click(chromedp.CSS(".signout button")), waitFor("#sso-sign-in"))
	b.do(chromedp.Navigate(w.base+"/ui/"), waitFor("#sso-sign-in"))
	b.checkConsole()
}

// TestSSOScopedRole: a group mapped to a role in one environment
// (qa=editor@staging) signs its people in as that role there alone: they
// change staging, and are refused production as a token scoped to staging
// is; the session says so. A map naming a bad environment is refused.
func TestSSOScopedRole(t *testing.T) {
	w := newSSOWorld(t)
	cl, code, body := w.signIn(t, "sam", "sam-pass")
	if code != http.StatusOK {
		t.Fatalf("sam's sign-in = %d %s", code, body)
	}
	if code, body := send(t, cl, http.MethodPut, w.base+"/api/features/dark-mode/overrides/qa-sam?env=staging", `{"bucket":"on"}`); code != http.StatusOK {
		t.Errorf("sam's change in staging = %d %s, want 200", code, body)
	}
	if code, body := send(t, cl, http.MethodPut, w.base+"/api/features/dark-mode/overrides/qa-sam?env=production", `{"bucket":"on"}`); code != http.StatusForbidden {
		t.Errorf("sam's change in production = %d %s, want 403", code, body)
	}
	if code, body := send(t, cl, http.MethodGet, w.base+"/api/features/dark-mode", ""); code != http.StatusOK || !strings.Contains(body, `"environment":"staging"`) {
		t.Errorf("sam's read without ?env = %d %s, want staging's feature", code, body)
	}
	sessions, err := w.tokens.Sessions(context.Background())
	if err != nil || len(sessions) != 1 || sessions[0].Environment != "staging" || sessions[0].Role != auth.RoleEditor {
		t.Errorf("sessions = %+v, %v; want sam's editor session in staging", sessions, err)
	}
	for _, bad := range []string{"qa=editor@", "qa=editor@Not Valid", "qa=owner@staging"} {
		if _, err := web.ParseRoleMap(bad); err == nil {
			t.Errorf("ParseRoleMap(%q) accepted it", bad)
		}
	}
}
