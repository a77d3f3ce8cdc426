package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	exposures "github.com/rollout/rollout/rollout/exposure"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store/sqlite"
)

// exposure is one count of a POST /api/exposures body.
func exposure(key, id string, version int, bucket string, count int64) map[string]any {
	return map[string]any{"feature": key, "feature_id": id, "version": version, "bucket": bucket, "count": count}
}

// withSketch returns count with the users' sketch of the binary form b.
func withSketch(count map[string]any, b []byte) map[string]any {
	out := maps.Clone(count)
	out["users_sketch"] = b // base64 in JSON
	return out
}

func exposureBatch(id string, counts ...map[string]any) map[string]any {
	if counts == nil {
		counts = []map[string]any{}
	}
	return map[string]any{"batch": id, "exposures": counts}
}

// exposureTotal returns the feature's exposures at its current version, as
// the API reports them.
func (s *testServer) exposureTotal(key string, header ...string) exposures.Report {
	s.t.Helper()
	return decodeAs[exposures.Report](s.t.(*testing.T), s.must(http.StatusOK, "GET", "/api/features/"+key+"/exposures", nil, header...))
}

// countsOf lists a report's counts as "version/bucket=count".
func countsOf(rep exposures.Report) string {
	var out []string
	for _, e := range rep.Versions {
		out = append(out, fmt.Sprintf("%d/%s=%d", e.Version, e.Bucket, e.Count))
	}
	return strings.Join(out, " ")
}

// TestExposureRefusals: a batch with a count the server cannot take —
// forged, out of range, of a bucket or version the feature never had — is
// refused whole with 422 naming the count's index, nothing is stored, and
// its batch ID stays free for a good batch.
func TestExposureRefusals(t *testing.T) {
	s := newServer(t, "", api.Options{})
	s.seed()
	// limit at version 2 gains bucket "mid", which version 1 did not have.
	s.must(http.StatusOK, "POST", "/api/features/limit/buckets", map[string]any{"name": "mid", "replicas": 10})
	f, _ := s.svc.Snapshot().Feature("limit")
	if f.Version != 2 {
		t.Fatalf("limit is at version %d, want 2", f.Version)
	}
	good := exposure("limit", f.ID, 2, "mid", 1)
	over := make([]map[string]any, feature.MaxExposureBatch+1)
	for i := range over {
		over[i] = good
	}
	tests := []struct {
		name    string
		body    any
		message string
	}{
		{"count of 2^63-1", exposureBatch("batch-bad-1", good, exposure("limit", f.ID, 2, "low", math.MaxInt64)), "exposure 1: count must be from 1 to 1000000000"},
		{"negative count", exposureBatch("batch-bad-1", exposure("limit", f.ID, 2, "low", -5)), "exposure 0: count"},
		{"count over the bound", exposureBatch("batch-bad-1", exposure("limit", f.ID, 2, "low", feature.MaxExposureCount+1)), "exposure 0: count"},
		{"unknown bucket", exposureBatch("batch-bad-1", good, good, exposure("limit", f.ID, 2, "huge", 1)), `exposure 2: feature "limit" had no bucket "huge" at version 2`},
		{"bucket of a later version", exposureBatch("batch-bad-1", exposure("limit", f.ID, 1, "mid", 1)), `exposure 0: feature "limit" had no bucket "mid" at version 1`},
		{"future version", exposureBatch("batch-bad-1", exposure("limit", f.ID, 3, "low", 1)), `exposure 0: feature "limit" is at version 2: version 3 does not exist`},
		{"version 2^32+1", exposureBatch("batch-bad-1", exposure("limit", f.ID, 1<<32+1, "low", 1)), "exposure 0: version must be from 1"},
		{"version 0", exposureBatch("batch-bad-1", exposure("limit", f.ID, 0, "low", 1)), "exposure 0: version must be from 1"},
		{"key of another feature", exposureBatch("batch-bad-1", exposure("banner", f.ID, 1, "low", 1)), `exposure 0: feature_id "` + f.ID + `" is the ID of feature "limit", not "banner"`},
		{"empty batch", exposureBatch("batch-bad-1"), "the batch holds no counts"},
		{"too many counts", exposureBatch("batch-bad-1", over...), "at most 1000 counts, got 1001"},
		{"malformed users sketch", exposureBatch("batch-bad-1", good, withSketch(exposure("limit", f.ID, 2, "low", 1), []byte{1, 12, 'd', 7})), "exposure 1: users_sketch: not a distinct-users sketch"},
		{"sketch of another precision", exposureBatch("batch-bad-1", withSketch(good, []byte{1, 14, 's'})), "exposure 0: users_sketch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := s.do("POST", "/api/exposures", tt.body)
			var e struct {
				Error struct{ Code, Message string }
			}
			json.Unmarshal(r.body, &e)
			if r.status != http.StatusUnprocessableEntity || e.Error.Code != "invalid" || !strings.Contains(e.Error.Message, tt.message) {
				t.Errorf("POST /api/exposures = %d %s, want 422 invalid %q", r.status, r.body, tt.message)
			}
		})
	}
	if rep := s.exposureTotal("limit"); len(rep.Versions) != 0 {
		t.Errorf("exposures of limit after refused batches = %+v, want none", rep.Versions)
	}
	// Nothing of the refused batches was kept, their ID included.
	r := s.must(http.StatusOK, "POST", "/api/exposures", exposureBatch("batch-bad-1", good, exposure("limit", f.ID, 1, "low", 4), exposure("", f.ID, 1, "", 2)))
	if got, want := string(r.body), `{"batch":"batch-bad-1","added":true,"counted":3,"skipped":[]}`+"\n"; got != want {
		t.Errorf("POST /api/exposures (good) = %s, want %s", got, want)
	}
	if got, want := countsOf(s.exposureTotal("limit")), "2/mid=1 1/=2 1/low=4"; got != want {
		t.Errorf("exposures of limit = %s, want %s", got, want)
	}
}

