package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
)

// testPeopleSessions: a person's session is listed, from another handle
// too, until it expires or is revoked, once; each start and revoke is an
// audit event naming the person and a token commit.
func testPeopleSessions(t *testing.T, o Opened) {
	ctx := context.Background()
	now := time.Now().UTC().Truncate(time.Second)
	other := o.Open(t)
	ann := auth.Session{ID: "s-ann", Person: "ann@example.com", Subject: "u1", Role: auth.RoleAdmin, CreatedAt: now, ExpiresAt: now.Add(time.Hour)}
	pat := auth.Session{ID: "s-pat", Person: "pat@example.com", Subject: "u2", Role: auth.RoleEditor, CreatedAt: now.Add(time.Second), ExpiresAt: now.Add(2 * time.Hour)}
	for _, s := range []auth.Session{ann, pat} {
		if err := o.Store.CreateSession(ctx, s); err != nil {
			t.Fatalf("CreateSession(%s) = %v", s.ID, err)
		}
	}
	if err := other.CreateSession(ctx, ann); feature.ErrorCode(err) != feature.EConflict {
		t.Errorf("CreateSession(same ID) = %v, want conflict", err)
	}
	got, err := other.Sessions(ctx, now)
	if err != nil || len(got) != 2 || got[0].ID != "s-ann" || got[1].ID != "s-pat" {
		t.Fatalf("Sessions(now) = %+v, %v; want ann's then pat's", got, err)
	}
	if g := got[0]; g.Person != ann.Person || g.Subject != "u1" || g.Role != auth.RoleAdmin || !g.CreatedAt.Equal(now) || !g.ExpiresAt.Equal(ann.ExpiresAt) {
		t.Errorf("Sessions()[0] = %+v, want %+v", g, ann)
	}
	if got, err := o.Store.Sessions(ctx, now.Add(90*time.Minute)); err != nil || len(got) != 1 || got[0].ID != "s-pat" {
		t.Errorf("Sessions(in 90 minutes) = %+v, %v; want pat's only (ann's expired)", got, err)
	}
	if err := other.RevokeSession(ctx, "s-ann", now.Add(90*time.Minute), "ada"); feature.ErrorCode(err) != feature.ENotFound {
		t.Errorf("RevokeSession(expired) = %v, want not_found", err)
	}
	if err := other.RevokeSession(ctx, "s-pat", now.Add(time.Minute), "ann@example.com via sso"); err != nil {
		t.Fatalf("RevokeSession(s-pat) = %v", err)
	}
	if err := o.Store.RevokeSession(ctx, "s-pat", now.Add(time.Minute), "ada"); feature.ErrorCode(err) != feature.ENotFound {
		t.Errorf("RevokeSession(s-pat) again = %v, want not_found", err)
	}
	if err := o.Store.RevokeSession(ctx, "nope", now, "ada"); feature.ErrorCode(err) != feature.ENotFound {
		t.Errorf("RevokeSession(unknown) = %v, want not_found", err)
	}
	if got, err := o.Store.Sessions(ctx, now); err != nil || len(got) != 1 || got[0].ID != "s-ann" {
		t.Errorf("Sessions(now) after revoking pat's = %+v, %v; want ann's", got, err)
	}
	es := wantKinds(t, o.Store, audit.Query{Ascending: true}, "session_create ann@example.com", "session_create pat@example.com", "session_revoke pat@example.com")
	if len(es) == 3 && (es[1].Actor != "pat@example.com via sso" || es[2].Actor != "ann@example.com via sso") {
		t.Errorf("audit actors %q, %q; want the person via sso", es[0].Actor, es[2].Actor)
	}
	commits, err := o.Store.Commits(ctx, 0, 0)
	if err != nil || len(commits) != 3 {
		t.Fatalf("Commits() = %+v, %v; want one per start and revoke", commits, err)
	}
	for _, c := range commits {
		if c.Kind != rollout.CommitToken || c.Key != auth.SessionCommitKey {
			t.Errorf("commit %+v, want kind %q key %q", c, rollout.CommitToken, auth.SessionCommitKey)
		}
	}
}
