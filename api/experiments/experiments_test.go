package experiments_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/api/experiments"
	"github.com/rollout/rollout/api/internal/apitest"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/experiment"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store/sqlite"
)

// newExperimentServer is the API with experiments over a new SQLite store,
// with the feature "checkout" (control and treatment) and the metric
// "purchase".
func newExperimentServer(t *testing.T, opts api.Options) (*apitest.Server, *experiment.Experiments) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	svc, err := rollout.NewService(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	exps := experiment.NewEnvironmentExperiments(func(env string) experiment.ExperimentStore { return db.In(env) })
	exp := exps.Of(svc)
	if err := exp.Refresh(ctx); err != nil {
		t.Fatal(err)
	}
	opts.Experiments = exps
	srv := httptest.NewServer(api.New(svc, opts))
	t.Cleanup(func() { srv.Close(); db.Close() })
	s := &apitest.Server{T: t, URL: srv.URL, Svc: svc, DB: db}
	s.Create(feature.Feature{Key: "checkout", Enabled: true, Buckets: []feature.Bucket{{Name: "control", Replicas: 50}, {Name: "treatment", Replicas: 50}}})
	s.Must(http.StatusCreated, "POST", "/api/metrics", map[string]any{"key": "purchase", "kind": "conversion", "description": "bought"})
	return s, exp
}

// TestExperimentRoutes walks the contract's routes: their statuses and
// the shapes of their answers.
func TestExperimentRoutes(t *testing.T) {
	s, _ := newExperimentServer(t, api.Options{})
	m := s.Must(http.StatusOK, "GET", "/api/metrics/purchase", nil).JSON(t)["metric"].(map[string]any)
	if m["kind"] != "conversion" || m["higher_is_better"] != true || m["description"] != "bought" {
		t.Errorf("GET /api/metrics/purchase = %v", m)
	}
	s.Must(http.StatusConflict, "POST", "/api/metrics", map[string]any{"key": "purchase", "kind": "conversion"})
	s.Must(http.StatusUnprocessableEntity, "POST", "/api/metrics", map[string]any{"key": "bad", "kind": "median"})
	s.Must(http.StatusCreated, "POST", "/api/metrics", map[string]any{"key": "basket", "kind": "mean", "higher_is_better": false})
	list := s.Must(http.StatusOK, "GET", "/api/metrics", nil).JSON(t)["metrics"].([]any)
	if len(list) != 2 {
		t.Errorf("GET /api/metrics = %d metrics, want 2", len(list))
	}
	s.Must(http.StatusNotFound, "GET", "/api/metrics/nope", nil)

	s.Must(http.StatusUnprocessableEntity, "POST", "/api/features/checkout/experiments", map[string]any{"name": "x", "control": "nope", "metrics": []string{"purchase"}})
	s.Must(http.StatusNotFound, "POST", "/api/features/nope/experiments", map[string]any{"name": "x", "control": "control", "metrics": []string{"purchase"}})
	x := s.Must(http.StatusCreated, "POST", "/api/features/checkout/experiments", map[string]any{"name": "green", "control": "control", "metrics": []string{"purchase", "basket"}, "hypothesis": "more sales"}).JSON(t)["experiment"].(map[string]any)
	id := x["id"].(string)
	if x["status"] != "running" || x["feature"] != "checkout" || x["version"] != float64(1) {
		t.Errorf("POST …/experiments = %v", x)
	}
	s.Must(http.StatusConflict, "POST", "/api/features/checkout/experiments", map[string]any{"name": "again", "control": "control", "metrics": []string{"purchase"}})
	s.Must(http.StatusConflict, "DELETE", "/api/metrics/purchase", nil)

	for i := range 300 {
		user := fmt.Sprintf("u%d", i)
		s.Evaluate("checkout", user)
		if i%3 == 0 {
			s.Must(http.StatusOK, "POST", "/api/track", map[string]any{"batch": fmt.Sprintf("route-batch-%d", i), "events": []any{map[string]any{"metric": "purchase", "user": user}}})
		}
	}
	r := s.Must(http.StatusOK, "GET", "/api/features/checkout/experiments/"+id+"/results", nil).JSON(t)
	for _, k := range []string{"buckets", "srm", "multiple_exposures", "method", "updated_at"} {
		if _, ok := r[k]; !ok {
			t.Errorf("results lack %q: %v", k, r)
		}
	}
	users, converted := 0.0, 0.0
	for _, b := range r["buckets"].([]any) {
		b := b.(map[string]any)
		users += b["users"].(float64)
		p := b["metrics"].(map[string]any)["purchase"].(map[string]any)
		converted += p["users_converted"].(float64)
		for _, k := range []string{"users_converted", "rate", "mean", "ci", "lift", "significant"} {
			if _, ok := p[k]; !ok {
				t.Errorf("bucket %v's purchase lacks %q", b["bucket"], k)
			}
		}
	}
	if users != 300 || converted != 100 {
		t.Errorf("results = %g users, %g converted; want 300, 100", users, converted)
	}

	got := s.Must(http.StatusOK, "GET", "/api/features/checkout/experiments/"+id, nil).JSON(t)["experiment"].(map[string]any)
	if got["name"] != "green" {
		t.Errorf("GET …/experiments/ID = %v", got)
	}
	s.Must(http.StatusNotFound, "GET", "/api/features/checkout/experiments/nope", nil)
	stopped := s.Must(http.StatusOK, "POST", "/api/features/checkout/experiments/"+id+"/stop", nil).JSON(t)["experiment"].(map[string]any)
	if stopped["status"] != "stopped" || stopped["stopped_at"] == nil {
		t.Errorf("POST …/stop = %v", stopped)
	}
	s.Must(http.StatusConflict, "POST", "/api/features/checkout/experiments/"+id+"/stop", nil)
	xs := s.Must(http.StatusOK, "GET", "/api/features/checkout/experiments", nil).JSON(t)["experiments"].([]any)
	if len(xs) != 1 {
		t.Errorf("GET …/experiments = %d, want 1", len(xs))
	}
	s.Must(http.StatusNoContent, "DELETE", "/api/metrics/basket", nil)
	s.Must(http.StatusNotFound, "DELETE", "/api/metrics/basket", nil)
}

