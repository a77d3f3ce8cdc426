package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/idempotency"
	"github.com/rollout/rollout/store/sqlite"
)

const keyHeader = "Idempotency-Key"

var newFeatureBody = map[string]any{"key": "k", "buckets": []map[string]any{{"name": "on", "replicas": 10}, {"name": "off", "replicas": 10}}}

// versionCount returns how many versions the feature key has.
func (s *testServer) versionCount(key string) int {
	s.t.Helper()
	vs, err := s.svc.Versions(context.Background(), key, 0, 0)
	if err != nil {
		s.t.Fatalf("Versions(%q) = %v", key, err)
	}
	return len(vs)
}

// wantReplay checks that again is first given again, marked as replayed.
func wantReplay(t *testing.T, what string, first, again response) {
	t.Helper()
	if first.header.Get("Idempotent-Replayed") != "" {
		t.Errorf("%s: the first answer is marked Idempotent-Replayed", what)
	}
	if got := again.header.Get("Idempotent-Replayed"); got != "true" {
		t.Errorf("%s: retry's Idempotent-Replayed = %q, want true", what, got)
	}
	if again.status != first.status || !bytes.Equal(again.body, first.body) {
		t.Errorf("%s: retry answered %d %s, want the first answer %d %s", what, again.status, again.body, first.status, first.body)
	}
	if a, b := first.header.Get("ETag"), again.header.Get("ETag"); a != b {
		t.Errorf("%s: retry's ETag %q, want the first's %q", what, b, a)
	}
	if a, b := first.header.Get("Content-Type"), again.header.Get("Content-Type"); a != b {
		t.Errorf("%s: retry's Content-Type %q, want the first's %q", what, b, a)
	}
}

