package auth_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store"
	"github.com/rollout/rollout/store/sqlite"
)

func TestRolesAllow(t *testing.T) {
	perms := []auth.Permission{auth.PermEvaluate, auth.PermSync, auth.PermRead, auth.PermWrite, auth.PermAdmin}
	want := map[auth.Role][]bool{
		auth.RoleAdmin:    {true, true, true, true, true},
		auth.RoleEditor:   {true, true, true, true, false},
		auth.RoleViewer:   {true, true, true, false, false},
		auth.RoleSDK:      {true, true, false, false, false},
		auth.RoleEvaluate: {true, true, false, false, false},
		auth.RoleClient:   {true, false, false, false, false},
		"root":            {false, false, false, false, false},
	}
	for role, allowed := range want {
		if role.Valid() != (role != "root") {
			t.Errorf("%s.Valid() = %v", role, role.Valid())
		}
		for i, p := range perms {
			if got := role.Allows(p); got != allowed[i] {
				t.Errorf("%s.Allows(%d) = %v, want %v", role, p, got, allowed[i])
			}
		}
	}
	if len(auth.Roles) != len(want)-1 {
		t.Errorf("Roles = %v, want the %d roles of this test", auth.Roles, len(want)-1)
	}
}

func TestTokens(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	tokens := newTokens(t, db)
	if tokens.Enforced() {
		t.Fatal("Enforced() with no token = true")
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	tok, secret, err := tokens.Create(ctx, "deploy-bot", auth.RoleEditor, now)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, "rlt_") || len(secret) < 40 || tok.Hash != auth.HashToken(secret) {
		t.Errorf("secret %q / hash %q: want a long rlt_ secret whose SHA-256 is the hash", secret, tok.Hash)
	}
	if !tokens.Enforced() {
		t.Error("Enforced() after the first token = false")
	}
	if got, ok := tokens.Authenticate(secret); !ok || got.Name != "deploy-bot" || got.Role != auth.RoleEditor {
		t.Errorf("Authenticate(secret) = %v, %v", got, ok)
	}
	if _, ok := tokens.Authenticate(secret + "x"); ok {
		t.Error("Authenticate(wrong secret) = ok")
	}
	// The secret itself is stored nowhere.
	all, _ := tokens.List(ctx)
	for _, t2 := range all {
		if t2.Hash == secret || strings.Contains(t2.Name, secret) {
			t.Error("the secret is stored")
		}
	}

	if _, _, err := tokens.Create(ctx, "deploy-bot", auth.RoleViewer, now); feature.ErrorCode(err) != feature.EConflict {
		t.Errorf("second active token of the same name: err = %v, want conflict", err)
	}
	for _, bad := range []struct {
		name string
		role auth.Role
	}{{"", auth.RoleAdmin}, {"a b", auth.RoleAdmin}, {"ok", "root"}} {
		if _, _, err := tokens.Create(ctx, bad.name, bad.role, now); feature.ErrorCode(err) != feature.EInvalid {
			t.Errorf("Create(%q, %q): err = %v, want invalid", bad.name, bad.role, err)
		}
	}

	if err := tokens.Revoke(ctx, "deploy-bot", now); err != nil {
		t.Fatal(err)
	}
	if _, ok := tokens.Authenticate(secret); ok {
		t.Error("a revoked token still authenticates")
	}
	if !tokens.Enforced() {
		t.Error("Enforced() after revoking the only token = false: revoking must never open the API")
	}
	if err := tokens.Revoke(ctx, "deploy-bot", now); feature.ErrorCode(err) != feature.ENotFound {
		t.Errorf("revoking twice: err = %v, want not_found", err)
	}
	// The name is free again; the revoked token stays listed.
	if _, _, err := tokens.Create(ctx, "deploy-bot", auth.RoleViewer, now.Add(time.Second)); err != nil {
		t.Errorf("re-creating a revoked name: %v", err)
	}
	all, _ = tokens.List(ctx)
	if len(all) != 2 || all[0].RevokedAt == nil || all[1].RevokedAt != nil {
		t.Errorf("List() = %+v, want the revoked token and the new one", all)
	}

	// Another process's changes are seen after a refresh.
	other, _ := auth.NewTokens(ctx, db, nil)
	_, s2, _ := other.Create(ctx, "ops", auth.RoleAdmin, now)
	if _, ok := tokens.Authenticate(s2); ok {
		t.Error("a token created elsewhere is known before a refresh")
	}
	if err := tokens.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := tokens.Authenticate(s2); !ok {
		t.Error("a token created elsewhere is unknown after a refresh")
	}
	// Authenticate remembers the secrets it matched: one revoked elsewhere
	// is still refused once a refresh has seen the revoke.
	if err := other.Revoke(ctx, "ops", now); err != nil {
		t.Fatal(err)
	}
	if err := tokens.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := tokens.Authenticate(s2); ok {
		t.Error("a token revoked elsewhere still authenticates after a refresh")
	}
}