// TestTrackAbuse sends forged and flooding batches of events: each is
// refused with a 4xx and stores nothing.
func TestTrackAbuse(t *testing.T) {
	s, _ := newExperimentServer(t, api.Options{ExposureBatchRate: 0.001, ExposureBatchBurst: 40})
	x := s.Must(http.StatusCreated, "POST", "/api/features/checkout/experiments", map[string]any{"name": "abuse", "control": "control", "metrics": []string{"purchase"}}).JSON(t)["experiment"].(map[string]any)
	s.Evaluate("checkout", "victim")
	now := time.Now().UTC()
	ev := func(fields map[string]any) map[string]any {
		e := map[string]any{"metric": "purchase", "user": "victim"}
		for k, v := range fields {
			e[k] = v
		}
		return map[string]any{"batch": "abuse-batch-1", "events": []any{e}}
	}
	many := make([]any, experiment.MaxTrackBatch+1)
	for i := range many {
		many[i] = map[string]any{"metric": "purchase", "user": fmt.Sprintf("forged-%d", i)}
	}
	for _, c := range []struct {
		name string
		body any
		want int
	}{
		{"unknown metric", ev(map[string]any{"metric": "nope"}), http.StatusUnprocessableEntity},
		{"far past", ev(map[string]any{"at": now.Add(-8 * 24 * time.Hour)}), http.StatusUnprocessableEntity},
		{"future", ev(map[string]any{"at": now.Add(time.Hour)}), http.StatusUnprocessableEntity},
		{"huge value", ev(map[string]any{"value": 1e300}), http.StatusUnprocessableEntity},
		{"NaN", `{"batch":"abuse-batch-1","events":[{"metric":"purchase","user":"victim","value":NaN}]}`, http.StatusBadRequest},
		{"empty user", ev(map[string]any{"user": ""}), http.StatusUnprocessableEntity},
		{"long user", ev(map[string]any{"user": strings.Repeat("u", experiment.MaxTrackUser+1)}), http.StatusUnprocessableEntity},
		{"bad batch ID", map[string]any{"batch": "x", "events": []any{map[string]any{"metric": "purchase", "user": "victim"}}}, http.StatusUnprocessableEntity},
		{"too many events", map[string]any{"batch": "abuse-batch-2", "events": many}, http.StatusUnprocessableEntity},
		{"body too large", map[string]any{"batch": "abuse-batch-3", "events": []any{map[string]any{"metric": "purchase", "user": strings.Repeat("u", experiments.MaxTrackBodyBytes)}}}, http.StatusRequestEntityTooLarge},
		{"unknown field", ev(map[string]any{"admin": true}), http.StatusBadRequest},
	} {
		if r := s.Do("POST", "/api/track", c.body); r.Status != c.want {
			t.Errorf("%s: POST /api/track = %d %s, want %d", c.name, r.Status, r.Body, c.want)
		}
	}
	results := func() float64 {
		r := s.Must(http.StatusOK, "GET", "/api/features/checkout/experiments/"+x["id"].(string)+"/results", nil).JSON(t)
		n := 0.0
		for _, b := range r["buckets"].([]any) {
			n += b.(map[string]any)["metrics"].(map[string]any)["purchase"].(map[string]any)["users_converted"].(float64)
		}
		return n
	}
	if n := results(); n != 0 {
		t.Errorf("after refused batches, %g users converted, want 0", n)
	}
	// A flood: past the burst, batches are answered 429 with Retry-After,
	// and not stored.
	limited := 0
	for i := range 60 {
		r := s.Do("POST", "/api/track", map[string]any{"batch": fmt.Sprintf("flood-batch-%d", i), "events": []any{map[string]any{"metric": "purchase", "user": fmt.Sprintf("f%d", i)}}})
		switch {
		case r.Status == http.StatusTooManyRequests && r.Header.Get("Retry-After") != "":
			limited++
		case r.Status != http.StatusOK:
			t.Fatalf("flood batch %d = %d %s", i, r.Status, r.Body)
		}
	}
	if limited < 60-40 {
		t.Errorf("%d of 60 batches past a burst of 40 answered 429, want at least 20", limited)
	}
}