// TestIdempotencyKey: a change sent again with its Idempotency-Key gets its
// first answer and applies nothing again, for every kind of change; the
// key with another request is refused with 422; a failed request keeps
// nothing; bad keys are refused with 400; read-only routes ignore keys.
func TestIdempotencyKey(t *testing.T) {
	s := newServer(t, "", api.Options{})

	first := s.must(201, "POST", "/api/features", newFeatureBody, keyHeader, "create-1")
	wantReplay(t, "create", first, s.must(201, "POST", "/api/features", newFeatureBody, keyHeader, "create-1"))
	s.must(409, "POST", "/api/features", newFeatureBody) // without the key it is a new request

	changes := []struct {
		method, path string
		body         any
	}{
		{"PATCH", "/api/features/k", map[string]any{"description": "d1"}},
		{"POST", "/api/features/k/buckets", map[string]any{"name": "extra", "replicas": 1}},
		{"PUT", "/api/features/k/buckets/extra", map[string]any{"replicas": 2}},
		{"PUT", "/api/features/k/overrides/alice", map[string]any{"bucket": "on"}},
		{"DELETE", "/api/features/k/overrides/alice", nil},
		{"DELETE", "/api/features/k/buckets/extra", nil},
		{"PUT", "/api/features/k/buckets", map[string]any{"buckets": []map[string]any{{"name": "on", "replicas": 12}, {"name": "off", "replicas": 10}}}},
		{"POST", "/api/features/k/reshuffle", map[string]any{"salt": "new"}},
		{"POST", "/api/features/k/rollback", map[string]any{"version": 1}},
		{"POST", "/api/features/k/ramps", map[string]any{"bucket": "on", "steps": []float64{0.6, 1}, "every": "24h"}},
		{"PATCH", "/api/features/k?dry_run=true", map[string]any{"description": "dry"}},
	}
	for i, ch := range changes {
		key := fmt.Sprintf("change-%d", i)
		before := s.versionCount("k")
		first := s.do(ch.method, ch.path, ch.body, keyHeader, key)
		if first.status >= 300 {
			t.Fatalf("%s %s = %d %s", ch.method, ch.path, first.status, first.body)
		}
		applied := s.versionCount("k") - before
		again := s.do(ch.method, ch.path, ch.body, keyHeader, key)
		wantReplay(t, ch.method+" "+ch.path, first, again)
		if n := s.versionCount("k") - before; n != applied {
			t.Errorf("%s %s sent twice with one key made %d versions, want %d", ch.method, ch.path, n, applied)
		}
	}

	// The ramp's pause, sent twice, answers the first time's twice; without
	// the key the second would be refused (paused already).
	ramps := s.must(200, "GET", "/api/features/k/ramps", nil).json(t)["ramps"].([]any)
	id := ramps[0].(map[string]any)["id"].(string)
	pause := "/api/features/k/ramps/" + id + "/pause"
	first = s.must(200, "POST", pause, nil, keyHeader, "pause-1")
	wantReplay(t, "pause", first, s.must(200, "POST", pause, nil, keyHeader, "pause-1"))
	s.must(409, "POST", pause, nil)
	s.must(200, "POST", "/api/features/k/ramps/"+id+"/cancel", nil)

	// Another request with a used key: 422, and nothing changes.
	before := s.versionCount("k")
	for _, r := range []struct {
		method, path string
		body         any
		header       []string
	}{
		{"PATCH", "/api/features/k", map[string]any{"description": "other"}, nil},
		{"PATCH", "/api/features/k?max_churn=1", map[string]any{"description": "d1"}, nil},
		{"PATCH", "/api/features/k", map[string]any{"description": "d1"}, []string{"If-Match", `"*"`}},
		{"POST", "/api/features/k/reshuffle", map[string]any{"description": "d1"}, nil},
	} {
		res := s.do(r.method, r.path, r.body, append([]string{keyHeader, "change-0"}, r.header...)...)
		if res.status != 422 || res.json(t)["error"].(map[string]any)["code"] != "idempotency_key_reused" {
			t.Errorf("%s %s %v with another request's key = %d %s, want 422 idempotency_key_reused", r.method, r.path, r.header, res.status, res.body)
		}
	}
	if n := s.versionCount("k"); n != before {
		t.Errorf("refused requests made %d versions", n-before)
	}

	// A delete sent twice: 204 both times, not 404 the second.
	s.must(201, "POST", "/api/features", map[string]any{"key": "gone", "buckets": []map[string]any{{"name": "on"}}})
	first = s.must(204, "DELETE", "/api/features/gone", nil, keyHeader, "delete-1")
	wantReplay(t, "delete", first, s.must(204, "DELETE", "/api/features/gone", nil, keyHeader, "delete-1"))

	// A request that fails keeps nothing: sent again with its key, it runs.
	s.must(404, "PATCH", "/api/features/later", map[string]any{"description": "x"}, keyHeader, "later-1")
	s.must(201, "POST", "/api/features", map[string]any{"key": "later", "buckets": []map[string]any{{"name": "on"}}})
	if r := s.must(200, "PATCH", "/api/features/later", map[string]any{"description": "x"}, keyHeader, "later-1"); r.header.Get("Idempotent-Replayed") != "" {
		t.Errorf("the retry of a failed request was replayed: %s", r.body)
	}

	// Keys too long or not printable are refused, and change nothing.
	for _, key := range []string{strings.Repeat("k", idempotency.MaxKey+1), "tab\tkey", "é"} {
		if r := s.do("PATCH", "/api/features/k", map[string]any{"description": "bad key"}, keyHeader, key); r.status != 400 {
			t.Errorf("key %q = %d %s, want 400", key, r.status, r.body)
		}
	}
	s.must(200, "PATCH", "/api/features/k", map[string]any{"description": "longest key"}, keyHeader, strings.Repeat("k", idempotency.MaxKey))
	if n := s.versionCount("k"); n != before+1 {
		t.Errorf("bad keys: %d versions made, want 1 (the longest key's)", n-before)
	}

	// Read-only routes take no key: a preview answers anew each time.
	for range 2 {
		r := s.must(200, "POST", "/api/features/k/preview", map[string]any{"buckets": []map[string]any{{"name": "on", "replicas": 1}}}, keyHeader, "preview-1")
		if r.header.Get("Idempotent-Replayed") != "" {
			t.Error("a preview was replayed")
		}
	}
}

