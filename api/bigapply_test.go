package api_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout/document"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store/storetest"
)

// biggestDocument returns the largest document the limits take, as an
// apply body: document.MaxFeatures features, each with two buckets
// (of replicas: no plan to search)
// and as many overrides as keep the body within document.MaxBytes.
// With short, it has a tenth of the features and of the bytes.
func biggestDocument(t *testing.T, short bool) ([]byte, int) {
	t.Helper()
	features, size := document.MaxFeatures, document.MaxBytes
	if short {
		features, size = features/10, size/10
	}
	build := func(overrides int) []byte {
		fs := make([]document.Feature, features)
		for i := range fs {
			fifty := 50
			o := make(map[string]string, overrides)
			for j := range overrides {
				o[fmt.Sprintf("user-%05d", j)] = "on"
			}
			fs[i] = document.Feature{
				Key:       fmt.Sprintf("feature-%04d", i),
				Buckets:   []document.Bucket{{Name: "on", Replicas: &fifty}, {Name: "off", Replicas: &fifty}},
				Overrides: o,
			}
		}
		data, err := json.Marshal(map[string]any{"document": document.Document{Features: fs, Segments: []document.Segment{}}})
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	// Each override is `"user-00000":"on",`: 18 bytes.
	overrides := min(feature.MaxOverrides, (size/features-200)/18)
	for {
		data := build(overrides)
		if len(data) <= size {
			return data, overrides
		}
		overrides -= 5
	}
}

// TestBiggestApply: the biggest document the limits take applies, on
// SQLite and PostgreSQL (within the store's deadline, which grows with the
// batch: it took 15 to 20 s on a busy machine, beyond the 5 s of one
// change), and then plans as unchanged. With -short, or under the race
// detector (which made the apply take 54 s on a busy machine: the deadline
// is for the database's work, not for instrumented Go), a tenth of it;
// .ci/run runs the whole size apart, without the race detector.
func TestBiggestApply(t *testing.T) {
	data, overrides := biggestDocument(t, testing.Short() || api.RaceEnabled)
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			var s *testServer
			if db == "sqlite" {
				s = newServer(t, "", api.Options{})
			} else {
				s = newPostgresServer(t, storetest.PostgresDSN(t), 0)
			}
			start := time.Now()
			r := s.do("POST", "/api/apply", string(data))
			t.Logf("%s: applied %d bytes (%d overrides per feature) in %v: %d", db, len(data), overrides, time.Since(start), r.status)
			if r.status != http.StatusOK {
				t.Fatalf("POST /api/apply = %d %.500s, want 200", r.status, r.body)
			}
			var applied struct {
				Document json.RawMessage `json:"document"`
			}
			json.Unmarshal(data, &applied)
			start = time.Now()
			r = s.do("POST", "/api/plan", string(applied.Document))
			t.Logf("%s: planned it again in %v", db, time.Since(start))
			if r.status != http.StatusOK {
				t.Fatalf("POST /api/plan = %d %.500s, want 200", r.status, r.body)
			}
			var p document.Plan
			if err := json.NewDecoder(bytes.NewReader(r.body)).Decode(&p); err != nil {
				t.Fatal(err)
			}
			if p.Changed != 0 {
				t.Errorf("plan after the apply changes %d features, want none", p.Changed)
			}
		})
	}
}
