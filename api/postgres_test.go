package api_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store/postgres"
	"github.com/rollout/rollout/store/storetest"
)

// newPostgresServer starts the API over the PostgreSQL database dsn, with
// the store's timeout when not zero.
func newPostgresServer(t *testing.T, dsn string, timeout time.Duration) *testServer {
	t.Helper()
	db, err := postgres.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	if timeout != 0 {
		db.SetTimeout(timeout)
	}
	svc, err := rollout.NewService(context.Background(), db, nil)
	if err != nil {
		db.Close()
		t.Fatalf("new service: %v", err)
	}
	srv := httptest.NewServer(api.New(svc, api.Options{}))
	t.Cleanup(func() {
		srv.Close()
		db.Close()
	})
	return &testServer{t: t, URL: srv.URL, svc: svc}
}

// TestIdempotencyKeyInstances: on two instances over one PostgreSQL
// database, a change retried with its key on the other instance gets the
// first answer and applies once; the same change sent with one key to both
// instances at once, many times over, applies once, every other copy
// answered with the first answer or 409 while it runs, never an error of
// the server.
func TestIdempotencyKeyInstances(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	a, b := newPostgresServer(t, dsn, 0), newPostgresServer(t, dsn, 0)

	first := a.must(201, "POST", "/api/features", newFeatureBody, keyHeader, "create-1")
	wantReplay(t, "create on the other instance", first, b.must(201, "POST", "/api/features", newFeatureBody, keyHeader, "create-1"))
	first = b.must(200, "PATCH", "/api/features/k", map[string]any{"description": "d1"}, keyHeader, "patch-1")
	wantReplay(t, "patch on the other instance", first, a.must(200, "PATCH", "/api/features/k", map[string]any{"description": "d1"}, keyHeader, "patch-1"))
	if n := b.versionCount("k"); n != 2 {
		t.Errorf("%d versions, want 2", n)
	}
	if r := b.do("PATCH", "/api/features/k", map[string]any{"description": "d2"}, keyHeader, "patch-1"); r.status != 422 {
		t.Errorf("another request with the key on the other instance = %d %s, want 422", r.status, r.body)
	}

	const copies = 8
	for round := range 5 {
		key := fmt.Sprintf("race-%d", round)
		body := map[string]any{"description": key}
		before := a.versionCount("k")
		answers := make([]response, copies)
		var wg sync.WaitGroup
		for i := range copies {
			s := []*testServer{a, b}[i%2]
			wg.Go(func() { answers[i] = s.do("PATCH", "/api/features/k", body, keyHeader, key) })
		}
		wg.Wait()
		var ok []response
		for _, r := range answers {
			switch {
			case r.status == 200:
				ok = append(ok, r)
			case r.status == 409:
				if code := r.json(t)["error"].(map[string]any)["code"]; code != "idempotency_key_in_use" {
					t.Errorf("round %d: 409 with code %v, want idempotency_key_in_use", round, code)
				}
			default:
				t.Errorf("round %d: a copy answered %d %s, want 200 or 409", round, r.status, r.body)
			}
		}
		fresh := 0
		for _, r := range ok {
			if r.header.Get("Idempotent-Replayed") == "" {
				fresh++
			}
			if string(r.body) != string(ok[0].body) {
				t.Errorf("round %d: copies answered 200 with different bodies:\n%s\n%s", round, r.body, ok[0].body)
			}
		}
		if fresh > 1 {
			t.Errorf("round %d: %d copies ran, want at most 1", round, fresh)
		}
		if n := a.versionCount("k") - before; n != 1 {
			t.Errorf("round %d: %d copies of one change with one key made %d versions, want 1", round, copies, n)
		}
	}
}

// TestHungDatabase: with PostgreSQL hung (its connection frozen, nothing
// closed), a change answers 503 unavailable after the store's timeout
// rather than waiting, while evaluations go on answering from memory; once
// the database answers again, the change goes through.
func TestHungDatabase(t *testing.T) {
	proxy, via := storetest.ProxyDSN(t, storetest.PostgresDSN(t))
	s := newPostgresServer(t, via, time.Second)
	s.must(201, "POST", "/api/features", newFeatureBody)

	proxy.Freeze()
	done := make(chan response, 2)
	for _, key := range []string{"", "hung-1"} {
		go func() {
			if key == "" {
				done <- s.do("PATCH", "/api/features/k", map[string]any{"description": "while hung"})
			} else {
				done <- s.do("PATCH", "/api/features/k", map[string]any{"description": "while hung"}, keyHeader, key)
			}
		}()
	}
	for range 2 {
		select {
		case r := <-done:
			if r.status != 503 || r.json(t)["error"].(map[string]any)["code"] != feature.EUnavailable {
				t.Errorf("a change while the database hangs = %d %s, want 503 unavailable", r.status, r.body)
			}
		case <-time.After(time.Minute):
			t.Fatal("a change while the database hangs has not answered after a minute")
		}
		s.must(200, "GET", "/evaluate?feature=k&user=alice", nil)
	}

	proxy.Thaw()
	s.must(200, "PATCH", "/api/features/k", map[string]any{"description": "after"}, keyHeader, "hung-1")
	if n := s.versionCount("k"); n != 2 {
		t.Errorf("%d versions, want 2: the changes refused while hung applied nothing", n)
	}
}

// TestChangesWithoutIfMatchPostgres: two instances over one PostgreSQL
// database, 160 unrelated changes each at once without If-Match, as in the
// issue (73 of 320 answered 409): every one applies.
func TestChangesWithoutIfMatchPostgres(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	unrelatedChanges(t, 160, newPostgresServer(t, dsn, 0), newPostgresServer(t, dsn, 0))
}