// TestExposuresOfDeletedFeatures: an app's counts of a feature deleted
// since its copy was made are skipped and listed, not refused: the rest of
// the batch counts, and a batch of nothing else is answered 200 (the
// client does not send it again).
func TestExposuresOfDeletedFeatures(t *testing.T) {
	s := newServer(t, "", api.Options{})
	s.seed()
	gone, _ := s.svc.Snapshot().Feature("banner")
	limit, _ := s.svc.Snapshot().Feature("limit")
	s.must(http.StatusNoContent, "DELETE", "/api/features/banner", nil)

	r := s.must(http.StatusOK, "POST", "/api/exposures", exposureBatch("batch-del-1",
		exposure("banner", gone.ID, 1, "blue", 5), exposure("limit", limit.ID, 1, "high", 3), exposure("", "no-such-id", 1, "", 1)))
	var ans struct {
		Added   bool
		Counted int
		Skipped []exposures.Skipped
	}
	if err := json.Unmarshal(r.body, &ans); err != nil {
		t.Fatal(err)
	}
	if !ans.Added || ans.Counted != 1 || len(ans.Skipped) != 2 || ans.Skipped[0].Index != 0 || ans.Skipped[0].FeatureID != gone.ID || ans.Skipped[1].Index != 2 {
		t.Errorf("POST /api/exposures = %s, want added, 1 counted, counts 0 and 2 skipped", r.body)
	}
	if rep := s.exposureTotal("limit"); rep.Total != 3 {
		t.Errorf("exposures of limit = %d, want 3", rep.Total)
	}
	r = s.must(http.StatusOK, "POST", "/api/exposures", exposureBatch("batch-del-2", exposure("banner", gone.ID, 1, "blue", 5)))
	if got := string(r.body); !strings.Contains(got, `"added":false,"counted":0`) || !strings.Contains(got, `"index":0`) {
		t.Errorf("POST /api/exposures (deleted only) = %s, want nothing added, count 0 skipped", got)
	}
}

