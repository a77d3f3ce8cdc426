package client_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rollout/rollout/api/client"
	"github.com/rollout/rollout/api/clienttest/internal/testserver"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/exposure"
	"github.com/rollout/rollout/rollout/feature"
)

func raw(v string) json.RawMessage { return json.RawMessage(v) }

// features are 20 features of every kind evaluation tells apart: salts
// (the key, another, none), overrides, switched off with and without a
// fallback, uneven replicas, values of every JSON type.
func features() []feature.Feature {
	var out []feature.Feature
	for i := range 20 {
		f := feature.Feature{
			Key: fmt.Sprintf("f%02d", i), Enabled: true, Salt: fmt.Sprintf("f%02d", i),
			Buckets: []feature.Bucket{
				{Name: "A", Replicas: 1 + i*7%100, Value: raw(`true`)},
				{Name: "B", Replicas: 100, Value: raw(`{"color":"<red>","n":[1,2.5]}`)},
				{Name: "C", Replicas: 37 + i},
			},
		}
		switch i % 5 {
		case 0:
			f.Salt = ""
			if i == 10 { // overrides without a salt: their hashes are salted by the key
				f.Overrides = map[string]string{"u1": "B", "vip@example.com": "C"}
			}
		case 1:
			f.Salt = "pepper ü"
			f.Buckets[2].Value = raw(`42`)
		case 2:
			f.Overrides = map[string]string{"u1": "C", "u2": "A", "vip@example.com": "B"}
			f.Buckets[0].Value = raw(`"text"`)
		case 3:
			f.Enabled, f.Fallback = false, "B"
		case 4:
			f.Enabled = false
		}
		if i == 19 {
			f.Buckets = append(f.Buckets, feature.Bucket{Name: "D", Replicas: 1000, Value: raw(`3.25`)})
		}
		out = append(out, f)
	}
	return out
}

func newServer(t *testing.T) *testserver.Server {
	t.Helper()
	s := testserver.Start(t)
	for _, f := range features() {
		s.Create(t, f)
	}
	return s
}

