package auth_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
)

// TestPeopleSessions: Require enforces access with no token; a person's
// session lives until it expires or is revoked, on this instance at once
// and on another after a refresh; only a person's roles are accepted.
func TestPeopleSessions(t *testing.T) {
	ctx := context.Background()
	db := openDB(t)
	var later atomic.Int64
	clock := func() time.Time { return time.Now().Add(time.Duration(later.Load())) }
	tokens, err := auth.NewTokens(ctx, db, clock)
	if err != nil {
		t.Fatal(err)
	}
	if tokens.Enforced() {
		t.Fatal("enforced with no token")
	}
	tokens.Require()
	if !tokens.Enforced() {
		t.Fatal("Require() did not enforce access")
	}
	if err := tokens.Refresh(ctx); err != nil || !tokens.Enforced() {
		t.Fatalf("a refresh undid Require(): %v", err)
	}
	for _, role := range []auth.Role{auth.RoleSDK, auth.RoleClient, auth.RoleEvaluate, "root"} {
		if _, err := tokens.StartSession(ctx, "ann@example.com", "u1", role, time.Hour); feature.ErrorCode(err) != feature.EInvalid {
			t.Errorf("a person's session with role %s: err = %v, want invalid", role, err)
		}
	}
	if _, err := tokens.StartSession(ctx, "", "u1", auth.RoleViewer, time.Hour); feature.ErrorCode(err) != feature.EInvalid {
		t.Errorf("a session of nobody: err = %v, want invalid", err)
	}
	ann, err := tokens.StartSession(ctx, "ann@example.com", "u1", auth.RoleAdmin, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pat, err := tokens.StartSession(ctx, "pat@example.com", "u2", auth.RoleEditor, 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if s, ok := tokens.Session(ann.ID); !ok || s.Actor() != "ann@example.com via sso" || s.Token().Role != auth.RoleAdmin || s.Token().Name != "ann@example.com via sso" {
		t.Fatalf("Session(ann) = %+v, %v", s, ok)
	}
	other, err := auth.NewTokens(ctx, db, clock)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := other.Session(pat.ID); !ok {
		t.Error("another instance does not know pat's session")
	}
	if err := tokens.RevokeSession(ctx, pat.ID, "ann@example.com via sso"); err != nil {
		t.Fatal(err)
	}
	if _, ok := tokens.Session(pat.ID); ok {
		t.Error("a revoked session lives on")
	}
	if err := other.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok := other.Session(pat.ID); ok {
		t.Error("a session revoked elsewhere lives on after a refresh")
	}
	later.Store(int64(time.Hour + time.Second))
	if _, ok := tokens.Session(ann.ID); ok {
		t.Error("an expired session lives on")
	}
	if err := tokens.RevokeSession(ctx, ann.ID, ""); feature.ErrorCode(err) != feature.ENotFound {
		t.Errorf("revoking an expired session: err = %v, want not_found", err)
	}
}