// TestExposuresOfOldVersions: a bucket of an old version is checked against
// the feature's history, also on an instance that never served that
// version (a second server over the same database).
func TestExposuresOfOldVersions(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "rollout.db")
	a := newServer(t, dbPath, api.Options{})
	a.seed()
	a.must(http.StatusOK, "DELETE", "/api/features/limit/buckets/high", nil)
	f, _ := a.svc.Snapshot().Feature("limit")
	b := newServer(t, dbPath, api.Options{}) // started after the change
	b.must(http.StatusOK, "POST", "/api/exposures", exposureBatch("batch-old-1", exposure("limit", f.ID, 1, "high", 2), exposure("limit", f.ID, 2, "low", 1)))
	r := b.do("POST", "/api/exposures", exposureBatch("batch-old-2", exposure("limit", f.ID, 2, "high", 2)))
	if r.status != http.StatusUnprocessableEntity {
		t.Errorf("POST /api/exposures (bucket removed at version 2) = %d %s, want 422", r.status, r.body)
	}
	if got, want := countsOf(a.exposureTotal("limit")), "2/low=1 1/high=2"; got != want {
		t.Errorf("exposures of limit = %s, want %s", got, want)
	}
}

// TestExposuresFromALaggingInstance: counts of a feature that another
// instance created or changed a moment ago, which this instance's snapshot
// does not hold yet, are counted, not skipped or refused.
func TestExposuresFromALaggingInstance(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "rollout.db")
	a := newServer(t, dbPath, api.Options{})
	b := newServer(t, dbPath, api.Options{}) // follows nothing: it lags until it reads the store
	a.seed()
	a.must(http.StatusOK, "POST", "/api/features/limit/buckets", map[string]any{"name": "mid", "replicas": 10})
	f, _ := a.svc.Snapshot().Feature("limit")
	if _, ok := b.svc.Snapshot().Feature("limit"); ok {
		t.Fatal("test setup: instance b already holds limit")
	}
	r := b.must(http.StatusOK, "POST", "/api/exposures", exposureBatch("batch-lag-1", exposure("limit", f.ID, 2, "mid", 6)))
	if !strings.Contains(string(r.body), `"counted":1`) {
		t.Errorf("POST /api/exposures to the lagging instance = %s, want it counted", r.body)
	}
	if rep := a.exposureTotal("limit"); rep.Total != 6 {
		t.Errorf("exposures of limit = %d, want 6", rep.Total)
	}
}

// TestExposureTotalsSaturate: totals that add up past the largest int64
// (stored in several hours, plus counts in memory) read as the largest
// int64, never negative, in the API and the service.
func TestExposureTotalsSaturate(t *testing.T) {
	s := newServer(t, "", api.Options{})
	s.seed()
	f, _ := s.svc.Snapshot().Feature("limit")
	// This hour's totals, which the flush below adds to, and an earlier
	// hour's.
	h := time.Now()
	if err := s.db.AddExposures(context.Background(), []feature.Exposure{
		{FeatureID: f.ID, Version: 1, Bucket: "low", Hour: h, Count: math.MaxInt64},
		{FeatureID: f.ID, Version: 1, Bucket: "low", Hour: h.Add(-time.Hour), Count: math.MaxInt64},
		{FeatureID: f.ID, Version: 1, Bucket: "high", Hour: h, Count: math.MaxInt64},
	}); err != nil {
		t.Fatal(err)
	}
	s.must(http.StatusOK, "GET", "/evaluate?feature=limit&user=u1", nil) // one more, in memory
	rep := s.exposureTotal("limit")
	if rep.Total != math.MaxInt64 {
		t.Errorf("total = %d, want %d", rep.Total, int64(math.MaxInt64))
	}
	for _, b := range rep.Buckets {
		if b.Count < 0 || b.Observed < 0 {
			t.Errorf("bucket %v: count %d, observed %g; want neither negative", b.Bucket, b.Count, b.Observed)
		}
	}
	if err := s.svc.FlushExposures(context.Background()); err != nil {
		t.Errorf("FlushExposures() onto saturated totals = %v", err)
	}
	if rep := s.exposureTotal("limit"); rep.Total != math.MaxInt64 {
		t.Errorf("total after the flush = %d, want %d", rep.Total, int64(math.MaxInt64))
	}
}