// heldTokenStore holds a read of the tokens table, once armed, between
// the read and its return, so that a test can put a revoke in between.
type heldTokenStore struct {
	auth.Store
	hold atomic.Pointer[chan struct{}]
	held chan struct{}
}

func (s *heldTokenStore) Tokens(ctx context.Context) ([]auth.Token, error) {
	all, err := s.Store.Tokens(ctx)
	if h := s.hold.Swap(nil); h != nil {
		s.held <- struct{}{}
		<-*h
	}
	return all, err
}

// TestRefreshCannotResurrectRevoked: a refresh that read the table before a
// revoke finishes after it; the revoked token must still be refused once
// Revoke has returned.
func TestRefreshCannotResurrectRevoked(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	st := &heldTokenStore{Store: db, held: make(chan struct{})}
	tokens := newTokens(t, st)
	_, secret, err := tokens.Create(ctx, "ci", auth.RoleEditor, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	release := make(chan struct{})
	st.hold.Store(&release)
	stale := make(chan error)
	go func() { stale <- tokens.Refresh(ctx) }()
	<-st.held // that refresh has read the table with the token active

	revoked := make(chan error)
	go func() { revoked <- tokens.Revoke(ctx, "ci", time.Now()) }()
	for { // until the revoke is in the database
		all, err := db.Tokens(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if all[0].RevokedAt != nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	if err := <-stale; err != nil {
		t.Fatal(err)
	}
	if err := <-revoked; err != nil {
		t.Fatal(err)
	}
	if _, ok := tokens.Authenticate(secret); ok {
		t.Fatal("a revoked token authenticates after Revoke returned: a stale refresh was stored last")
	}
	if !tokens.Enforced() {
		t.Fatal("tokens are no longer enforced after the only token was revoked")
	}
}

// TestTokensHammer creates, revokes and refreshes from many goroutines at
// once (run with -race): a revoked token never authenticates once Revoke
// returned, and enforcement, once on, never goes off.
func TestTokensHammer(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	tokens := newTokens(t, db)
	if tokens.Enforced() {
		t.Fatal("enforced with no token")
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var enforcedLost atomic.Bool
	for range 2 { // refreshers, as the interval refresh does
		wg.Add(1)
		go func() {
			defer wg.Done()
			sawEnforced := false
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := tokens.Refresh(ctx); err != nil {
					t.Error(err)
					return
				}
				e := tokens.Enforced()
				if sawEnforced && !e {
					enforcedLost.Store(true)
				}
				sawEnforced = sawEnforced || e
			}
		}()
	}
	var writers sync.WaitGroup
	for w := range 3 {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for i := range 15 {
				name := fmt.Sprintf("w%d-%d", w, i)
				_, secret, err := tokens.Create(ctx, name, auth.RoleViewer, time.Now())
				if err != nil {
					t.Error(err)
					return
				}
				if _, ok := tokens.Authenticate(secret); !ok {
					t.Errorf("token %s does not authenticate after Create returned", name)
				}
				if err := tokens.Revoke(ctx, name, time.Now()); err != nil {
					t.Error(err)
					return
				}
				if _, ok := tokens.Authenticate(secret); ok {
					t.Errorf("token %s authenticates after Revoke returned", name)
				}
			}
		}()
	}
	writers.Wait()
	close(stop)
	wg.Wait()
	if enforcedLost.Load() || !tokens.Enforced() {
		t.Error("tokens stopped being enforced after the first one was created")
	}
}

// openDB opens a new SQLite store in a temporary directory, closed when t
// ends.
func openDB(t *testing.T) *store.DB {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// newTokens returns the tokens of st, loaded.
func newTokens(t *testing.T, st auth.Store) *auth.Tokens {
	t.Helper()
	tokens, err := auth.NewTokens(context.Background(), st, nil)
	if err != nil {
		t.Fatal(err)
	}
	return tokens
}
