package api_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/rollout/rollout/store"
)

// TestEnvironmentsShareDefinition: a feature is defined once. Its
// description, tags, owner and its buckets' names and values, changed in
// one environment, are the same in every other at once, each with a
// version of its own that moves no one there; a bucket added elsewhere
// gets no share; a bucket another environment still serves cannot be
// removed; an editor cannot change the value of a bucket a protected
// environment serves from another environment; a document's new feature
// exists everywhere.
func TestEnvironmentsShareDefinition(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *store.DB) {
		s, _ := newEnvServer(t, db)
		s.must(201, "POST", "/api/environments", map[string]any{"key": "staging", "name": "Staging"})
		s.must(201, "POST", "/api/environments", map[string]any{"key": "dev", "name": "Dev"})
		s.must(201, "POST", "/api/features?env=staging", map[string]any{"key": "checkout", "enabled": true, "description": "old",
			"buckets": []map[string]any{{"name": "control", "replicas": 20, "value": "blue"}, {"name": "treatment", "replicas": 20, "value": "green"}}})
		s.must(200, "PATCH", "/api/features/checkout", map[string]any{"enabled": true, "fallback": "control"})
		const n = 300
		before := evaluations(s, "checkout", "production", n)
		prodVersion := s.must(200, "GET", "/api/features/checkout", nil).json(t)["version"].(float64)

		// Description, tags and owner.
		s.must(200, "PATCH", "/api/features/checkout?env=staging", map[string]any{"description": "new checkout", "tags": []string{"team-pay", "web"}, "owner": "ann"})
		for _, env := range []string{"production", "dev"} {
			f := s.must(200, "GET", "/api/features/checkout?env="+env, nil).json(t)
			if f["description"] != "new checkout" || fmt.Sprint(f["tags"]) != "[team-pay web]" || f["owner"] != "ann" {
				t.Fatalf("checkout in %s after staging's change = %v, want staging's description, tags and owner", env, f)
			}
		}
		p := s.must(200, "GET", "/api/features/checkout", nil).json(t)
		if p["version"].(float64) != prodVersion+1 || p["enabled"] != true || p["fallback"] != "control" {
			t.Fatalf("production after the definition change = %v, want version %v, its own configuration kept", p, prodVersion+1)
		}
		vs := s.must(200, "GET", "/api/features/checkout/versions?limit=1", nil).json(t)["versions"].([]any)
		if v := vs[0].(map[string]any); !strings.HasPrefix(v["summary"].(string), "definition changed in staging") || v["report"].(map[string]any)["churn"] != 0.0 {
			t.Fatalf("production's newest version = %v, want a definition change from staging moving no one", v)
		}

		// A bucket added in staging, with users there, has no share in
		// production: no user of production moves.
		s.must(200, "POST", "/api/features/checkout/buckets?env=staging", map[string]any{"name": "fast", "replicas": 20, "value": "red"})
		pf := s.must(200, "GET", "/api/features/checkout", nil).json(t)
		if b := bucketOf(pf, "fast"); b == nil || b["replicas"] != 0.0 || b["value"] != "red" {
			t.Fatalf("production's buckets after staging added fast = %v, want fast with 0 replicas and its value", pf["buckets"])
		}
		if after := evaluations(s, "checkout", "production", n); differing(before, after) != 0 {
			t.Fatalf("%d of %d production users moved when staging added a bucket", differing(before, after), n)
		}

		// A value changed in staging is what production serves.
		s.must(200, "PUT", "/api/features/checkout/buckets/control?env=staging", map[string]any{"value": "navy"})
		for i := range n {
			r := s.must(200, "GET", fmt.Sprintf("/evaluate?feature=checkout&user=u%d&env=production", i), nil).json(t)
			if r["bucket"] == "control" {
				if r["value"] != "navy" {
					t.Fatalf("production serves control as %v after staging changed its value to navy", r["value"])
				}
				break
			}
		}

		// Production gives fast users: staging cannot remove it, until
		// production takes them off it.
		s.must(200, "PUT", "/api/features/checkout/buckets/fast", map[string]any{"replicas": 5})
		r := s.do("DELETE", "/api/features/checkout/buckets/fast?env=staging", nil)
		if r.status != 409 || !strings.Contains(string(r.body), "production") {
			t.Fatalf("removing a bucket production serves = %d %s, want 409 naming production", r.status, r.body)
		}
		if f := s.must(200, "GET", "/api/features/checkout?env=staging", nil).json(t); bucketOf(f, "fast") == nil {
			t.Fatalf("the refused removal removed fast from staging")
		}
		s.must(200, "PUT", "/api/features/checkout/buckets/fast", map[string]any{"replicas": 0})
		s.must(200, "PUT", "/api/features/checkout/buckets/fast?env=staging", map[string]any{"replicas": 0})
		s.must(200, "DELETE", "/api/features/checkout/buckets/fast?env=staging", nil)
		for _, env := range []string{"production", "dev"} {
			if f := s.must(200, "GET", "/api/features/checkout?env="+env, nil).json(t); bucketOf(f, "fast") != nil {
				t.Fatalf("%s still has bucket fast after staging removed it", env)
			}
		}

		// An editor in staging cannot change the value of a bucket that
		// protected production serves; an admin can.
		admin := s.must(201, "POST", "/api/tokens", map[string]any{"name": "root", "role": "admin"}).json(t)["token"].(string)
		asAdmin := []string{"Authorization", "Bearer " + admin}
		editor := s.must(201, "POST", "/api/tokens", map[string]any{"name": "ed", "role": "editor"}, asAdmin...).json(t)["token"].(string)
		asEditor := []string{"Authorization", "Bearer " + editor}
		s.must(200, "PATCH", "/api/environments/production", map[string]any{"protected": true}, asAdmin...)
		r = s.do("PUT", "/api/features/checkout/buckets/control?env=staging", map[string]any{"value": "black"}, asEditor...)
		if r.status != 403 || !strings.Contains(string(r.body), "protected environment production") {
			t.Fatalf("an editor's change of a value protected production serves = %d %s, want 403", r.status, r.body)
		}
		s.must(200, "PATCH", "/api/features/checkout?env=staging", map[string]any{"description": "editors may describe"}, asEditor...)
		s.must(200, "PUT", "/api/features/checkout/buckets/control?env=staging", map[string]any{"value": "black"}, asAdmin...)
		if b := bucketOf(s.must(200, "GET", "/api/features/checkout", nil, asAdmin...).json(t), "control"); b["value"] != "black" {
			t.Fatalf("production's control after an admin's change in staging = %v, want black", b)
		}

		// A feature a document creates in dev exists, switched off, in
		// the other environments.
		doc := "document:\n  features:\n    - key: from-doc\n      enabled: true\n      buckets:\n        - name: on\n          share: 1\n"
		s.must(200, "POST", "/api/apply?env=dev", doc, append(asAdmin, "Content-Type", "application/yaml")...)
		for _, env := range []string{"production", "staging"} {
			if f := s.must(200, "GET", "/api/features/from-doc?env="+env, nil, asAdmin...).json(t); f["enabled"] != false {
				t.Fatalf("from-doc in %s = %v, want it there, switched off", env, f)
			}
		}
	})
}