// TestExposureRateLimit: each token sends at most so many batches at once
// (and so many a second); one more is answered 429 with Retry-After and
// stores nothing, while another token is not held back.
func TestExposureRateLimit(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	tokens, err := auth.NewTokens(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	secrets := map[string]string{}
	for _, name := range []string{"app-1", "app-2", "admin"} {
		role := auth.RoleEvaluate
		if name == "admin" {
			role = auth.RoleAdmin
		}
		if _, secrets[name], err = tokens.Create(ctx, name, role, time.Now()); err != nil {
			t.Fatal(err)
		}
	}
	svc, err := rollout.NewService(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	const burst = 3
	srv := httptest.NewServer(api.New(svc, api.Options{Auth: api.NewAuth(tokens, nil), ExposureBatchRate: 0.01, ExposureBatchBurst: burst}))
	t.Cleanup(srv.Close)
	s := &testServer{t: t, URL: srv.URL, svc: svc, db: db}
	admin := []string{"Authorization", "Bearer " + secrets["admin"]}
	s.must(http.StatusCreated, "POST", "/api/features", map[string]any{"key": "f", "buckets": []any{map[string]any{"name": "A", "replicas": 1}}}, admin...)
	f, _ := svc.Snapshot().Feature("f")

	send := func(token string, i int) response {
		return s.do("POST", "/api/exposures", exposureBatch(fmt.Sprintf("batch-rate-%s-%d", token, i), exposure("f", f.ID, 1, "A", 1)),
			"Authorization", "Bearer "+secrets[token])
	}
	for i := range burst {
		if r := send("app-1", i); r.status != http.StatusOK {
			t.Fatalf("batch %d of app-1 = %d %s, want 200", i, r.status, r.body)
		}
	}
	r := send("app-1", burst)
	if r.status != http.StatusTooManyRequests || r.header.Get("Retry-After") != "100" || !strings.Contains(string(r.body), `"code":"too_many_requests"`) {
		t.Errorf("batch %d of app-1 = %d (Retry-After %q) %s, want 429 with Retry-After 100", burst, r.status, r.header.Get("Retry-After"), r.body)
	}
	if r := send("app-2", 0); r.status != http.StatusOK {
		t.Errorf("batch 0 of app-2 = %d %s, want 200: each token has its own limit", r.status, r.body)
	}
	if rep := s.exposureTotal("f", admin...); rep.Total != burst+1 {
		t.Errorf("exposures of f = %d, want %d (the refused batch adds nothing)", rep.Total, burst+1)
	}
}

// TestExposuresCrossOrigin: a browser on another site cannot post counts
// (with the victim's session, or to a server on loopback); programs, which
// send no Sec-Fetch-Site or Origin, can.
func TestExposuresCrossOrigin(t *testing.T) {
	s := newServer(t, "", api.Options{})
	s.seed()
	f, _ := s.svc.Snapshot().Feature("limit")
	for i, header := range [][]string{
		{"Sec-Fetch-Site", "cross-site"},
		{"Sec-Fetch-Site", "same-site"},
		{"Origin", "https://evil.example"},
	} {
		r := s.do("POST", "/api/exposures", exposureBatch(fmt.Sprintf("batch-csrf-%d", i), exposure("limit", f.ID, 1, "low", 1)), header...)
		if r.status != http.StatusForbidden || !strings.Contains(string(r.body), "cross-origin") {
			t.Errorf("POST /api/exposures with %s = %d %s, want 403", header, r.status, r.body)
		}
	}
	if rep := s.exposureTotal("limit"); rep.Total != 0 {
		t.Errorf("exposures of limit after cross-origin posts = %d, want 0", rep.Total)
	}
	s.must(http.StatusOK, "POST", "/api/exposures", exposureBatch("batch-csrf-ok", exposure("limit", f.ID, 1, "low", 1)))
	s.must(http.StatusOK, "POST", "/api/exposures", exposureBatch("batch-csrf-so", exposure("limit", f.ID, 1, "low", 1)), "Sec-Fetch-Site", "same-origin")
}
