package api_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store/sqlite"
)

// BenchmarkEvaluateGetEnvironments is GET /evaluate on a server of two
// environments: with a token scoped to production (the default, as every
// app token before environments), to staging, and, without tokens, with
// ?env=staging; beside the bare handler answering as much.
func BenchmarkEvaluateGetEnvironments(b *testing.B) {
	ctx := context.Background()
	for _, mode := range []string{"production-token", "staging-token", "open-env-staging"} {
		db, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "rollout.db"))
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { db.Close() })
		envs, err := rollout.NewEnvironments(ctx, db, func(env string) rollout.Store { return db.In(env) }, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := envs.Create(ctx, rollout.Environment{Key: "staging", Name: "Staging"}, rollout.EnvironmentOptions{}); err != nil {
			b.Fatal(err)
		}
		svc, _ := envs.Service(rollout.Production)
		for i := range benchFeatures {
			f := feature.Feature{Key: fmt.Sprintf("feature-%02d", i), Enabled: true, Salt: fmt.Sprintf("feature-%02d", i),
				Buckets: []feature.Bucket{{Name: "control", Replicas: 100}, {Name: "A", Replicas: 100}, {Name: "B", Replicas: 100}, {Name: "C", Replicas: 100}}}
			if _, err := svc.Create(ctx, f, rollout.ChangeOptions{}); err != nil {
				b.Fatal(err)
			}
		}
		opts := api.Options{Metrics: api.NewMetrics(), Environments: envs}
		target, secret := "/evaluate?feature=feature-07&user=user-4711@example.com", ""
		if mode == "open-env-staging" {
			target += "&env=staging"
		} else {
			tokens, err := auth.NewTokens(ctx, db, nil)
			if err != nil {
				b.Fatal(err)
			}
			env := map[string]string{"production-token": "production", "staging-token": "staging"}[mode]
			if _, secret, err = tokens.CreateIn(ctx, "bench", auth.RoleSDK, env, time.Now(), ""); err != nil {
				b.Fatal(err)
			}
			opts.Auth = api.NewAuth(tokens, nil)
		}
		h := api.New(svc, opts)
		br := newBenchRequest(http.MethodGet, target, "", secret)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, br.next())
		if rec.Code != http.StatusOK {
			b.Fatalf("%s: GET %s = %d %s", mode, target, rec.Code, rec.Body)
		}
		answer := rec.Body.Bytes()
		if mode == "production-token" {
			b.Run("baseline", func(b *testing.B) { benchServe(b, bare(bytes.Clone(answer)), br, len(answer)) })
		}
		b.Run(mode, func(b *testing.B) { benchServe(b, h, br, len(answer)) })
	}
}