// bucketOf returns the bucket name of the feature f as the API answers it;
// nil when it has none.
func bucketOf(f map[string]any, name string) map[string]any {
	for _, b := range f["buckets"].([]any) {
		if b := b.(map[string]any); b["name"] == name {
			return b
		}
	}
	return nil
}

// TestEnvironmentsArchiveEverywhere: archiving a feature in one environment
// archives it in every one, the preview saying what it does in each;
// restoring it anywhere serves each environment's own configuration again;
// an editor's archive that would stop a protected environment's feature
// is a change request; purging it frees its key everywhere.
func TestEnvironmentsArchiveEverywhere(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *store.DB) {
		s, _ := newEnvServer(t, db)
		s.must(201, "POST", "/api/environments", map[string]any{"key": "staging", "name": "Staging"})
		s.must(201, "POST", "/api/features", map[string]any{"key": "f", "enabled": true,
			"buckets": []map[string]any{{"name": "on", "replicas": 20}, {"name": "off", "replicas": 20}}})
		s.must(200, "PUT", "/api/features/f/buckets/on?env=staging", map[string]any{"replicas": 60})

		preview := s.must(200, "POST", "/api/features/f/archive?env=staging", map[string]any{"dry_run": true}).json(t)
		elsewhere, _ := preview["elsewhere"].([]any)
		if len(elsewhere) != 1 || elsewhere[0].(map[string]any)["environment"] != "production" || elsewhere[0].(map[string]any)["churn"] != 1.0 {
			t.Fatalf("archive preview in staging = %v, want production named with all its users losing their bucket", preview)
		}
		s.must(200, "GET", "/api/features/f", nil) // a dry run archives nothing

		s.must(200, "POST", "/api/features/f/archive?env=staging", map[string]any{"comment": "done"})
		for _, env := range []string{"production", "staging"} {
			s.must(404, "GET", "/api/features/f?env="+env, nil)
			s.must(404, "GET", "/evaluate?feature=f&user=u1&env="+env, nil)
			list := s.must(200, "GET", "/api/features?archived=true&env="+env, nil).json(t)
			if fmt.Sprint(list) == "" || !strings.Contains(fmt.Sprint(list), "key:f") {
				t.Fatalf("archived features of %s = %v, want f", env, list)
			}
		}
		audit := s.must(200, "GET", "/api/audit?feature=f&env=production", nil)
		if !strings.Contains(string(audit.body), "archived in staging") {
			t.Fatalf("production's audit trail = %s, want the archive made in staging", audit.body)
		}

		// Restored from production: each environment serves its own
		// configuration again.
		s.must(200, "POST", "/api/features/f/restore", nil)
		if b := bucketOf(s.must(200, "GET", "/api/features/f?env=staging", nil).json(t), "on"); b["replicas"] != 60.0 {
			t.Fatalf("staging's bucket on after the restore = %v, want its own 60 replicas", b)
		}
		if b := bucketOf(s.must(200, "GET", "/api/features/f", nil).json(t), "on"); b["replicas"] != 20.0 {
			t.Fatalf("production's bucket on after the restore = %v, want its own 20 replicas", b)
		}

		// An editor's archive from staging, production protected: a request.
		admin := s.must(201, "POST", "/api/tokens", map[string]any{"name": "root", "role": "admin"}).json(t)["token"].(string)
		asAdmin := []string{"Authorization", "Bearer " + admin}
		editor := s.must(201, "POST", "/api/tokens", map[string]any{"name": "ed", "role": "editor"}, asAdmin...).json(t)["token"].(string)
		s.must(200, "PATCH", "/api/environments/production", map[string]any{"protected": true}, asAdmin...)
		r := s.must(202, "POST", "/api/features/f/archive?env=staging", nil, "Authorization", "Bearer "+editor).json(t)
		if r["request"] == nil {
			t.Fatalf("an editor's archive touching protected production = %v, want a change request", r)
		}
		s.must(200, "GET", "/api/features/f", nil, asAdmin...)
		s.must(200, "GET", "/api/features/f?env=staging", nil, asAdmin...)

		// Archived and purged from staging: the key is free everywhere.
		s.must(200, "POST", "/api/features/f/archive?env=staging", nil, asAdmin...)
		s.must(204, "DELETE", "/api/features/f?purge=true&env=staging", nil, asAdmin...)
		for _, env := range []string{"production", "staging"} {
			if list := s.must(200, "GET", "/api/features?archived=true&env="+env, nil, asAdmin...); strings.Contains(string(list.body), `"key":"f"`) {
				t.Fatalf("archived features of %s after the purge = %s, want none", env, list.body)
			}
		}
		s.must(201, "POST", "/api/features", map[string]any{"key": "f", "buckets": []map[string]any{{"name": "on", "replicas": 1}}}, asAdmin...)
	})
}