// TestIdempotencyKeyAnswerSentIsKept: the answer a change sends is the one
// kept with it for its Idempotency-Key, byte for byte: a retry gets the
// very status, body and ETag the first request was sent, for every kind of
// change that keeps its answer in its own transaction — also where the
// answer sent could be encoded otherwise than a kept one (?pretty, which
// indents the JSON echo encodes).
func TestIdempotencyKeyAnswerSentIsKept(t *testing.T) {
	s := newServer(t, "", api.Options{})
	staff := []map[string]any{{"attribute": "email", "op": "ends_with", "value": "@example.com"}}
	doc := map[string]any{"features": []map[string]any{{"key": "doc", "buckets": []map[string]any{{"name": "on", "replicas": 1}}}}}
	for i, r := range []struct {
		status       int
		method, path string
		body         any
	}{
		{201, "POST", "/api/features?pretty", newFeatureBody},
		{200, "PATCH", "/api/features/k?pretty", map[string]any{"description": "sent once"}},
		{200, "PUT", "/api/features/k/overrides/alice?pretty", map[string]any{"bucket": "on"}},
		{201, "POST", "/api/segments?pretty", map[string]any{"key": "staff", "conditions": staff}},
		{200, "PUT", "/api/segments/staff?pretty", map[string]any{"description": "ours", "conditions": staff}},
		{200, "POST", "/api/features/k/archive?pretty", nil},
		{200, "POST", "/api/features/k/restore?pretty", nil},
		{201, "POST", "/api/features/k/ramps?pretty", map[string]any{"bucket": "on", "steps": []float64{0.6, 1}, "every": "24h"}},
		{200, "POST", "/api/apply?pretty", map[string]any{"document": doc}},
	} {
		key := fmt.Sprintf("sent-%d", i)
		first := s.must(r.status, r.method, r.path, r.body, keyHeader, key)
		again := s.must(r.status, r.method, r.path, r.body, keyHeader, key)
		wantReplay(t, r.method+" "+r.path, first, again)
	}
}

// gateStore holds every UpdateFeature until release is closed.
type gateStore struct {
	rollout.Store
	entered chan struct{}
	release chan struct{}
}

func (g gateStore) UpdateFeature(ctx context.Context, f feature.Feature, v rollout.Version) error {
	g.entered <- struct{}{}
	<-g.release
	return g.Store.UpdateFeature(ctx, f, v)
}

// TestIdempotencyKeyInFlight: a retry while the first request with the key
// still runs is refused with 409; once the first has answered, a retry
// gets its answer.
func TestIdempotencyKeyInFlight(t *testing.T) {
	gate := gateStore{entered: make(chan struct{}, 1), release: make(chan struct{})}
	s := newServerOver(t, "", api.Options{}, func(st rollout.Store) rollout.Store { gate.Store = st; return gate })
	s.create(feature.Feature{Key: "k", Enabled: true, Buckets: []feature.Bucket{{Name: "on", Replicas: 1}}})
	body := map[string]any{"description": "slow"}
	done := make(chan response, 1)
	go func() { done <- s.do("PATCH", "/api/features/k", body, keyHeader, "slow-1") }()
	<-gate.entered
	r := s.do("PATCH", "/api/features/k", body, keyHeader, "slow-1")
	if r.status != 409 || r.json(t)["error"].(map[string]any)["code"] != "idempotency_key_in_use" {
		t.Errorf("retry while the first runs = %d %s, want 409 idempotency_key_in_use", r.status, r.body)
	}
	close(gate.release)
	first := <-done
	if first.status != 200 {
		t.Fatalf("first request = %d %s", first.status, first.body)
	}
	wantReplay(t, "after the first answered", first, s.must(200, "PATCH", "/api/features/k", body, keyHeader, "slow-1"))
	if n := s.versionCount("k"); n != 2 {
		t.Errorf("%d versions, want 2", n)
	}
}

