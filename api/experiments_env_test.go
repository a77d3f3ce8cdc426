package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/experiment"
	"github.com/rollout/rollout/store"
)

// newEnvExperimentServer is newEnvServer with the experiments of every
// environment, as rollout serve makes them.
func newEnvExperimentServer(t *testing.T, db *store.DB) (*testServer, *rollout.Environments, *experiment.EnvironmentExperiments) {
	t.Helper()
	envs, err := rollout.NewEnvironments(context.Background(), db, func(env string) rollout.Store { return db.In(env) }, nil)
	if err != nil {
		t.Fatalf("environments: %v", err)
	}
	svc, _ := envs.Service(rollout.Production)
	tokens, err := auth.NewTokens(context.Background(), db, nil)
	if err != nil {
		t.Fatal(err)
	}
	exps := experiment.NewEnvironmentExperiments(func(env string) experiment.ExperimentStore { return db.In(env) })
	srv := httptest.NewServer(api.New(svc, api.Options{Environments: envs, Experiments: exps,
		Auth: api.NewAuth(tokens, []byte("0123456789abcdef0123456789abcdef"))}))
	t.Cleanup(srv.Close)
	return &testServer{t: t, URL: srv.URL, svc: svc, db: db}, envs, exps
}

// TestExperimentEnvironments: an experiment in staging and one in
// production on the same feature key count their own users and
// conversions alone: users evaluated with each environment's token (and
// named in a staging token's batch of exposures) go to that environment's
// experiment, and events tracked with each environment's token count for
// that environment's alone, though the user IDs and the metric are shared.
func TestExperimentEnvironments(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *store.DB) {
		ctx := context.Background()
		s, envs, exps := newEnvExperimentServer(t, db)
		s.must(http.StatusCreated, "POST", "/api/features", map[string]any{"key": "checkout", "enabled": true,
			"buckets": []map[string]any{{"name": "control", "replicas": 50}, {"name": "treatment", "replicas": 50}}})
		s.must(http.StatusCreated, "POST", "/api/environments", map[string]any{"key": "staging", "name": "Staging", "copy_from": "production"})
		s.must(http.StatusCreated, "POST", "/api/metrics", map[string]any{"key": "purchase", "kind": "conversion"})
		start := map[string]any{"name": "green", "control": "control", "metrics": []string{"purchase"}}
		prodX := s.must(http.StatusCreated, "POST", "/api/features/checkout/experiments", start).json(t)["experiment"].(map[string]any)["id"].(string)
		stagingX := s.must(http.StatusCreated, "POST", "/api/features/checkout/experiments?env=staging", start).json(t)["experiment"].(map[string]any)["id"].(string)
		s.must(http.StatusConflict, "POST", "/api/features/checkout/experiments?env=staging", start) // one running per feature and environment
		s.must(http.StatusNotFound, "GET", "/api/features/checkout/experiments/"+stagingX, nil)      // production's has no such
		if xs := s.must(http.StatusOK, "GET", "/api/features/checkout/experiments?env=staging", nil).json(t)["experiments"].([]any); len(xs) != 1 ||
			xs[0].(map[string]any)["id"] != stagingX {
			t.Fatalf("staging's experiments = %v, want %s alone", xs, stagingX)
		}

		admin := s.must(http.StatusCreated, "POST", "/api/tokens", map[string]any{"name": "root", "role": "admin"}).json(t)["token"].(string)
		asAdmin := []string{"Authorization", "Bearer " + admin}
		token := func(name, env string) []string {
			body := map[string]any{"name": name, "role": "sdk"}
			if env != "" {
				body["environment"] = env
			}
			return []string{"Authorization", "Bearer " + s.must(http.StatusCreated, "POST", "/api/tokens", body, asAdmin...).json(t)["token"].(string)}
		}
		asProd, asStaging := token("app-prod", ""), token("app-staging", "staging")

		// Production serves p0…p9; staging serves s0…s3 and its in-app
		// client served s4…s7, named in a batch of exposures with a user
		// of production's feature row, which staging does not count.
		for i := range 10 {
			s.must(http.StatusOK, "GET", "/evaluate?"+url.Values{"feature": {"checkout"}, "user": {fmt.Sprintf("p%d", i)}}.Encode(), nil, asProd...)
		}
		for i := range 4 {
			s.must(http.StatusOK, "GET", "/evaluate?"+url.Values{"feature": {"checkout"}, "user": {fmt.Sprintf("s%d", i)}}.Encode(), nil, asStaging...)
		}
		staging, _ := envs.Service("staging")
		sf := staging.Snapshot().Compiled("checkout")
		pf := s.svc.Snapshot().Compiled("checkout")
		var users []map[string]any
		for i := 4; i < 8; i++ {
			user := fmt.Sprintf("s%d", i)
			o, err := staging.Snapshot().Peek("checkout", user)
			if err != nil {
				t.Fatal(err)
			}
			users = append(users, map[string]any{"feature_id": sf.Feature().ID, "version": sf.Feature().Version, "bucket": o.Bucket, "user": user})
		}
		users = append(users, map[string]any{"feature_id": pf.Feature().ID, "version": pf.Feature().Version, "bucket": "control", "user": "p-elsewhere"})
		batch := exposureBatch("experiment-envs-1", exposure("checkout", sf.Feature().ID, sf.Feature().Version, "control", 4))
		batch["users"] = users
		ans := s.must(http.StatusOK, "POST", "/api/exposures", batch, asStaging...).json(t)
		if ans["users"] != float64(4) || fmt.Sprint(ans["experiments"]) != fmt.Sprint([]any{sf.Feature().ID}) {
			t.Fatalf("staging's batch of exposures = %v, want 4 users recorded and staging's feature row alone", ans)
		}
		for _, svc := range []*rollout.Service{s.svc, staging} {
			if err := exps.Of(svc).Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}

		// Each environment's apps report conversions: production's of p0,
		// p1 and s1 (a staging user, not production's), staging's of s1,
		// s5 and p2 (a production user, not staging's).
		track := func(batch string, header []string, users ...string) {
			var events []any
			for _, u := range users {
				events = append(events, map[string]any{"metric": "purchase", "user": u})
			}
			if r := s.must(http.StatusOK, "POST", "/api/track", map[string]any{"batch": batch, "events": events}, header...).json(t); r["tracked"] != float64(len(users)) {
				t.Fatalf("POST /api/track = %v", r)
			}
		}
		track("track-production-1", asProd, "p0", "p1", "s1")
		track("track-staging-0001", asStaging, "s1", "s5", "p2")
		if r := s.do("POST", "/api/track?env=production", map[string]any{"batch": "track-forbidden-1", "events": []any{map[string]any{"metric": "purchase", "user": "p3"}}}, asStaging...); r.status != http.StatusForbidden {
			t.Fatalf("a staging token tracking for production = %d %s, want 403", r.status, r.body)
		}

		for _, c := range []struct {
			env, id          string
			users, converted float64
		}{{"production", prodX, 10, 2}, {"staging", stagingX, 8, 2}} {
			r := s.must(http.StatusOK, "GET", "/api/features/checkout/experiments/"+c.id+"/results?env="+c.env, nil, asAdmin...).json(t)
			users, converted := 0.0, 0.0
			for _, b := range r["buckets"].([]any) {
				b := b.(map[string]any)
				users += b["users"].(float64)
				converted += b["metrics"].(map[string]any)["purchase"].(map[string]any)["users_converted"].(float64)
			}
			if users != c.users || converted != c.converted {
				t.Errorf("%s's results = %g users, %g converted; want %g, %g", c.env, users, converted, c.users, c.converted)
			}
		}
	})
}
