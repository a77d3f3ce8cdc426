package feature

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// FuzzFeature decodes a feature configuration as the store would hand it
// back, validates it, and evaluates users on the valid ones: validation
// never panics, and a valid feature always compiles and evaluates to one of
// its own buckets, its fallback or nothing.
func FuzzFeature(f *testing.F) {
	f.Add(`{"key":"f","enabled":true,"buckets":[{"name":"A","replicas":3},{"name":"B","replicas":3}]}`, "user1")
	f.Add(`{"key":"f","enabled":false,"fallback":"A","buckets":[{"name":"A","replicas":1}]}`, "")
	f.Add(`{"key":"f","enabled":true,"salt":"s","buckets":[{"name":"A","replicas":1000}],"overrides":{"u":"A"}}`, "u")
	f.Add(`{"key":"f","enabled":true,"buckets":[{"name":"A#1","replicas":3}]}`, "x")
	f.Add(`{"key":"f","enabled":true,"buckets":[{"name":"A","replicas":-1}]}`, "\xff")
	f.Add(`{"key":"f","enabled":true,"buckets":[{"name":"A","replicas":3,"value":{"a":[1,2]}}]}`, "ünï")
	f.Fuzz(func(t *testing.T, config, user string) {
		var feat Feature
		if json.Unmarshal([]byte(config), &feat) != nil {
			return
		}
		if feat.Validate() != nil {
			return
		}
		c := compile(feat)
		e := c.evaluate(user)
		if e.Bucket == "" {
			if feat.Enabled || feat.Fallback != "" {
				t.Fatalf("%s: evaluate(%q) served no bucket", config, user)
			}
			return
		}
		b, ok := feat.Bucket(e.Bucket)
		if !ok {
			t.Fatalf("%s: evaluate(%q) = %q, not a bucket of the feature", config, user, e.Bucket)
		}
		if string(e.Value) != string(b.ServedValue()) {
			t.Fatalf("evaluate(%q) value = %s, want %s", user, e.Value, b.ServedValue())
		}
		if !json.Valid(e.Value) {
			t.Fatalf("evaluate(%q) value %q is not JSON", user, e.Value)
		}
	})
}

// FuzzUser checks the user ID rule: valid exactly when 1..256 bytes of
// UTF-8, and evaluation of any valid ID works.
func FuzzUser(f *testing.F) {
	for _, s := range []string{"u", "", "\xff", "ünïcødé-ユーザー", string(make([]byte, 257))} {
		f.Add(s)
	}
	feat := Feature{Key: "f", Enabled: true, Salt: "f", Buckets: []Bucket{{Name: "A", Replicas: 5}, {Name: "B", Replicas: 5}}}
	c := compile(feat)
	f.Fuzz(func(t *testing.T, user string) {
		err := ValidateUser(user)
		want := len(user) >= 1 && len(user) <= MaxUserBytes && utf8.ValidString(user)
		if (err == nil) != want {
			t.Fatalf("ValidateUser(%q) = %v, want valid %v", user, err, want)
		}
		if err == nil {
			if e := c.evaluate(user); e.Bucket != "A" && e.Bucket != "B" {
				t.Fatalf("evaluate(%q) = %q", user, e.Bucket)
			}
		}
	})
}
