package evaluation_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/api/evaluation"
	"github.com/rollout/rollout/api/internal/apitest"
	"github.com/rollout/rollout/rollout/exposure"
	"github.com/rollout/rollout/rollout/feature"
)

// TestSyncSnapshot: the snapshot holds everything evaluation needs and no
// user ID or description, its strong ETag answers 304 until a feature
// changes, and a snapshot decoded from it serves what the server serves,
// overridden users included.
func TestSyncSnapshot(t *testing.T) {
	s := apitest.New(t, "", api.Options{})
	s.Seed()
	s.Must(http.StatusOK, "PATCH", "/api/features/checkout", map[string]any{"description": "private notes"})
	s.Must(http.StatusOK, "PUT", "/api/features/dark-mode/overrides/someone@example.com", map[string]any{"bucket": "off"})

	identity := []string{"Accept-Encoding", "identity"}
	r := s.Must(http.StatusOK, "GET", "/sync/v1/snapshot", nil, identity...)
	etag := r.Header.Get("ETag")
	if !strings.HasPrefix(etag, `"`) || len(etag) != 34 {
		t.Errorf("ETag = %q, want a strong tag of 32 hex digits", etag)
	}
	for name, want := range map[string]string{"Cache-Control": "no-cache", "Vary": "Accept-Encoding", "Content-Encoding": ""} {
		if got := r.Header.Get(name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	for _, secret := range []string{`"vip"`, "someone@example.com", "private notes", "description"} {
		if strings.Contains(string(r.Body), secret) {
			t.Errorf("the snapshot holds %s:\n%s", secret, r.Body)
		}
	}
	var doc feature.SyncDocument
	if err := json.Unmarshal(r.Body, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Format != feature.SyncFormat || doc.Revision != s.Svc.Snapshot().Revision() || len(doc.Features) != 6 {
		t.Errorf("snapshot has format %d, revision %d and %d features, want %d, %d and 6", doc.Format, doc.Revision, len(doc.Features), feature.SyncFormat, s.Svc.Snapshot().Revision())
	}
	snap, err := feature.DecodeSync(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	if got := snap.SyncTag(); got != etag {
		t.Errorf("SyncTag() of the decoded snapshot = %s, want the ETag %s", got, etag)
	}
	for _, key := range snap.Keys() {
		for _, user := range []string{"u1", "u2", "vip", "someone@example.com", "someone else"} {
			got, _ := snap.Peek(key, user)
			if want := s.Evaluate(key, user); !cmp.Equal(want, got) {
				t.Errorf("decoded Peek(%q, %q) = %+v, want %+v", key, user, got, want)
			}
		}
	}

	for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
		if r := s.Do("GET", "/sync/v1/snapshot", nil, "If-None-Match", inm); r.Status != http.StatusNotModified || len(r.Body) != 0 {
			t.Errorf("If-None-Match: %s = %d %q, want 304 and no body", inm, r.Status, r.Body)
		}
	}
	s.Must(http.StatusOK, "GET", "/sync/v1/snapshot", nil, "If-None-Match", `"other"`)
	s.Must(http.StatusOK, "PATCH", "/api/features/checkout", map[string]any{"enabled": false})
	r = s.Must(http.StatusOK, "GET", "/sync/v1/snapshot", nil, "If-None-Match", etag)
	if r.Header.Get("ETag") == etag {
		t.Errorf("ETag after a change = %s, unchanged", etag)
	}
}

// TestSyncSnapshotGzip: a client that accepts gzip gets the same document
// gzipped, under its own strong ETag; either tag answers 304; a client that
// refuses gzip (q=0) gets it plain.
func TestSyncSnapshotGzip(t *testing.T) {
	s := apitest.New(t, "", api.Options{})
	s.Seed()
	plain := s.Must(http.StatusOK, "GET", "/sync/v1/snapshot", nil, "Accept-Encoding", "identity")
	for _, ae := range []string{"gzip", "br;q=1.0, gzip;q=0.5", "*", "GZIP"} {
		r := s.Must(http.StatusOK, "GET", "/sync/v1/snapshot", nil, "Accept-Encoding", ae)
		if got := r.Header.Get("Content-Encoding"); got != "gzip" {
			t.Fatalf("Accept-Encoding: %s: Content-Encoding = %q, want gzip", ae, got)
		}
		want := strings.TrimSuffix(plain.Header.Get("ETag"), `"`) + `-gzip"`
		if got := r.Header.Get("ETag"); got != want {
			t.Errorf("Accept-Encoding: %s: ETag = %s, want %s", ae, got, want)
		}
		zr, err := gzip.NewReader(bytes.NewReader(r.Body))
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(zr)
		if err != nil || !bytes.Equal(body, plain.Body) {
			t.Errorf("Accept-Encoding: %s: the body gunzipped differs from the plain one (%v)", ae, err)
		}
		for _, inm := range []string{plain.Header.Get("ETag"), r.Header.Get("ETag")} {
			if r := s.Do("GET", "/sync/v1/snapshot", nil, "Accept-Encoding", ae, "If-None-Match", inm); r.Status != http.StatusNotModified {
				t.Errorf("Accept-Encoding: %s, If-None-Match: %s = %d, want 304", ae, inm, r.Status)
			}
		}
	}
	for _, ae := range []string{"gzip;q=0", "deflate", "identity"} {
		r := s.Must(http.StatusOK, "GET", "/sync/v1/snapshot", nil, "Accept-Encoding", ae)
		if got := r.Header.Get("Content-Encoding"); got != "" || !bytes.Equal(r.Body, plain.Body) {
			t.Errorf("Accept-Encoding: %s: Content-Encoding = %q, want the plain document", ae, got)
		}
	}
}

// TestSyncSnapshotEncodedOnce: 100 requests that arrive together right
// after a change, half of them asking for gzip, cost one encoding of the
// document, and get the same bytes.
func TestSyncSnapshotEncodedOnce(t *testing.T) {
	s := apitest.New(t, "", api.Options{})
	s.Seed()
	big := feature.Feature{Key: "big", Enabled: true, Salt: "big", Overrides: map[string]string{},
		Buckets: []feature.Bucket{{Name: "A", Replicas: 100}, {Name: "B", Replicas: 100}}}
	for i := range feature.MaxOverrides - 1 {
		big.Overrides[fmt.Sprintf("user-%d@example.com", i)] = "B"
	}
	s.Create(big)
	s.Must(http.StatusOK, "GET", "/sync/v1/snapshot", nil)
	// The change is to the big feature: its sync form is encoded again,
	// which takes long enough for the requests to pile up.
	s.Must(http.StatusOK, "PUT", "/api/features/big/overrides/one-more", map[string]any{"bucket": "A"})

	// The first request to encode waits until all 100 are in: without a
	// single flight each would encode its own copy.
	evaluation.HoldSyncEncoding(t, 100)
	before := evaluation.SyncEncodings()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		bodies = map[string]int{}
	)
	start := make(chan struct{})
	for i := range 100 {
		wg.Go(func() {
			<-start
			req, _ := http.NewRequest("GET", s.URL+"/sync/v1/snapshot", nil)
			if i%2 == 0 {
				req.Header.Set("Accept-Encoding", "gzip")
			} else {
				req.Header.Set("Accept-Encoding", "identity")
			}
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer res.Body.Close()
			body, err := io.ReadAll(res.Body)
			if err != nil || res.StatusCode != http.StatusOK {
				t.Errorf("GET /sync/v1/snapshot = %d, %v", res.StatusCode, err)
				return
			}
			if res.Header.Get("Content-Encoding") == "gzip" {
				zr, _ := gzip.NewReader(bytes.NewReader(body))
				if body, err = io.ReadAll(zr); err != nil {
					t.Error(err)
				}
			}
			mu.Lock()
			bodies[string(body)]++
			mu.Unlock()
		})
	}
	close(start)
	wg.Wait()
	if n := evaluation.SyncEncodings() - before; n != 1 {
		t.Errorf("100 requests after a change encoded the document %d times, want 1", n)
	}
	if len(bodies) != 1 {
		t.Errorf("100 requests got %d different documents, want 1", len(bodies))
	}
}

// TestExposureBatches: counts an app sends are added once per batch, and
// malformed batches are refused with a JSON error.
func TestExposureBatches(t *testing.T) {
	s := apitest.New(t, "", api.Options{})
	s.Seed()
	f, _ := s.Svc.Snapshot().Feature("limit")
	batch := map[string]any{"batch": "batch-0001", "exposures": []any{
		map[string]any{"feature": "limit", "feature_id": f.ID, "version": 1, "bucket": "low", "count": 5},
		map[string]any{"feature": "limit", "feature_id": f.ID, "version": 1, "bucket": "high", "count": 2},
	}}
	r := s.Must(http.StatusOK, "POST", "/api/exposures", batch)
	if got := string(r.Body); got != `{"batch":"batch-0001","added":true,"counted":2,"skipped":[]}`+"\n" {
		t.Errorf("POST /api/exposures = %s, want added", got)
	}
	r = s.Must(http.StatusOK, "POST", "/api/exposures", batch)
	if got := string(r.Body); got != `{"batch":"batch-0001","added":false,"counted":0,"skipped":[]}`+"\n" {
		t.Errorf("POST /api/exposures again = %s, want not added", got)
	}
	r = s.Must(http.StatusOK, "GET", "/api/features/limit/exposures", nil)
	var rep exposure.Report
	json.Unmarshal(r.Body, &rep)
	if rep.Total != 7 {
		t.Errorf("exposures of limit: total %d, want 7 (one batch sent twice)", rep.Total)
	}

	for _, tt := range []struct {
		name   string
		body   any
		status int
		code   string
	}{
		{"not JSON", "batch", http.StatusBadRequest, "bad_request"},
		{"unknown field", map[string]any{"batch": "batch-0002", "counts": []any{}}, http.StatusBadRequest, "bad_request"},
		{"no batch ID", map[string]any{"exposures": []any{}}, http.StatusUnprocessableEntity, "invalid"},
		{"count of 0", map[string]any{"batch": "batch-0002", "exposures": []any{map[string]any{"feature_id": f.ID, "version": 1, "bucket": "low", "count": 0}}}, http.StatusUnprocessableEntity, "invalid"},
		{"count not a number", map[string]any{"batch": "batch-0002", "exposures": []any{map[string]any{"feature_id": f.ID, "version": 1, "count": "5"}}}, http.StatusBadRequest, "bad_request"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := s.Do("POST", "/api/exposures", tt.body)
			if r.Status != tt.status || !strings.Contains(string(r.Body), `"code":"`+tt.code+`"`) {
				t.Errorf("POST /api/exposures = %d %s, want %d %s", r.Status, r.Body, tt.status, tt.code)
			}
		})
	}
}
