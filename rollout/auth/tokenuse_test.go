package auth_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/store/sqlite"
)

// TestTokenLastUsed: a token's use is saved at the next refresh, at most
// once per TokenUseResolution, and not at all while it is not used.
func TestTokenLastUsed(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	var mu sync.Mutex
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { mu.Lock(); defer mu.Unlock(); return now }
	advance := func(d time.Duration) { mu.Lock(); now = now.Add(d); mu.Unlock() }
	tokens, err := auth.NewTokens(ctx, db, clock)
	if err != nil {
		t.Fatal(err)
	}
	tok, secret, err := tokens.Create(ctx, "app", auth.RoleSDK, clock())
	if err != nil {
		t.Fatal(err)
	}
	lastUsed := func() *time.Time {
		t.Helper()
		if err := tokens.Refresh(ctx); err != nil {
			t.Fatal(err)
		}
		all, err := db.Tokens(ctx)
		if err != nil || len(all) != 1 || all[0].ID != tok.ID {
			t.Fatalf("Tokens() = %v, %v", all, err)
		}
		return all[0].LastUsedAt
	}
	if got := lastUsed(); got != nil {
		t.Fatalf("LastUsedAt of an unused token = %v, want nil", got)
	}
	first := clock()
	for range 3 {
		if _, ok := tokens.Authenticate(secret); !ok {
			t.Fatal("token refused")
		}
	}
	if got := lastUsed(); got == nil || !got.Equal(first) {
		t.Fatalf("LastUsedAt = %v, want %v", got, first)
	}
	advance(30 * time.Second)
	tokens.Authenticate(secret)
	if got := lastUsed(); got == nil || !got.Equal(first) {
		t.Errorf("LastUsedAt 30 s later = %v, want %v still (saved at most once a minute)", got, first)
	}
	advance(31 * time.Second)
	if got := lastUsed(); got == nil || !got.Equal(first.Add(61*time.Second)) {
		t.Errorf("LastUsedAt a minute later = %v, want %v (the use 30 s in, saved now)", got, first.Add(61*time.Second))
	}
	advance(time.Hour)
	if got := lastUsed(); got == nil || !got.Equal(first.Add(61*time.Second)) {
		t.Errorf("LastUsedAt after an hour unused = %v, want it unchanged", got)
	}
}