// loseAnswerStore commits the first UpdateFeature and then reports it
// failed, as when the database's answer to a commit is lost.
type loseAnswerStore struct {
	rollout.Store
	lost *atomic.Bool
}

func (l loseAnswerStore) UpdateFeature(ctx context.Context, f feature.Feature, v rollout.Version) error {
	if err := l.Store.UpdateFeature(ctx, f, v); err != nil {
		return err
	}
	if l.lost.CompareAndSwap(false, true) {
		return fmt.Errorf("update feature: %w", feature.Errorf(feature.EUnavailable, "the connection to the database failed: try again shortly"))
	}
	return nil
}

// TestIdempotencyKeyAnswerLost: a change whose commit landed but whose
// answer was lost (503) is retried with its key: the retry gets the
// change's answer and the change applies once.
func TestIdempotencyKeyAnswerLost(t *testing.T) {
	s := newServerOver(t, "", api.Options{}, func(st rollout.Store) rollout.Store { return loseAnswerStore{st, new(atomic.Bool)} })
	s.create(feature.Feature{Key: "k", Enabled: true, Buckets: []feature.Bucket{{Name: "on", Replicas: 1}}})
	body := map[string]any{"description": "once"}
	s.must(503, "PATCH", "/api/features/k", body, keyHeader, "lost-1")
	r := s.must(200, "PATCH", "/api/features/k", body, keyHeader, "lost-1")
	if r.header.Get("Idempotent-Replayed") != "true" {
		t.Errorf("the retry was not replayed: the change applied again? %s", r.body)
	}
	if v := r.json(t)["feature"].(map[string]any)["version"]; v != 2.0 {
		t.Errorf("the retry's answer shows version %v, want 2: the first change's", v)
	}
	if got := r.header.Get("ETag"); !strings.HasPrefix(got, `"2-`) {
		t.Errorf("the retry's ETag = %q, want version 2's", got)
	}
	if n := s.versionCount("k"); n != 2 {
		t.Errorf("%d versions after the retry, want 2: the change applied once", n)
	}
}