func newClient(t *testing.T, cfg client.Config) *client.Client {
	t.Helper()
	if cfg.PollInterval == 0 {
		cfg.PollInterval = 100 * time.Millisecond
	}
	c, err := client.New(context.Background(), cfg)
	if err != nil {
		t.Fatalf("client.New() = %v", err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// serverAnswer is one entry of POST /evaluate.
type serverAnswer struct {
	Bucket  *string         `json:"bucket"`
	Value   json.RawMessage `json:"value"`
	Version int             `json:"version"`
	Reason  string          `json:"reason"`
}

func users(n int) []string {
	out := []string{"u1", "u2", "vip@example.com", "ü", strings.Repeat("x", feature.MaxUserBytes), "user with spaces", "汉字"}
	for i := len(out); i < n; i++ {
		out = append(out, fmt.Sprintf("user-%d", i))
	}
	return out
}

// TestBitIdentical: 10,000 users (1,000 with -short) × 20 features
// evaluated by the client get what the server's /evaluate answers:
// bucket, value, version and reason.
func TestBitIdentical(t *testing.T) {
	s := newServer(t)
	c := newClient(t, client.Config{URL: s.URL})
	if n := c.Snapshot().Len(); n != 20 {
		t.Fatalf("the client has %d features, want 20", n)
	}
	n := 10_000
	if testing.Short() {
		n = 1_000
	}
	all := users(n)
	var (
		wg         sync.WaitGroup
		mu         sync.Mutex
		mismatches []string
		compared   atomic.Int64
	)
	for w := range 4 {
		wg.Go(func() {
			for i := w; i < len(all); i += 4 {
				user := all[i]
				body, _ := json.Marshal(map[string]any{"user": user})
				res, err := http.Post(s.URL+"/evaluate", "application/json", bytes.NewReader(body))
				if err != nil {
					t.Error(err)
					return
				}
				var answer struct {
					Results map[string]serverAnswer `json:"results"`
				}
				err = json.NewDecoder(res.Body).Decode(&answer)
				res.Body.Close()
				if err != nil || len(answer.Results) != 20 {
					t.Errorf("POST /evaluate %q: %d results, %v", user, len(answer.Results), err)
					return
				}
				for key, want := range answer.Results {
					got, err := c.Evaluate(key, user)
					compared.Add(1)
					if err != nil || !same(got, want) {
						mu.Lock()
						mismatches = append(mismatches, fmt.Sprintf("Evaluate(%q, %q) = %+v, %v; server %+v", key, user, got, err, want))
						mu.Unlock()
					}
				}
			}
		})
	}
	wg.Wait()
	if len(mismatches) > 0 {
		t.Errorf("%d of %d evaluations differ, first: %s", len(mismatches), compared.Load(), mismatches[0])
	}
	t.Logf("%d evaluations compared", compared.Load())
	if want := int64(20 * n); compared.Load() != want {
		t.Errorf("compared %d evaluations, want %d", compared.Load(), want)
	}
}

func same(got feature.Evaluation, want serverAnswer) bool {
	bucket := ""
	if want.Bucket != nil {
		bucket = *want.Bucket
	}
	if got.Bucket != bucket || got.Version != want.Version || got.Reason != want.Reason {
		return false
	}
	if bucket == "" {
		return got.Value == nil
	}
	var g, w any
	return json.Unmarshal(got.Value, &g) == nil && json.Unmarshal(want.Value, &w) == nil && reflect.DeepEqual(g, w)
}

// TestPropagation: each of 50 changes through the API reaches the client,
// through its stream, as an event naming the feature; the p50 and p99 of
// the time it took are reported.
func TestPropagation(t *testing.T) {
	s := newServer(t)
	c := newClient(t, client.Config{URL: s.URL})
	changed := make(chan client.Event, 100)
	defer c.Watch(func(ev client.Event) {
		if ev.Kind == client.EventChanged {
			changed <- ev
		}
	})()
	var lat []time.Duration
	for i := range 50 {
		body := fmt.Sprintf(`{"description":"change %d"}`, i)
		req, _ := http.NewRequest("PATCH", s.URL+"/api/features/f07", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		start := time.Now()
		res, err := http.DefaultClient.Do(req)
		if err != nil || res.StatusCode != 200 {
			t.Fatalf("PATCH: %v %v", res, err)
		}
		res.Body.Close()
		select {
		case ev := <-changed:
			lat = append(lat, time.Since(start))
			if !slices.Equal(ev.Features, []string{"f07"}) {
				t.Errorf("change %d: event features %q, want [f07]", i, ev.Features)
			}
			f, _ := c.Snapshot().Feature("f07")
			if f.Version != i+2 {
				t.Errorf("change %d: the client has version %d, want %d", i, f.Version, i+2)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("change %d not seen within 5 s", i)
		}
	}
	slices.Sort(lat)
	p50, p99 := lat[len(lat)/2], lat[len(lat)*99/100]
	// Reported, not asserted: each change's 5 s above is a hang guard.
	t.Logf("propagation over %d changes: p50 %v, p99 %v, max %v", len(lat), p50, p99, lat[len(lat)-1])
}

// waitEvent waits for an event of kind.
func waitEvent(t *testing.T, events <-chan client.Event, kind client.EventKind, within time.Duration) client.Event {
	t.Helper()
	deadline := time.After(within)
	for {
		select {
		case ev := <-events:
			if ev.Kind == kind {
				return ev
			}
		case <-deadline:
			t.Fatalf("no %v event within %v", kind, within)
		}
	}
}

// TestServerGoneAndBack: with the server stopped the client keeps
// answering from its snapshot and reports stale; restarted on the same
// address, with a change made meanwhile, the client catches up and
// reports ready.
func TestServerGoneAndBack(t *testing.T) {
	s := newServer(t)
	c := newClient(t, client.Config{URL: s.URL})
	events := make(chan client.Event, 100)
	defer c.Watch(func(ev client.Event) { events <- ev })()
	before, _ := c.Evaluate("f01", "someone")

	s.Stop()
	ev := waitEvent(t, events, client.EventStale, 5*time.Second)
	if !c.Stale() || ev.Err == nil {
		t.Errorf("Stale() = %v, event error %v; want true and why", c.Stale(), ev.Err)
	}
	if got, err := c.Evaluate("f01", "someone"); err != nil || !reflect.DeepEqual(got, before) {
		t.Errorf("Evaluate with the server gone = %+v, %v; want %+v", got, err, before)
	}

	// A change made while the server is away, by another instance.
	other := testserver.StartAt(t, s.DBPath, "127.0.0.1:0")
	if _, err := other.Svc.Change(context.Background(), "f01", change.Patch(nil, ptr(false), nil), rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	other.Stop()

	testserver.StartAt(t, s.DBPath, s.Addr)
	changed := waitEvent(t, events, client.EventChanged, 5*time.Second)
	if !slices.Equal(changed.Features, []string{"f01"}) {
		t.Errorf("changed %q, want [f01]", changed.Features)
	}
	waitEvent(t, events, client.EventReady, 5*time.Second)
	if c.Stale() {
		t.Error("Stale() = true after the server came back")
	}
	if got, _ := c.Evaluate("f01", "someone"); got.Reason != feature.ReasonDisabled {
		t.Errorf("Evaluate after catching up = %+v, want disabled", got)
	}
}

func ptr[T any](v T) *T { return &v }

// TestCacheFile: a client that read the snapshot leaves it in the cache
// file; a new client starts from it with no server, stale, answering as
// the first did.
func TestCacheFile(t *testing.T) {
	s := newServer(t)
	cache := filepath.Join(t.TempDir(), "rollout-cache.json")
	first := newClient(t, client.Config{URL: s.URL, CacheFile: cache})
	s.Stop()
	first.Close()

	if _, err := client.New(context.Background(), client.Config{URL: s.URL}); err == nil {
		t.Error("client.New() with no server and no cache succeeded, want an error")
	}
	second := newClient(t, client.Config{URL: s.URL, CacheFile: cache})
	if !second.Stale() {
		t.Error("Stale() = false for a client started from its cache")
	}
	for _, user := range users(200) {
		for _, key := range first.Snapshot().Keys() {
			want, _ := first.Snapshot().Peek(key, user)
			if got, err := second.Evaluate(key, user); err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("from the cache: Evaluate(%q, %q) = %+v, %v; want %+v", key, user, got, err, want)
			}
		}
	}
}

// losingProxy forwards to the server, and loses the answer to the first
// POST /api/exposures: the server counts the batch, the client sees a 502.
func losingProxy(t *testing.T, target string) (string, *atomic.Int64) {
	u, _ := url.Parse(target)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	var posts atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "POST" && r.URL.Path == "/api/exposures" && posts.Add(1) == 1 {
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			if rec.Code != 200 {
				t.Errorf("the server answered the first batch %d %s", rec.Code, rec.Body)
			}
			http.Error(w, "lost", http.StatusBadGateway)
			return
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &posts
}

// TestExposures: the client's evaluations show in the server's exposures
// of the feature, with their distinct users (u1's 500 more evaluations
// are one user), and a batch sent again after its answer was lost counts
// once.
func TestExposures(t *testing.T) {
	s := newServer(t)
	proxy, posts := losingProxy(t, s.URL)
	c := newClient(t, client.Config{URL: proxy, FlushInterval: time.Hour})
	want := map[string]int64{}
	for _, user := range users(1000) {
		e, _ := c.Evaluate("f02", user)
		want[e.Bucket]++
	}
	ctx := context.Background()
	if err := c.Flush(ctx); err == nil {
		t.Fatal("Flush() with the answer lost = nil, want an error")
	}
	if err := c.Flush(ctx); err != nil { // the same batch again
		t.Fatalf("Flush() again = %v", err)
	}
	for range 500 {
		e, _ := c.Evaluate("f02", "u1")
		want[e.Bucket]++
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if n := posts.Load(); n != 3 {
		t.Errorf("%d batches posted, want 3 (one lost, its retry, the last)", n)
	}

	res, err := http.Get(s.URL + "/api/features/f02/exposures")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	var rep exposure.Report
	if err := json.Unmarshal(data, &rep); err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	var bucketUsers int64
	for _, b := range rep.Buckets {
		got[*b.Bucket] = b.Count
		bucketUsers += b.Users
	}
	if !reflect.DeepEqual(got, want) || rep.Total != 1500 {
		t.Errorf("exposures of f02 = %v (total %d), want %v (1500)", got, rep.Total, want)
	}
	if rep.Users < 980 || rep.Users > 1020 || bucketUsers < 980 || bucketUsers > 1020 || rep.LastDayUsers != rep.Users {
		t.Errorf("users of f02 = %d (buckets' %d, last day %d), want ≈ 1000", rep.Users, bucketUsers, rep.LastDayUsers)
	}
}

// TestEvaluateErrors: the client refuses what the server refuses.
func TestEvaluateErrors(t *testing.T) {
	s := newServer(t)
	c := newClient(t, client.Config{URL: s.URL})
	if _, err := c.Evaluate("missing", "u1"); feature.ErrorCode(err) != feature.ENotFound {
		t.Errorf("Evaluate(missing) = %v, want not found", err)
	}
	for _, user := range []string{"", strings.Repeat("x", feature.MaxUserBytes+1), "\xff"} {
		if _, err := c.Evaluate("f01", user); feature.ErrorCode(err) != feature.EInvalid {
			t.Errorf("Evaluate(f01, %q) = %v, want invalid", user, err)
		}
	}
	if _, err := client.New(context.Background(), client.Config{}); err == nil {
		t.Error("client.New() without a URL succeeded")
	}
}

// snapshotCounts are what a countingProxy saw of GET /sync/v1/snapshot.
type snapshotCounts struct {
	mu                    sync.Mutex
	full, notModified     int // answers 200 and 304
	gzipAsked, gzipServed int
}

func (n *snapshotCounts) get() (full, notModified int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.full, n.notModified
}

// countingProxy forwards to the server and counts the snapshot requests
// and how they were answered.
func countingProxy(t *testing.T, target string) (*httptest.Server, *snapshotCounts) {
	u, _ := url.Parse(target)
	rp := httputil.NewSingleHostReverseProxy(u)
	rp.FlushInterval = -1
	counts := &snapshotCounts{}
	rp.ModifyResponse = func(res *http.Response) error {
		if res.Request.URL.Path != "/sync/v1/snapshot" {
			return nil
		}
		counts.mu.Lock()
		defer counts.mu.Unlock()
		switch res.StatusCode {
		case http.StatusOK:
			counts.full++
		case http.StatusNotModified:
			counts.notModified++
		}
		if res.Header.Get("Content-Encoding") == "gzip" {
			counts.gzipServed++
		}
		return nil
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/sync/v1/snapshot" && strings.Contains(r.Header.Get("Accept-Encoding"), "gzip") {
			counts.mu.Lock()
			counts.gzipAsked++
			counts.mu.Unlock()
		}
		rp.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv, counts
}

// waitFor polls cond for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 5 s", what)
		}
	}
}

// agrees checks that the client answers every feature for users what the
// server's /evaluate answers.
func agrees(t *testing.T, s *testserver.Server, c *client.Client, users []string) {
	t.Helper()
	for _, user := range users {
		body, _ := json.Marshal(map[string]any{"user": user})
		res, err := http.Post(s.URL+"/evaluate", "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		var answer struct {
			Results map[string]serverAnswer `json:"results"`
		}
		err = json.NewDecoder(res.Body).Decode(&answer)
		res.Body.Close()
		if err != nil || len(answer.Results) != c.Snapshot().Len() {
			t.Fatalf("POST /evaluate %q: %d results (the client has %d), %v", user, len(answer.Results), c.Snapshot().Len(), err)
		}
		for key, want := range answer.Results {
			if got, err := c.Evaluate(key, user); err != nil || !same(got, want) {
				t.Fatalf("Evaluate(%q, %q) = %+v, %v; server %+v", key, user, got, err, want)
			}
		}
	}
}

// TestChangesWithoutRefetch: a connected client applies the features each
// change event carries, new overrides and deletions included, and fetches
// the snapshot no more; it asked for it gzipped. When its stream is cut,
// it reconnects and asks again with the tag of what it built from the
// events, which the server answers 304.
func TestChangesWithoutRefetch(t *testing.T) {
	s := newServer(t)
	ctx := context.Background()
	if _, err := s.Svc.Sync(ctx); err != nil { // the revision of the features created
		t.Fatal(err)
	}
	proxy, counts := countingProxy(t, s.URL)
	c := newClient(t, client.Config{URL: proxy.URL})
	changed := make(chan client.Event, 100)
	defer c.Watch(func(ev client.Event) {
		if ev.Kind == client.EventChanged {
			changed <- ev
		}
	})()
	// The snapshot at start, and again (304) when the stream says hello.
	waitFor(t, "the fetch on connecting", func() bool { full, nm := counts.get(); return full+nm == 2 })
	if full, nm := counts.get(); full != 1 || nm != 1 {
		t.Fatalf("on connecting: %d full answers and %d not modified, want 1 and 1", full, nm)
	}
	counts.mu.Lock()
	if counts.gzipAsked != 2 || counts.gzipServed != 1 {
		t.Errorf("gzip asked %d times and served %d, want 2 and 1", counts.gzipAsked, counts.gzipServed)
	}
	counts.mu.Unlock()

	changes := []func() error{
		func() error {
			_, err := s.Svc.Change(ctx, "f02", change.SetOverride("new@example.com", "A"), rollout.ChangeOptions{})
			return err
		},
		func() error {
			_, err := s.Svc.Change(ctx, "f10", change.SetOverride("someone", "A"), rollout.ChangeOptions{})
			return err
		},
		func() error {
			_, err := s.Svc.Change(ctx, "f03", change.Patch(nil, ptr(true), nil), rollout.ChangeOptions{})
			return err
		},
		func() error {
			_, err := s.Svc.Archive(ctx, "f04", rollout.ChangeOptions{})
			return err
		},
		func() error {
			_, err := s.Svc.Archive(ctx, "f05", rollout.ChangeOptions{})
			return err
		},
		func() error { // served again, as a new version
			_, err := s.Svc.Restore(ctx, "f05", rollout.ChangeOptions{})
			return err
		},
		func() error {
			f := features()[2]
			f.Key = "fresh"
			_, err := s.Svc.Create(ctx, f, rollout.ChangeOptions{})
			return err
		},
	}
	for i := range 15 {
		changes = append(changes, func() error {
			_, err := s.Svc.Change(ctx, "f07", change.Patch(ptr(fmt.Sprintf("change %d", i)), nil, nil), rollout.ChangeOptions{})
			return err
		})
	}
	for i, ch := range changes {
		if err := ch(); err != nil {
			t.Fatalf("change %d: %v", i, err)
		}
		select {
		case <-changed:
		case <-time.After(5 * time.Second):
			t.Fatalf("change %d not seen within 5 s", i)
		}
	}
	if full, nm := counts.get(); full != 1 || nm != 1 {
		t.Errorf("after %d changes the snapshot was fetched %d times in all (%d not modified), want once (and once not modified)", len(changes), full, nm)
	}
	agrees(t, s, c, append(users(300), "new@example.com", "someone"))
	if got, _ := c.Evaluate("f02", "new@example.com"); got.Reason != feature.ReasonOverride || got.Bucket != "A" {
		t.Errorf("Evaluate(f02, new@example.com) = %+v, want A by override", got)
	}
	if _, err := c.Evaluate("f04", "u1"); feature.ErrorCode(err) != feature.ENotFound {
		t.Errorf("Evaluate(f04) after its archiving = %v, want not found", err)
	}
	if e, err := c.Evaluate("f05", "u1"); err != nil || e.Version != 2 {
		t.Errorf("Evaluate(f05) after its archiving and restoring = %+v, %v; want version 2", e, err)
	}

	proxy.CloseClientConnections() // the stream is cut
	// A poll after the stream ended, and the fetch on connecting again.
	waitFor(t, "the fetches after reconnecting", func() bool { full, nm := counts.get(); return full+nm >= 4 })
	if full, _ := counts.get(); full != 1 {
		t.Errorf("after reconnecting the snapshot was fetched in full %d times in all, want once: the client's tag should match", full)
	}
}

// TestCacheFileFirstFormat: a cache file an older client wrote (features
// whole, user IDs in the overrides) is read: a client started from it with
// no server answers as the server did.
func TestCacheFileFirstFormat(t *testing.T) {
	s := newServer(t)
	var fs []feature.Feature
	snap := s.Svc.Snapshot()
	for _, key := range snap.Keys() {
		f, _ := snap.Feature(key)
		fs = append(fs, f)
	}
	old, _ := json.Marshal(map[string]any{"revision": snap.Revision(), "features": fs})
	cache := filepath.Join(t.TempDir(), "rollout-cache.json")
	if err := os.WriteFile(cache, old, 0o600); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	c := newClient(t, client.Config{URL: s.URL, CacheFile: cache})
	if !c.Stale() || c.Snapshot().Len() != 20 {
		t.Fatalf("from an old cache file: Stale() = %v, %d features; want true, 20", c.Stale(), c.Snapshot().Len())
	}
	for _, user := range users(500) {
		for _, key := range snap.Keys() {
			want, _ := snap.Peek(key, user)
			got, err := c.Evaluate(key, user)
			var g, w any
			json.Unmarshal(got.Value, &g)
			json.Unmarshal(want.Value, &w)
			got.Value, want.Value = nil, nil // JSON alike, escaped differently
			if err != nil || !reflect.DeepEqual(got, want) || !reflect.DeepEqual(g, w) {
				t.Fatalf("from an old cache: Evaluate(%q, %q) = %+v %s, %v; want %+v %s", key, user, got, g, err, want, w)
			}
		}
	}
}