// TestExperimentResultsMillionUsers reads the results of an experiment
// with 1,000,000 exposed users and 100,000 conversions: the answer is
// right, and its time and memory are reported.
func TestExperimentResultsMillionUsers(t *testing.T) {
	if os.Getenv("ROLLOUT_BIG_TESTS") == "" {
		t.Skip("stores a million users (minutes): set ROLLOUT_BIG_TESTS=1 to run it")
	}
	s, _ := newExperimentServer(t, api.Options{})
	x := s.Must(http.StatusCreated, "POST", "/api/features/checkout/experiments", map[string]any{"name": "big", "control": "control", "metrics": []string{"purchase"}}).JSON(t)["experiment"].(map[string]any)
	id := x["id"].(string)
	ctx := context.Background()
	const users = 1_000_000
	at := time.Now().UTC() // after the start: earlier exposures and events do not count
	xs := make([]experiment.FirstExposure, 0, 1_000)
	var events []experiment.TrackedEvent
	for i := range users {
		b := "control"
		if i%2 == 1 {
			b = "treatment"
		}
		h := experiment.UserHash(fmt.Sprintf("user-%d", i))
		xs = append(xs, experiment.FirstExposure{Experiment: id, UserHash: h, Bucket: b, Version: 1, At: at})
		if i%10 == 0 {
			events = append(events, experiment.TrackedEvent{Metric: "purchase", UserHash: h, Value: 1, At: at})
		}
		if len(xs) == cap(xs) {
			if err := s.DB.AddFirstExposures(ctx, xs); err != nil {
				t.Fatal(err)
			}
			xs = xs[:0]
		}
	}
	for i := 0; i < len(events); i += experiment.MaxTrackBatch {
		if _, err := s.DB.AddTrackBatch(ctx, fmt.Sprintf("million-%06d", i), time.Now(), events[i:min(i+experiment.MaxTrackBatch, len(events))]); err != nil {
			t.Fatal(err)
		}
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	r := s.Must(http.StatusOK, "GET", "/api/features/checkout/experiments/"+id+"/results", nil)
	took := time.Since(start)
	runtime.ReadMemStats(&after)
	var res experiment.ExperimentResults
	if err := json.Unmarshal(r.Body, &res); err != nil {
		t.Fatal(err)
	}
	total, converted := int64(0), int64(0)
	for _, b := range res.Buckets {
		total += b.Users
		converted += b.Metrics["purchase"].UsersConverted
	}
	t.Logf("results of %d users, %d converted: read in %v, %d MB allocated", total, converted, took.Round(time.Millisecond), (after.TotalAlloc-before.TotalAlloc)>>20)
	if total != users || converted != users/10 {
		t.Errorf("results = %d users, %d converted; want %d, %d", total, converted, users, users/10)
	}
	if after.TotalAlloc-before.TotalAlloc > 64<<20 {
		t.Errorf("reading results allocated %d MB, want a bound that does not grow with users (under 64 MB)", (after.TotalAlloc-before.TotalAlloc)>>20)
	}
}