// TestPromotionOfAlikeWritesNothing: promoting a feature whose target is
// alike already answers unchanged and writes no version; a stale If-Match
// is still refused.
func TestPromotionOfAlikeWritesNothing(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *store.DB) {
		s, _ := newEnvServer(t, db)
		s.must(201, "POST", "/api/environments", map[string]any{"key": "staging", "name": "Staging"})
		s.must(201, "POST", "/api/features", map[string]any{"key": "f", "enabled": true,
			"buckets": []map[string]any{{"name": "on", "replicas": 20}, {"name": "off", "replicas": 20}}})
		s.must(200, "PUT", "/api/features/f/buckets/on?env=staging", map[string]any{"replicas": 60})
		body := map[string]any{"from": "staging", "to": "production"}
		stale := s.must(200, "GET", "/api/features/f", nil).header.Get("ETag")
		first := s.must(200, "POST", "/api/features/f/promote", body).json(t)
		if first["unchanged"] == true || first["feature"].(map[string]any)["version"] != 2.0 {
			t.Fatalf("first promotion = %v, want version 2 written", first)
		}
		again := s.must(200, "POST", "/api/features/f/promote", body)
		if j := again.json(t); j["unchanged"] != true || j["feature"].(map[string]any)["version"] != 2.0 || j["report"].(map[string]any)["churn"] != 0.0 {
			t.Fatalf("promotion of an alike feature = %s, want unchanged at version 2, moving no one", again.body)
		}
		if vs := s.must(200, "GET", "/api/features/f/versions", nil).json(t)["versions"].([]any); len(vs) != 2 {
			t.Fatalf("production has %d versions after promoting an alike feature, want 2", len(vs))
		}
		r := s.do("POST", "/api/features/f/promote", body, "If-Match", stale)
		if r.status != 412 {
			t.Fatalf("alike promotion with a stale If-Match = %d %s, want 412", r.status, r.body)
		}
	})
}

