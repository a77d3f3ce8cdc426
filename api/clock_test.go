package api_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/store/sqlite"
)

// TestSessionExpiresByTheTokensClock: a dashboard session lasts
// SessionLifetime by the clock the tokens were given, not the machine's:
// moved past it, the session is refused, with no wait.
func TestSessionExpiresByTheTokensClock(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var offset atomic.Int64 // how far the clock is ahead of the machine's
	clock := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	b := &sessionBench{t: t, db: db, secrets: map[string]string{}}
	if b.tokens, err = auth.NewTokens(ctx, db, clock); err != nil {
		t.Fatal(err)
	}
	_, secret, err := b.tokens.Create(ctx, "viewer-bot", auth.RoleViewer, clock())
	if err != nil {
		t.Fatal(err)
	}
	b.secrets["viewer"] = secret
	if b.svc, err = rollout.NewService(ctx, db, clock); err != nil {
		t.Fatal(err)
	}
	url := b.start(key('k'))
	ck := b.signIn(url, "viewer")
	for _, tt := range []struct {
		ahead time.Duration
		want  int
	}{
		{0, 200},
		{api.SessionLifetime - time.Minute, 200},
		{api.SessionLifetime + time.Minute, 401},
	} {
		offset.Store(int64(tt.ahead))
		if got := b.status(url, "GET", "/api/features", ck); got != tt.want {
			t.Errorf("GET /api/features with the clock %v ahead = %d, want %d", tt.ahead, got, tt.want)
		}
	}
}
