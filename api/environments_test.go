package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/store"
	"github.com/rollout/rollout/store/postgres"
	"github.com/rollout/rollout/store/sqlite"
	"github.com/rollout/rollout/store/storetest"
)

// newEnvServer starts the API with the environments of db, tokens
// enforced once made (as rollout serve does).
func newEnvServer(t *testing.T, db *store.DB) (*testServer, *rollout.Environments) {
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
	srv := httptest.NewServer(api.New(svc, api.Options{Environments: envs, Auth: api.NewAuth(tokens, []byte("0123456789abcdef0123456789abcdef"))}))
	t.Cleanup(srv.Close)
	return &testServer{t: t, URL: srv.URL, svc: svc, db: db}, envs
}

// forEachStore runs test on a new SQLite database and a new PostgreSQL
// one.
func forEachStore(t *testing.T, test func(t *testing.T, db *store.DB)) {
	t.Run("sqlite", func(t *testing.T) {
		db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "rollout.db"))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		test(t, db)
	})
	t.Run("postgres", func(t *testing.T) {
		db, err := postgres.Open(context.Background(), storetest.PostgresDSN(t))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		test(t, db)
	})
}

// evaluations returns the bucket feature f serves users u0…u(n-1) in the
// environment env ("": the token's or production), with the token given.
func evaluations(s *testServer, f, env string, n int, header ...string) []string {
	s.t.Helper()
	out := make([]string, n)
	for i := range out {
		q := url.Values{"feature": {f}, "user": {fmt.Sprintf("u%d", i)}}
		if env != "" {
			q.Set("env", env)
		}
		r := s.must(200, "GET", "/evaluate?"+q.Encode(), nil, header...)
		out[i] = fmt.Sprint(r.json(s.t.(*testing.T))["bucket"])
	}
	return out
}

func differing(a, b []string) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