// TestEnvironmentRequiresComment: an environment that requires comments
// refuses every change without one, an admin's included, with 422 on the
// field comment; previews need none; other environments are not bound.
func TestEnvironmentRequiresComment(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *store.DB) {
		s, _ := newEnvServer(t, db)
		s.must(201, "POST", "/api/environments", map[string]any{"key": "staging", "name": "Staging"})
		s.must(201, "POST", "/api/features", map[string]any{"key": "f", "enabled": true,
			"buckets": []map[string]any{{"name": "on", "replicas": 20}, {"name": "off", "replicas": 20}}})
		admin := s.must(201, "POST", "/api/tokens", map[string]any{"name": "root", "role": "admin"}).json(t)["token"].(string)
		asAdmin := []string{"Authorization", "Bearer " + admin}
		env := s.must(200, "PATCH", "/api/environments/production", map[string]any{"protected": true, "require_comment": true}, asAdmin...).json(t)
		if env["require_comment"] != true {
			t.Fatalf("PATCH answered %v, want require_comment true", env)
		}
		listed := s.must(200, "GET", "/api/environments", nil, asAdmin...)
		if !strings.Contains(string(listed.body), `"require_comment":true`) {
			t.Fatalf("GET /api/environments = %s, want production requiring comments", listed.body)
		}
		for _, c := range []struct {
			method, path string
			body         map[string]any
		}{
			{"PUT", "/api/features/f/buckets/on", map[string]any{"replicas": 30}},
			{"POST", "/api/features/f/archive", map[string]any{}},
			{"POST", "/api/features/f/rollback", map[string]any{"version": 1}},
			{"PATCH", "/api/features/f", map[string]any{"enabled": false, "comment": "  "}},
		} {
			body := c.body
			r := s.do(c.method, c.path, body, asAdmin...)
			if r.status != 422 || !strings.Contains(string(r.body), `"field":"comment"`) {
				t.Fatalf("%s %s without a comment in production = %d %s, want 422 on comment", c.method, c.path, r.status, r.body)
			}
		}
		s.must(200, "PUT", "/api/features/f/buckets/on", map[string]any{"replicas": 30, "dry_run": true}, asAdmin...)
		s.must(200, "PUT", "/api/features/f/buckets/on?env=staging", map[string]any{"replicas": 30}, asAdmin...)
		r := s.do("POST", "/api/features/f/promote", map[string]any{"from": "staging", "to": "production"}, asAdmin...)
		if r.status != 422 {
			t.Fatalf("a promotion into production without a comment = %d %s, want 422", r.status, r.body)
		}
		s.must(200, "POST", "/api/features/f/promote", map[string]any{"from": "staging", "to": "production", "comment": "tested in staging"}, asAdmin...)
		if v := s.must(200, "GET", "/api/features/f", nil, asAdmin...).json(t)["version"]; v != 2.0 {
			t.Fatalf("production at version %v after the refused changes and one promotion, want 2", v)
		}
	})
}

// TestBatchPromotionPins: a batch promotion pinned to the versions its
// author previewed is refused as a whole, 412 naming the feature, when one
// side moved on; more pins than features is a bad request.
func TestBatchPromotionPins(t *testing.T) {
	forEachStore(t, func(t *testing.T, db *store.DB) {
		s, _ := newEnvServer(t, db)
		s.must(201, "POST", "/api/environments", map[string]any{"key": "staging", "name": "Staging"})
		for _, k := range []string{"a", "b"} {
			s.must(201, "POST", "/api/features", map[string]any{"key": k, "enabled": true,
				"buckets": []map[string]any{{"name": "on", "replicas": 20}, {"name": "off", "replicas": 20}}})
			s.must(200, "PUT", "/api/features/"+k+"/buckets/on?env=staging", map[string]any{"replicas": 60})
		}
		pins := map[string]any{"a": map[string]any{"from": 2, "to": 1}, "b": map[string]any{"from": 2, "to": 1}}
		body := map[string]any{"from": "staging", "to": "production", "features": []string{"a", "b"}, "versions": pins}
		s.must(200, "PUT", "/api/features/b/buckets/off?env=staging", map[string]any{"replicas": 30})
		r := s.do("POST", "/api/environments/promote", body)
		if r.status != 412 || !strings.Contains(string(r.body), `feature \"b\" is at version 3 in staging`) {
			t.Fatalf("a batch whose source moved on = %d %s, want 412 naming b", r.status, r.body)
		}
		if v := s.must(200, "GET", "/api/features/a", nil).json(t)["version"]; v != 1.0 {
			t.Fatalf("a refused batch changed a: version %v", v)
		}
		pins["b"] = map[string]any{"from": 3, "to": 1}
		s.must(200, "POST", "/api/environments/promote", body)
		if v := s.must(200, "GET", "/api/features/b", nil).json(t)["version"]; v != 2.0 {
			t.Fatalf("b in production at version %v after the batch, want 2", v)
		}
		body["features"] = []string{"a"}
		if r := s.do("POST", "/api/environments/promote", body); r.status != 400 {
			t.Fatalf("more pins than features = %d %s, want 400", r.status, r.body)
		}
	})
}
