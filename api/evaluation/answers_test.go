package evaluation_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/api/internal/apitest"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store/sqlite"
)

// TestAnswersFollowChanges: the answers the API encodes once per outcome
// are those of the feature as it is now, after every kind of change: a new
// value, the kill switch with and without a fallback, an override, and the
// feature deleted and made again with other buckets at version 1.
func TestAnswersFollowChanges(t *testing.T) {
	s := apitest.New(t, "", api.Options{})
	ctx := context.Background()
	raw := func(v string) json.RawMessage { return json.RawMessage(v) }
	s.Create(feature.Feature{Key: "f", Enabled: true, Salt: "f",
		Buckets: []feature.Bucket{{Name: "a", Replicas: 50, Value: raw(`1`)}, {Name: "b", Replicas: 50, Value: raw(`2`)}}})
	users := make([]string, 40)
	for i := range users {
		users[i] = fmt.Sprintf("user-%d", i)
	}
	check := func(step string) {
		t.Helper()
		for _, u := range users {
			want := s.Evaluate("f", u)
			var got struct {
				Bucket  *string
				Value   json.RawMessage
				Version int
				Reason  string
			}
			r := s.Must(200, "GET", "/evaluate?"+url.Values{"feature": {"f"}, "user": {u}}.Encode(), nil)
			if err := json.Unmarshal(r.Body, &got); err != nil {
				t.Fatal(err)
			}
			bucket := ""
			if got.Bucket != nil {
				bucket = *got.Bucket
			}
			value := string(want.Value)
			if want.Bucket == "" {
				value = "null"
			}
			if bucket != want.Bucket || string(got.Value) != value || got.Version != want.Version || got.Reason != want.Reason {
				t.Fatalf("%s: GET /evaluate for %s = %s, want %+v", step, u, r.Body, want)
			}
			var many struct {
				Results map[string]struct {
					Bucket  *string
					Version int
				}
			}
			r = s.Must(200, "POST", "/evaluate", map[string]any{"user": u, "features": []string{"f"}})
			if err := json.Unmarshal(r.Body, &many); err != nil {
				t.Fatal(err)
			}
			if res := many.Results["f"]; res.Version != want.Version || (res.Bucket == nil) != (want.Bucket == "") || res.Bucket != nil && *res.Bucket != want.Bucket {
				t.Fatalf("%s: POST /evaluate for %s = %s, want %+v", step, u, r.Body, want)
			}
			var of struct {
				Variant  string
				Metadata struct{ Version int }
			}
			r = s.Must(200, "POST", "/ofrep/v1/evaluate/flags/f", ofrepBody(u))
			if err := json.Unmarshal(r.Body, &of); err != nil {
				t.Fatal(err)
			}
			if of.Variant != want.Bucket || of.Metadata.Version != want.Version {
				t.Fatalf("%s: OFREP for %s = %s, want %+v", step, u, r.Body, want)
			}
		}
	}
	check("created")
	apply := func(step string, c change.Change) {
		t.Helper()
		if _, err := s.Svc.Change(ctx, "f", c, rollout.ChangeOptions{}); err != nil {
			t.Fatalf("%s: %v", step, err)
		}
		check(step)
	}
	apply("new value", change.UpdateBucket("a", nil, raw(`"one"`)))
	apply("override", change.SetOverride(users[0], "b"))
	apply("switched off with a fallback", change.Patch(nil, ptr(false), ptr("b")))
	apply("switched off without one", change.Patch(nil, nil, ptr("")))
	if _, err := s.Svc.Archive(ctx, "f", rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := s.Svc.Purge(ctx, "f", rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Create(feature.Feature{Key: "f", Enabled: true, Salt: "f",
		Buckets: []feature.Bucket{{Name: "a", Replicas: 10, Value: raw(`"again"`)}, {Name: "c", Replicas: 90, Value: raw(`3`)}}})
	check("deleted and made again")
}

// unsized is a body of unknown length: the client sends it chunked, with no
// Content-Length for the server to refuse at once.
type unsized struct{ io.Reader }

// TestChunkedBodyTooLarge: a body over api.MaxBodyBytes sent without a
// length is refused with 413 by each evaluation route that reads its body
// itself, and nothing is evaluated.
func TestChunkedBodyTooLarge(t *testing.T) {
	s := apitest.New(t, "", api.Options{})
	s.Create(feature.Feature{Key: "f", Enabled: true, Salt: "f", Buckets: []feature.Bucket{{Name: "a", Replicas: 1}}})
	big := strings.Repeat("u", api.MaxBodyBytes)
	for _, tt := range []struct{ path, body string }{
		{"/evaluate", `{"features":["f"],"user":"` + big + `"}`},
		{"/ofrep/v1/evaluate/flags/f", `{"context":{"targetingKey":"` + big + `"}}`},
		{"/ofrep/v1/evaluate/flags", `{"context":{"targetingKey":"` + big + `"}}`},
	} {
		req, err := http.NewRequest("POST", s.URL+tt.path, unsized{strings.NewReader(tt.body)})
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusRequestEntityTooLarge {
			t.Errorf("POST %s of %d bytes, chunked: %d %s, want 413", tt.path, len(tt.body), res.StatusCode, data)
		}
	}
}

// TestAnswersOfTwoAPIs: two APIs over one service each count their own
// evaluations, though the answers they encode are kept with the outcomes
// the service's snapshot shares between them.
func TestAnswersOfTwoAPIs(t *testing.T) {
	first := apitest.New(t, "", api.Options{})
	first.Create(feature.Feature{Key: "f", Enabled: true, Buckets: []feature.Bucket{{Name: "only", Replicas: 1}}})
	srv := httptest.NewServer(api.New(first.Svc, api.Options{Metrics: api.NewMetrics()}))
	t.Cleanup(srv.Close)
	second := &apitest.Server{T: t, URL: srv.URL, Svc: first.Svc}
	for i := range 6 {
		s := []*apitest.Server{first, second}[i%2]
		s.Must(200, "GET", fmt.Sprintf("/evaluate?feature=f&user=u%d", i), nil)
	}
	for name, s := range map[string]*apitest.Server{"first": first, "second": second} {
		if v, _ := apitest.Sample(s.Scrape(), "rollout_evaluations_total", "feature", "f", "bucket", "only", "reason", "ring"); v != 3 {
			t.Errorf("%s API counted %v evaluations, want 3", name, v)
		}
	}
}

// TestEvaluateAnswersAreEncodingJSON: through the router, every answer of
// /evaluate is byte for byte what encoding/json writes, which ?pretty still
// uses: compacted, the pretty answer is the plain one.
func TestEvaluateAnswersAreEncodingJSON(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	svc, err := rollout.NewService(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	raw := func(v string) json.RawMessage { return json.RawMessage(v) }
	for _, f := range []feature.Feature{
		{Key: "html", Enabled: true, Salt: "html", Overrides: map[string]string{"<vip>": "b"},
			Buckets: []feature.Bucket{{Name: "a", Replicas: 50, Value: raw(`"<b>a & b</b>"`)}, {Name: "b", Replicas: 50, Value: raw(`{"text": "x y", "n": [1, 2]}`)}}},
		{Key: "unicode", Enabled: true, Salt: "", Buckets: []feature.Bucket{{Name: "a", Replicas: 10, Value: raw(`"café \u2028"`)}, {Name: "b", Replicas: 10}}},
		{Key: "killed", Enabled: false, Salt: "killed", Buckets: []feature.Bucket{{Name: "a", Replicas: 10}}},
		{Key: "paused", Enabled: false, Salt: "paused", Fallback: "a", Buckets: []feature.Bucket{{Name: "a", Replicas: 10, Value: raw(`true`)}}},
	} {
		if _, err := svc.Create(ctx, f, rollout.ChangeOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e := api.New(svc, api.Options{})
	serve := func(method, target, body string) string {
		t.Helper()
		w := httptest.NewRecorder()
		e.ServeHTTP(w, httptest.NewRequest(method, target, strings.NewReader(body)))
		if w.Code != http.StatusOK {
			t.Fatalf("%s %s %s = %d %s, want 200", method, target, body, w.Code, w.Body)
		}
		return w.Body.String()
	}
	users := []string{"u1", "<vip>", "a&b", "zoë", "x\u2028y", "tab\tq\"uote"}
	for _, key := range []string{"html", "unicode", "killed", "paused"} {
		for _, u := range users {
			target := "/evaluate?" + url.Values{"feature": {key}, "user": {u}}.Encode()
			plain, pretty := serve("GET", target, ""), serve("GET", target+"&pretty", "")
			var compact bytes.Buffer
			if err := json.Compact(&compact, []byte(pretty)); err != nil {
				t.Fatal(err)
			}
			if got, want := plain, compact.String()+"\n"; got != want {
				t.Errorf("GET %s = %s, want %s", target, got, want)
			}
		}
	}
	for _, body := range []string{
		`{"user":"u1"}`,
		`{"user":"<vip>","features":["unicode","html","nope","<nope>","html","killed","paused"]}`,
		`{"features":["html"],"user":"a\u0026b"}`,
		`{"user":"u1","features":[]}`,
	} {
		plain, pretty := serve("POST", "/evaluate", body), serve("POST", "/evaluate?pretty", body)
		var compact bytes.Buffer
		if err := json.Compact(&compact, []byte(pretty)); err != nil {
			t.Fatal(err)
		}
		if got, want := plain, compact.String()+"\n"; got != want {
			t.Errorf("POST /evaluate %s = %s, want %s", body, got, want)
		}
	}
}