// TestEnvironments: a feature created in production exists, switched off,
// in an environment made later; each environment evaluates its own
// configuration for the tokens scoped to it; a promotion's churn is the
// preview's of the same buckets in the target, a stale ETag is refused
// with 412, and after promoting everything both environments answer alike.
func TestEnvironments(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *store.DB) {
		s, envs := newEnvServer(t, db)
		s.must(201, "POST", "/api/features", map[string]any{"key": "f", "enabled": true,
			"buckets": []map[string]any{{"name": "on", "replicas": 20}, {"name": "off", "replicas": 20}}})

		got := s.must(200, "GET", "/api/environments", nil).json(t)
		if list := got["environments"].([]any); len(list) != 1 || list[0].(map[string]any)["key"] != "production" {
			t.Fatalf("environments of a new database = %v, want production alone", got)
		}
		s.must(201, "POST", "/api/environments", map[string]any{"key": "staging", "name": "Staging"})
		s.must(409, "POST", "/api/environments", map[string]any{"key": "staging", "name": "Again"})
		s.must(422, "POST", "/api/environments", map[string]any{"key": "Not A Key", "name": "x"})
		s.must(404, "POST", "/api/environments", map[string]any{"key": "qa", "name": "QA", "copy_from": "nowhere"})

		st := s.must(200, "GET", "/api/features/f?env=staging", nil).json(t)
		if st["enabled"] != false || st["environment"] != "staging" {
			t.Fatalf("f in staging = %v, want it switched off, in staging", st)
		}
		if r := s.do("GET", "/api/features/f?env=nowhere", nil); r.status != 404 || r.json(t)["error"].(map[string]any)["code"] != "unknown_environment" {
			t.Fatalf("unknown environment = %d %s, want 404 unknown_environment", r.status, r.body)
		}

		// Staging gets other shares and is switched on; a feature made in
		// staging exists in production, off.
		s.must(200, "PUT", "/api/features/f/buckets?env=staging", map[string]any{"buckets": []map[string]any{{"name": "on", "replicas": 60}, {"name": "off", "replicas": 20}}})
		s.must(200, "PATCH", "/api/features/f?env=staging", map[string]any{"enabled": true})
		s.must(201, "POST", "/api/features?env=staging", map[string]any{"key": "g", "enabled": true, "buckets": []map[string]any{{"name": "a", "replicas": 10}}})
		if g := s.must(200, "GET", "/api/features/g", nil).json(t); g["enabled"] != false {
			t.Fatalf("g in production = %v, want it switched off", g)
		}

		// Tokens: an sdk token scoped to staging, an admin of everything.
		admin := s.must(201, "POST", "/api/tokens", map[string]any{"name": "root", "role": "admin"}).json(t)["token"].(string)
		asAdmin := []string{"Authorization", "Bearer " + admin}
		s.must(404, "POST", "/api/tokens", map[string]any{"name": "x", "role": "sdk", "environment": "nowhere"}, asAdmin...)
		stagingSDK := s.must(201, "POST", "/api/tokens", map[string]any{"name": "app-staging", "role": "sdk", "environment": "staging"}, asAdmin...).json(t)["token"].(string)
		prodSDK := s.must(201, "POST", "/api/tokens", map[string]any{"name": "app-prod", "role": "sdk"}, asAdmin...).json(t)["token"].(string)
		asStaging, asProd := []string{"Authorization", "Bearer " + stagingSDK}, []string{"Authorization", "Bearer " + prodSDK}

		const n = 400
		inStaging, inProd := evaluations(s, "f", "", n, asStaging...), evaluations(s, "f", "", n, asProd...)
		if d := differing(inStaging, inProd); d == 0 {
			t.Fatalf("staging (75 %% on) and production (50 %% on) serve every user alike")
		}
		escaped := s.must(200, "GET", "/evaluate?feature=f&user=u7&env=stag%69ng", nil, asAdmin...).json(t)["bucket"]
		if want := inStaging[7]; fmt.Sprint(escaped) != want {
			t.Fatalf("env=stag%%69ng served %v, staging serves %v", escaped, want)
		}
		if r := s.do("GET", "/api/features?env="+strings.Repeat("x", 5000), nil, asAdmin...); r.status != 404 || len(r.body) > 400 {
			t.Fatalf("a 5000-byte environment = %d with %d bytes, want a short 404", r.status, len(r.body))
		}
		if otherPaths(s, asStaging...) == otherPaths(s, asProd...) {
			t.Fatalf("POST /evaluate and OFREP answer alike in staging (75 %% on) and production (50 %% on)")
		}
		if r := s.do("GET", "/evaluate?feature=f&user=u1&env=production", nil, asStaging...); r.status != 403 {
			t.Fatalf("a staging token asking for production = %d %s, want 403", r.status, r.body)
		}
		if r := s.do("GET", "/sync/v1/snapshot", nil, asStaging...); r.status != 200 || !json.Valid(r.body) {
			t.Fatalf("staging snapshot = %d", r.status)
		} else if prod := s.must(200, "GET", "/sync/v1/snapshot", nil, asProd...); string(prod.body) == string(r.body) {
			t.Fatalf("the staging and production snapshots are the same bytes")
		}

		// Exposures: a staging token's counts are accepted for staging's
		// features alone, never production's.
		sf := s.must(200, "GET", "/api/features/f?env=staging", nil, asAdmin...).json(t)
		pf := s.must(200, "GET", "/api/features/f", nil, asAdmin...).json(t)
		r := s.must(200, "POST", "/api/exposures", exposureBatch("environments-1",
			exposure("f", sf["id"].(string), int(sf["version"].(float64)), "on", 3),
			exposure("f", pf["id"].(string), int(pf["version"].(float64)), "on", 5)), asStaging...).json(t)
		if r["counted"] != float64(1) || len(r["skipped"].([]any)) != 1 {
			t.Fatalf("staging token's exposures of staging's and production's f = %v, want staging's counted and production's skipped", r)
		}
		snap := string(s.must(200, "GET", "/sync/v1/snapshot", nil, asStaging...).body)
		if !strings.Contains(snap, sf["id"].(string)) || strings.Contains(snap, pf["id"].(string)) {
			t.Fatalf("staging's snapshot does not hold staging's f alone: %.300s", snap)
		}

		// Promotion: the dry run's churn is the preview's of the same
		// buckets in production, to the last digit.
		preview := s.must(200, "POST", "/api/features/f/preview", map[string]any{"buckets": []map[string]any{{"name": "on", "replicas": 60}, {"name": "off", "replicas": 20}}}, asAdmin...).json(t)
		dry := s.must(200, "POST", "/api/features/f/promote", map[string]any{"from": "staging", "to": "production", "dry_run": true}, asAdmin...).json(t)
		if fmt.Sprint(dry["report"].(map[string]any)["churn"]) != fmt.Sprint(preview["churn"]) {
			t.Fatalf("promotion's churn %v, the preview's %v", dry["report"].(map[string]any)["churn"], preview["churn"])
		}
		s.must(412, "POST", "/api/features/f/promote", map[string]any{"from": "staging", "to": "production"}, append(asAdmin, "If-Match", `"1-stale"`)...)
		s.must(412, "POST", "/api/features/f/promote", map[string]any{"from": "staging", "to": "production", "from_version": 1}, asAdmin...)
		tag := s.must(200, "GET", "/api/features/f", nil, asAdmin...).header.Get("ETag")
		s.must(200, "POST", "/api/features/f/promote", map[string]any{"from": "staging", "to": "production"}, append(asAdmin, "If-Match", tag)...)
		if d := differing(evaluations(s, "f", "", n, asStaging...), evaluations(s, "f", "", n, asProd...)); d != 0 {
			t.Fatalf("after the promotion %d of %d users get another bucket in staging than in production", d, n)
		}
		if a, b := otherPaths(s, asStaging...), otherPaths(s, asProd...); a != b {
			t.Fatalf("after the promotion POST /evaluate and OFREP answer otherwise in staging (%s) than in production (%s)", a, b)
		}
		cmp := s.must(200, "GET", "/api/environments/compare?from=staging&to=production", nil, asAdmin...).json(t)
		for _, d := range cmp["features"].([]any) {
			if d.(map[string]any)["feature"] == "f" {
				t.Fatalf("f still differs after its promotion: %v", d)
			}
		}
		per := s.must(200, "GET", "/api/features/f/environments", nil, asAdmin...).json(t)["environments"].([]any)
		if len(per) != 2 {
			t.Fatalf("f's environments = %v, want 2", per)
		}

		// The audit trail of each environment: its own events and those of
		// every environment, never another's.
		for env, own := range map[string]string{"staging": "change", "production": "promote"} {
			events := s.must(200, "GET", "/api/audit?limit=1000&env="+env, nil, asAdmin...).json(t)["events"].([]any)
			kinds := map[string]bool{}
			for _, e := range events {
				e := e.(map[string]any)
				kinds[e["kind"].(string)] = true
				if got := e["environment"]; got != env && got != "" {
					t.Fatalf("GET /api/audit?env=%s lists an event of %v: %v", env, got, e)
				}
			}
			if !kinds["environment_create"] || !kinds["token_create"] || !kinds[own] {
				t.Fatalf("GET /api/audit?env=%s has kinds %v, want its %s and the shared environment_create and token_create", env, kinds, own)
			}
		}

		// Deleting: refused while a token is scoped to it.
		s.must(409, "DELETE", "/api/environments/staging", nil, asAdmin...)
		if _, ok := envs.Service("staging"); !ok {
			t.Fatal("staging was deleted despite its token")
		}
	})
}

