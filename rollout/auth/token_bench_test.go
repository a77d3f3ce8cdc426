package auth_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/store/sqlite"
)

// BenchmarkAuthenticate is the cost of checking a token already seen (the
// common case: an app's token on every request), which also notes the
// token's use for LastUsedAt; BenchmarkAuthenticateUnknown, a secret that
// matches no token (a SHA-256 sum and a map look-up), is its baseline.
func BenchmarkAuthenticate(b *testing.B) {
	tokens, secret := benchTokens(b)
	tokens.Authenticate(secret)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := tokens.Authenticate(secret); !ok {
			b.Fatal("token refused")
		}
	}
}

func BenchmarkAuthenticateUnknown(b *testing.B) {
	tokens, _ := benchTokens(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := tokens.Authenticate("rlt_unknown"); ok {
			b.Fatal("unknown token accepted")
		}
	}
}

func benchTokens(b *testing.B) (*auth.Tokens, string) {
	b.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "rollout.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	tokens, err := auth.NewTokens(context.Background(), db, nil)
	if err != nil {
		b.Fatal(err)
	}
	_, secret, err := tokens.Create(context.Background(), "app", auth.RoleSDK, time.Now())
	if err != nil {
		b.Fatal(err)
	}
	return tokens, secret
}
