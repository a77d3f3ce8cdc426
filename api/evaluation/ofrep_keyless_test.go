package evaluation_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/api/internal/apitest"
	"github.com/rollout/rollout/rollout/feature"
)

// TestOFREPWithoutTargetingKey: a single evaluation without a targeting key
// answers for a feature that cannot need one (switched off; one bucket with
// all the ring, no overrides), with the same answer a user gets; any other
// feature, and a bulk request, is still TARGETING_KEY_MISSING.
func TestOFREPWithoutTargetingKey(t *testing.T) {
	s := apitest.New(t, "", api.Options{})
	s.Seed()
	raw := func(v string) json.RawMessage { return json.RawMessage(v) }
	s.Create(feature.Feature{Key: "one", Enabled: true, Salt: "one",
		Buckets: []feature.Bucket{{Name: "on", Replicas: 100, Value: raw("true")}, {Name: "off", Value: raw("false")}}})
	s.Create(feature.Feature{Key: "one-vip", Enabled: true, Salt: "one-vip",
		Buckets:   []feature.Bucket{{Name: "on", Replicas: 100, Value: raw("true")}, {Name: "off", Value: raw("false")}},
		Overrides: map[string]string{"vip": "off"}})
	s.Create(feature.Feature{Key: "targeted", Enabled: true, Salt: "targeted",
		Buckets: []feature.Bucket{{Name: "zero", Replicas: 100, Value: raw("0")}, {Name: "non-zero", Value: raw("1")}},
		Rules: []feature.Rule{{Name: "ballmer", Conditions: []feature.Condition{{Attribute: "email", Op: feature.OpEq, Value: raw(`"ballmer@macrosoft.com"`)}},
			Serve: feature.Serve{Bucket: "non-zero"}}}})
	s.Create(feature.Feature{Key: "by-org", Enabled: true, Salt: "by-org", BucketBy: "org",
		Buckets: []feature.Bucket{{Name: "a", Replicas: 100, Value: raw(`"a"`)}, {Name: "b", Replicas: 100, Value: raw(`"b"`)}}})
	// A tenant's bucket needs no user ID; without the attribute, DEFAULT
	// (no fallback: no value).
	org := s.Do("POST", "/ofrep/v1/evaluate/flags/by-org", `{"context":{"org":"acme"}}`)
	withUser := s.Do("POST", "/ofrep/v1/evaluate/flags/by-org", `{"context":{"targetingKey":"someone","org":"acme"}}`)
	if org.Status != 200 || string(org.Body) != string(withUser.Body) || !strings.Contains(string(org.Body), `"reason":"SPLIT"`) {
		t.Errorf("by-org for org acme without a key = %d %s; with a key %d %s", org.Status, org.Body, withUser.Status, withUser.Body)
	}
	if r := s.Do("POST", "/ofrep/v1/evaluate/flags/by-org", `{"context":{}}`); r.Status != 200 || !strings.Contains(string(r.Body), `"reason":"DEFAULT"`) {
		t.Errorf("by-org without org or key = %d %s, want 200 DEFAULT", r.Status, r.Body)
	}
	// Rules read the context without a targeting key.
	for body, want := range map[string]string{
		`{"context":{"email":"ballmer@macrosoft.com"}}`: `"value":1,"variant":"non-zero","reason":"TARGETING_MATCH"`,
		`{"context":{"email":"ballmer@none.com"}}`:      `"value":0,"variant":"zero"`,
		`{"context":{}}`: `"value":0,"variant":"zero"`,
	} {
		r := s.Do("POST", "/ofrep/v1/evaluate/flags/targeted", body)
		if r.Status != 200 || !strings.Contains(string(r.Body), want) {
			t.Errorf("targeted with %s = %d %s, want 200 with %s", body, r.Status, r.Body, want)
		}
	}
	// Bodies an existing flag refuses (no key; a context that is not an
	// object; not JSON) name no flag that exists: still not found.
	for _, body := range []string{`{"context":[]}`, `{"context":{"targetingKey":5}}`, `not json`} {
		if r := s.Do("POST", "/ofrep/v1/evaluate/flags/nope", body); r.Status != 404 || r.JSON(t)["errorCode"] != "FLAG_NOT_FOUND" {
			t.Errorf("nope with %s = %d %s, want 404 FLAG_NOT_FOUND", body, r.Status, r.Body)
		}
	}
	for _, body := range []string{`{"context":{}}`, `{"context":{"plan":"pro"}}`, `{}`, ``, `{"context":{"targetingKey":""}}`} {
		for key, want := range map[string]string{
			"one":    `{"key":"one","value":true,"variant":"on","reason":"STATIC","metadata":{"version":1}}`,
			"killed": `{"key":"killed","reason":"DISABLED","metadata":{"version":1}}`,
			"paused": `{"key":"paused","value":"old-flow","variant":"old","reason":"DISABLED","metadata":{"version":1}}`,
		} {
			r := s.Do("POST", "/ofrep/v1/evaluate/flags/"+key, body)
			if r.Status != 200 || string(r.Body) != want+"\n" && string(r.Body) != want {
				t.Errorf("%s with %s = %d %s, want 200 %s", key, body, r.Status, r.Body, want)
			}
		}
		for _, key := range []string{"checkout", "one-vip", "dark-mode"} {
			r := s.Do("POST", "/ofrep/v1/evaluate/flags/"+key, body)
			if r.Status != 400 || r.JSON(t)["errorCode"] != "TARGETING_KEY_MISSING" {
				t.Errorf("%s with %s = %d %s, want 400 TARGETING_KEY_MISSING", key, body, r.Status, r.Body)
			}
		}
		// A flag that does not exist is not found, whatever the context.
		if r := s.Do("POST", "/ofrep/v1/evaluate/flags/nope", body); r.Status != 404 || r.JSON(t)["errorCode"] != "FLAG_NOT_FOUND" || r.JSON(t)["key"] != "nope" {
			t.Errorf("nope with %s = %d %s, want 404 FLAG_NOT_FOUND", body, r.Status, r.Body)
		}
		if r := s.Do("POST", "/ofrep/v1/evaluate/flags", body); r.Status != 400 || r.JSON(t)["errorCode"] != "TARGETING_KEY_MISSING" {
			t.Errorf("bulk with %s = %d %s, want 400 TARGETING_KEY_MISSING", body, r.Status, r.Body)
		}
	}
}