// TestEnvironmentBatchPromotionAndProtection: a batch promotion's total
// churn is the sum of its features' dry runs; one feature over max_churn
// refuses the whole batch, changing nothing; applied, every feature moves.
// In a protected environment an editor's promotion is a change request,
// which an admin approves; a token scoped to staging may not touch
// production.
func TestEnvironmentBatchPromotionAndProtection(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *store.DB) {
		s, _ := newEnvServer(t, db)
		for _, k := range []string{"a", "b", "c"} {
			s.must(201, "POST", "/api/features", map[string]any{"key": k, "enabled": true,
				"buckets": []map[string]any{{"name": "on", "replicas": 20}, {"name": "off", "replicas": 20}}})
		}
		s.must(201, "POST", "/api/environments", map[string]any{"key": "staging", "name": "Staging", "copy_from": "production"})
		if f := s.must(200, "GET", "/api/features/a?env=staging", nil).json(t); f["enabled"] != true {
			t.Fatalf("a copied into staging = %v, want production's configuration (enabled)", f)
		}
		s.must(200, "PUT", "/api/features/a/buckets?env=staging", map[string]any{"buckets": []map[string]any{{"name": "on", "replicas": 40}, {"name": "off", "replicas": 20}}})
		s.must(200, "PUT", "/api/features/b/buckets?env=staging", map[string]any{"buckets": []map[string]any{{"name": "on", "replicas": 20}, {"name": "off", "replicas": 60}}})

		sum := 0.0
		for _, k := range []string{"a", "b"} {
			dry := s.must(200, "POST", "/api/features/"+k+"/promote", map[string]any{"from": "staging", "to": "production", "dry_run": true}).json(t)
			sum += dry["report"].(map[string]any)["churn"].(float64)
		}
		batch := map[string]any{"from": "staging", "to": "production", "features": []string{"a", "b", "c"}}
		dry := s.must(200, "POST", "/api/environments/promote?dry_run=true", batch).json(t)
		if got := dry["total_churn"].(float64); fmt.Sprint(got) != fmt.Sprint(sum) {
			t.Fatalf("batch total_churn %v, the features' dry runs sum to %v", got, sum)
		}
		first := dry["features"].([]any)[0].(map[string]any)["churn"].(float64)
		s.must(409, "POST", "/api/environments/promote", map[string]any{"from": "staging", "to": "production", "features": []string{"a", "b"}, "max_churn": first / 2})
		for _, k := range []string{"a", "b"} {
			if v := s.must(200, "GET", "/api/features/"+k, nil).json(t)["version"]; v != float64(1) {
				t.Fatalf("%s after a refused batch is at version %v, want 1", k, v)
			}
		}
		applied := s.must(200, "POST", "/api/environments/promote", batch).json(t)
		if applied["applied"] != true {
			t.Fatalf("batch = %v, want applied", applied)
		}
		for _, k := range []string{"a", "b"} {
			if v := s.must(200, "GET", "/api/features/"+k, nil).json(t)["version"]; v != float64(2) {
				t.Fatalf("%s after the batch is at version %v, want 2", k, v)
			}
		}
		s.must(400, "POST", "/api/environments/promote", map[string]any{"from": "staging", "to": "production", "features": make([]string, 501)})

		// Protection: an editor's promotion into production is a request.
		admin := s.must(201, "POST", "/api/tokens", map[string]any{"name": "root", "role": "admin"}).json(t)["token"].(string)
		asAdmin := []string{"Authorization", "Bearer " + admin}
		editor := s.must(201, "POST", "/api/tokens", map[string]any{"name": "ed", "role": "editor"}, asAdmin...).json(t)["token"].(string)
		stagingEditor := s.must(201, "POST", "/api/tokens", map[string]any{"name": "sed", "role": "editor", "environment": "staging"}, asAdmin...).json(t)["token"].(string)
		asEditor, asStagingEditor := []string{"Authorization", "Bearer " + editor}, []string{"Authorization", "Bearer " + stagingEditor}
		s.must(403, "PATCH", "/api/environments/production", map[string]any{"protected": true}, asEditor...)
		s.must(200, "PATCH", "/api/environments/production", map[string]any{"protected": true}, asAdmin...)
		s.must(200, "PUT", "/api/features/c/buckets?env=staging", map[string]any{"buckets": []map[string]any{{"name": "on", "replicas": 21}, {"name": "off", "replicas": 20}}}, asEditor...)
		r := s.must(202, "POST", "/api/features/c/promote", map[string]any{"from": "staging", "to": "production"}, asEditor...).json(t)
		req := r["request"].(map[string]any)
		s.must(200, "POST", "/api/requests/"+req["id"].(string)+"/approve?env=production", map[string]any{}, asAdmin...)
		if v := s.must(200, "GET", "/api/features/c", nil, asAdmin...).json(t)["version"]; v != float64(2) {
			t.Fatalf("c after the approved promotion is at version %v, want 2", v)
		}
		s.must(403, "PATCH", "/api/features/c?env=production", map[string]any{"enabled": false}, asStagingEditor...)
		s.must(403, "POST", "/api/features/c/promote", map[string]any{"from": "staging", "to": "production"}, asStagingEditor...)
		// Settings are each environment's.
		s.must(200, "PUT", "/api/settings?env=staging", map[string]any{"max_churn": 0.5}, asAdmin...)
		if got := s.must(200, "GET", "/api/settings", nil, asAdmin...).json(t)["max_churn"]; got != 0.25 {
			t.Fatalf("production's max_churn after staging's settings changed = %v, want 0.25", got)
		}
		// Deleting an environment: it is gone, its key kept.
		s.must(201, "POST", "/api/environments", map[string]any{"key": "qa", "name": "QA"}, asAdmin...)
		s.must(204, "DELETE", "/api/environments/qa", nil, asAdmin...)
		s.must(404, "GET", "/api/features?env=qa", nil, asAdmin...)
		s.must(409, "POST", "/api/environments", map[string]any{"key": "qa", "name": "QA again"}, asAdmin...)
		s.must(403, "DELETE", "/api/environments/staging", nil, asStagingEditor...)
		s.must(200, "PUT", "/api/features/c/buckets/on", map[string]any{"replicas": 22}, asStagingEditor...) // its own environment
		if f := s.must(200, "GET", "/api/features/c?env=staging", nil, asAdmin...).json(t); f["version"] != float64(3) {
			t.Fatalf("the staging editor's change did not land in staging: %v", f)
		}
		if f := s.must(200, "GET", "/api/features/c", nil, asAdmin...).json(t); f["version"] != float64(2) {
			t.Fatalf("the staging editor's change moved production: %v", f)
		}
	})
}

// otherPaths returns the buckets of f for users u0…u39 through POST
// /evaluate and OFREP, with the token given, as one string.
func otherPaths(s *testServer, header ...string) string {
	s.t.Helper()
	t := s.t.(*testing.T)
	var b strings.Builder
	for i := range 40 {
		user := fmt.Sprintf("u%d", i)
		post := s.must(200, "POST", "/evaluate", map[string]any{"user": user, "features": []string{"f"}}, header...).json(t)
		ofrep := s.must(200, "POST", "/ofrep/v1/evaluate/flags/f", map[string]any{"context": map[string]any{"targetingKey": user}}, header...).json(t)
		fmt.Fprintf(&b, "%v/%v ", post["results"].(map[string]any)["f"].(map[string]any)["bucket"], ofrep["variant"])
	}
	return b.String()
}
