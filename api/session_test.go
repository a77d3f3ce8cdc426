package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/store"
	"github.com/rollout/rollout/store/sqlite"
	"github.com/rollout/rollout/web"
)

// sessionBench is one database with a viewer and an admin token, on which
// servers with different session keys are started.
type sessionBench struct {
	t       *testing.T
	db      *store.DB
	tokens  *auth.Tokens
	svc     *rollout.Service
	secrets map[string]string
}

func newSessionBench(t *testing.T) *sessionBench {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	b := &sessionBench{t: t, db: db, secrets: map[string]string{}}
	if b.tokens, err = auth.NewTokens(ctx, db, nil); err != nil {
		t.Fatal(err)
	}
	for _, role := range []auth.Role{auth.RoleViewer, auth.RoleAdmin} {
		_, secret, err := b.tokens.Create(ctx, string(role)+"-bot", role, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		b.secrets[string(role)] = secret
	}
	if b.svc, err = rollout.NewService(ctx, db, nil); err != nil {
		t.Fatal(err)
	}
	return b
}

// start serves the API and dashboard with sessions signed by keys.
func (b *sessionBench) start(keys ...[]byte) string {
	access := api.NewAuth(b.tokens, keys...)
	e := api.New(b.svc, api.Options{Auth: access, Routes: web.Routes(b.svc, web.Options{Sessions: access})})
	srv := httptest.NewServer(e)
	b.t.Cleanup(srv.Close)
	return srv.URL
}

var noRedirect = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// signIn signs in on url with the token of role and returns the cookie.
func (b *sessionBench) signIn(url, role string) *http.Cookie {
	b.t.Helper()
	res, err := noRedirect.Post(url+"/ui/login", "application/x-www-form-urlencoded", strings.NewReader("token="+b.secrets[role]))
	if err != nil {
		b.t.Fatal(err)
	}
	res.Body.Close()
	for _, c := range res.Cookies() {
		if c.Name == api.SessionCookie {
			return c
		}
	}
	b.t.Fatalf("sign-in as %s = %d without a session cookie", role, res.StatusCode)
	return nil
}

// status is the answer to method path on url with the cookie.
func (b *sessionBench) status(url, method, path string, ck *http.Cookie) int {
	b.t.Helper()
	req, _ := http.NewRequest(method, url+path, nil)
	req.AddCookie(ck)
	res, err := noRedirect.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}

// commits is how many commits the database has.
func (b *sessionBench) commits() int {
	b.t.Helper()
	cs, err := b.db.Commits(context.Background(), 0, 0)
	if err != nil {
		b.t.Fatal(err)
	}
	return len(cs)
}

func key(c byte) []byte { return []byte(strings.Repeat(string(c), 32)) }

// TestSessionKeyRotation: sessions are signed with the first key and
// accepted with any, so that a new key put first keeps the sessions signed
// with the old one until the old one is dropped.
func TestSessionKeyRotation(t *testing.T) {
	b := newSessionBench(t)
	oldOnly, both, newOnly := b.start(key('o')), b.start(key('n'), key('o')), b.start(key('n'))
	old := b.signIn(oldOnly, "viewer")
	fresh := b.signIn(both, "viewer")
	for _, tt := range []struct {
		name, url string
		ck        *http.Cookie
		want      int
	}{
		{"old session, old key", oldOnly, old, 200},
		{"old session, both keys", both, old, 200},
		{"old session, old key dropped", newOnly, old, 401},
		{"new session, both keys", both, fresh, 200},
		{"new session, new key", newOnly, fresh, 200},
		{"new session, old key alone", oldOnly, fresh, 401},
	} {
		if got := b.status(tt.url, "GET", "/api/features", tt.ck); got != tt.want {
			t.Errorf("%s: GET /api/features = %d, want %d", tt.name, got, tt.want)
		}
	}
}

// TestSignOutOnlyLiveSessionOnce: signing out ends a live session once, for
// one commit; signing out again with the same cookie, at once or later, with
// a forged cookie, or with a session of a revoked token writes nothing.
func TestSignOutOnlyLiveSessionOnce(t *testing.T) {
	b := newSessionBench(t)
	url := b.start(key('k'))
	ck := b.signIn(url, "viewer")
	before := b.commits()
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if got := b.status(url, "POST", "/ui/logout", ck); got != http.StatusSeeOther {
				t.Errorf("POST /ui/logout = %d, want 303", got)
			}
		})
	}
	wg.Wait()
	for range 20 {
		b.status(url, "POST", "/ui/logout", ck)
	}
	if got := b.commits() - before; got != 1 {
		t.Errorf("29 sign-outs of one session wrote %d commits, want 1", got)
	}
	if ended, err := b.db.EndedSessions(context.Background(), time.Now()); err != nil || len(ended) != 1 {
		t.Errorf("ended sessions = %q, %v; want 1", ended, err)
	}
	if got := b.status(url, "GET", "/api/features", ck); got != 401 {
		t.Errorf("GET /api/features with a signed-out session = %d, want 401", got)
	}

	before = b.commits()
	forged := *b.signIn(url, "viewer")
	forged.Value = forged.Value[:len(forged.Value)-2] + "xx"
	b.status(url, "POST", "/ui/logout", &forged)
	other := b.signIn(b.start(key('z')), "viewer") // signed with a key this server does not have
	b.status(url, "POST", "/ui/logout", other)
	revoked := b.signIn(url, "viewer")
	if err := b.tokens.Revoke(context.Background(), "viewer-bot", time.Now()); err != nil {
		t.Fatal(err)
	}
	before++ // the revoke's commit
	b.status(url, "POST", "/ui/logout", revoked)
	if got := b.commits() - before; got != 0 {
		t.Errorf("sign-outs of sessions that are not live wrote %d commits, want 0", got)
	}
}