// TestIdempotencyKeyExpiry: a key's answer is kept for 24 hours, then the
// sweep deletes it and the key may be used again.
func TestIdempotencyKeyExpiry(t *testing.T) {
	var now atomic.Int64
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now.Store(start.UnixNano())
	clock := func() time.Time { return time.Unix(0, now.Load()) }
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	svc, err := rollout.NewService(context.Background(), db, clock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(api.New(svc, api.Options{}))
	t.Cleanup(srv.Close)
	s := &testServer{t: t, URL: srv.URL, svc: svc, db: db}
	s.create(feature.Feature{Key: "k", Enabled: true, Buckets: []feature.Bucket{{Name: "on", Replicas: 1}}})

	body := map[string]any{"description": "daily"}
	first := s.must(200, "PATCH", "/api/features/k", body, keyHeader, "day-1")
	now.Store(start.Add(idempotency.Memory - time.Minute).UnixNano())
	if n, err := svc.ExpireIdempotency(context.Background()); err != nil || n != 0 {
		t.Errorf("ExpireIdempotency() before 24h = %d, %v; want 0", n, err)
	}
	wantReplay(t, "a day less a minute later", first, s.must(200, "PATCH", "/api/features/k", body, keyHeader, "day-1"))

	now.Store(start.Add(idempotency.Memory).UnixNano())
	if n, err := svc.ExpireIdempotency(context.Background()); err != nil || n != 1 {
		t.Errorf("ExpireIdempotency() after 24h = %d, %v; want 1", n, err)
	}
	if r := s.must(200, "PATCH", "/api/features/k", body, keyHeader, "day-1"); r.header.Get("Idempotent-Replayed") != "" {
		t.Errorf("an expired key was replayed")
	}
	if n := s.versionCount("k"); n != 3 {
		t.Errorf("%d versions, want 3: created, then one change per day", n)
	}
}

// TestChangesWithoutIfMatchAcrossInstances: three instances on one database
// making many unrelated changes of one feature at once, without If-Match,
// all succeed: a change that meets another instance's newer version is
// applied again to it, never refused with 409. With a stale If-Match the
// change is still refused with 412.
func TestChangesWithoutIfMatchAcrossInstances(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rollout.db")
	unrelatedChanges(t, 50, newServer(t, path, api.Options{}), newServer(t, path, api.Options{}), newServer(t, path, api.Options{}))
}

// unrelatedChanges creates a feature through the first instance, then
// sets perInstance overrides, each of another user, through each instance
// at once (at most changesInFlight at a time per instance), and checks that
// every change applied.
// changesInFlight is how many changes unrelatedChanges sends one instance
// at a time.
const changesInFlight = 16

func unrelatedChanges(t *testing.T, perInstance int, instances ...*testServer) {
	t.Helper()
	a := instances[0]
	a.create(feature.Feature{Key: "k", Enabled: true, Buckets: []feature.Bucket{{Name: "on", Replicas: 1}, {Name: "off", Replicas: 1}}})
	total := len(instances) * perInstance
	var wg sync.WaitGroup
	statuses := make(chan string, total)
	inFlight := make([]chan struct{}, len(instances))
	for j := range inFlight {
		inFlight[j] = make(chan struct{}, changesInFlight)
	}
	for i := range perInstance {
		for j, s := range instances {
			wg.Go(func() {
				// All at once, hundreds of changes would queue for one
				// instance's write lock longer than MaxWriteWait on a
				// loaded machine: that is the lock's limit, not a race.
				inFlight[j] <- struct{}{}
				defer func() { <-inFlight[j] }()
				r := s.do("PUT", fmt.Sprintf("/api/features/k/overrides/user-%d-%d", j, i), map[string]any{"bucket": "off"})
				if r.status != 200 {
					statuses <- fmt.Sprintf("%d %s", r.status, r.body)
				}
			})
		}
	}
	wg.Wait()
	close(statuses)
	failed := 0
	for s := range statuses {
		if failed++; failed <= 3 {
			t.Errorf("an unrelated change without If-Match answered %s, want 200", s)
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d unrelated changes without If-Match failed", failed, total)
	}
	vs, err := a.svc.Versions(context.Background(), "k", 0, 1) // summaries: the newest version's number
	if err != nil {
		t.Fatal(err)
	}
	v, err := a.svc.Version(context.Background(), "k", vs[0].Version) // whole, overrides included
	if err != nil {
		t.Fatal(err)
	}
	f := v.Config
	if len(f.Overrides) != total-failed || f.Version != 1+total-failed {
		t.Errorf("feature has %d overrides at version %d, want %d at version %d: every change applied once", len(f.Overrides), f.Version, total-failed, 1+total-failed)
	}
	a.must(412, "PATCH", "/api/features/k", map[string]any{"description": "stale"}, "If-Match", `"1-`+strings.ReplaceAll(f.ID, "-", "")[:12]+`"`)
}

// racedStore lets another instance change the feature just before each
// write of it it is asked for, as a busy instance beside it would.
type racedStore struct {
	rollout.Store
	n     *atomic.Int32
	other func(i int32) error
}

func (r racedStore) race() error {
	return r.other(r.n.Add(1))
}

func (r racedStore) UpdateFeature(ctx context.Context, f feature.Feature, v rollout.Version) error {
	if err := r.race(); err != nil {
		return err
	}
	return r.Store.UpdateFeature(ctx, f, v)
}

func (r racedStore) UpdateFeatureWith(ctx context.Context, key string, next func(feature.Feature) (feature.Feature, rollout.Version, error)) error {
	if err := r.race(); err != nil {
		return err
	}
	return r.Store.UpdateFeatureWith(ctx, key, next)
}

// TestChangeWithoutIfMatchRaced: a change without If-Match whose feature
// another instance changes before each of its attempts is applied to the
// newest version all the same: after losing the race it holds the feature
// in the store from read to write, which no other write can come between.
func TestChangeWithoutIfMatchRaced(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rollout.db")
	b := newServer(t, path, api.Options{})
	raced := racedStore{n: new(atomic.Int32), other: func(i int32) error {
		_, err := b.svc.Change(context.Background(), "k", change.SetOverride(fmt.Sprintf("b-%d", i), "on"), rollout.ChangeOptions{})
		return err
	}}
	a := newServerOver(t, path, api.Options{}, func(st rollout.Store) rollout.Store { raced.Store = st; return raced })
	a.create(feature.Feature{Key: "k", Enabled: true, Buckets: []feature.Bucket{{Name: "on", Replicas: 1}, {Name: "off", Replicas: 1}}})
	r := a.must(200, "PUT", "/api/features/k/overrides/a-0", map[string]any{"bucket": "off"})
	races := int(raced.n.Load())
	if races < 2 {
		t.Errorf("the other instance raced %d times, want at least 2", races)
	}
	if v := r.json(t)["feature"].(map[string]any)["version"]; v != float64(races+2) {
		t.Errorf("the change made version %v, want %d: after the other instance's %d", v, races+2, races)
	}
	f, err := b.db.Feature(context.Background(), "k")
	if err != nil || len(f.Overrides) != races+1 || f.Overrides["a-0"] != "off" {
		t.Errorf("Feature() = overrides %v, %v; want the other instance's %d and a-0", f.Overrides, err, races)
	}
}

// sendKeyed makes a request as role with an Idempotency-Key and returns
// its status and whether it was replayed.
func (g *guardedServer) sendKeyed(t *testing.T, role, method, path string, body any, key string) (int, bool) {
	t.Helper()
	data, _ := json.Marshal(body)
	req, err := http.NewRequest(method, g.url+path, bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+g.secrets[role])
	req.Header.Set(keyHeader, key)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	io.Copy(io.Discard, res.Body)
	return res.StatusCode, res.Header.Get("Idempotent-Replayed") == "true"
}

// TestIdempotencyKeyPerToken: a key is its token's own: another token's
// request with the same key runs as a new one (and never sees the first
// answer); a request refused for its role claims nothing; apps' exposures
// take no key.
func TestIdempotencyKeyPerToken(t *testing.T) {
	g := newAuthServer(t, []auth.Role{auth.RoleAdmin, auth.RoleEditor, auth.RoleViewer, auth.RoleEvaluate}, false)
	if _, err := g.svc.Create(context.Background(), feature.Feature{Key: "k", Enabled: true, Buckets: []feature.Bucket{{Name: "on", Replicas: 1}}}, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		role             string
		body             string
		status           int
		replayed         bool
		versionsAfterAll int
	}{
		{"viewer", "v", 403, false, 1},
		{"editor", "e", 200, false, 2},
		{"editor", "e", 200, true, 2},
		{"admin", "e", 200, false, 3},
		{"admin", "other", 422, false, 3},
		{"admin", "e", 200, true, 3},
	} {
		status, replayed := g.sendKeyed(t, tt.role, "PATCH", "/api/features/k", map[string]any{"description": tt.body}, "shared-key")
		if status != tt.status || replayed != tt.replayed {
			t.Errorf("%s PATCH %q with the shared key = %d (replayed %v), want %d (replayed %v)", tt.role, tt.body, status, replayed, tt.status, tt.replayed)
		}
		if vs, _ := g.svc.Versions(context.Background(), "k", 0, 0); len(vs) != tt.versionsAfterAll {
			t.Errorf("after %s's PATCH: %d versions, want %d", tt.role, len(vs), tt.versionsAfterAll)
		}
	}
	exposures := map[string]any{"batch": "b-1", "exposures": []any{}}
	for range 2 {
		if status, replayed := g.sendKeyed(t, "evaluate", "POST", "/api/exposures", exposures, "exp-1"); replayed || status >= 500 {
			t.Errorf("POST /api/exposures with a key = %d (replayed %v), want it answered anew", status, replayed)
		}
	}
}
