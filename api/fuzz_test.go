package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store/sqlite"
)

// FuzzRequests sends arbitrary requests through the real router over a real
// store: no input may cause a 5xx or a panic, and every error is JSON.
func FuzzRequests(f *testing.F) {
	seeds := []struct {
		method     uint8
		path, body string
		ifMatch    string
	}{
		{0, "/evaluate?feature=f&user=u", "", ""},
		{1, "/evaluate", `{"user":"u","features":["f","nope"]}`, ""},
		{1, "/api/features", `{"key":"g","buckets":[{"name":"A","replicas":3,"value":{"x":[1,2]}}]}`, ""},
		{1, "/api/features/f/buckets?max_churn=0.1", `{"name":"D","replicas":3}`, `"1"`},
		{2, "/api/features/f/buckets/A", `{"replicas":1001}`, `"abc"`},
		{3, "/api/features/f", `{"enabled":false,"fallback":"A"}`, ""},
		{4, "/api/features/f/overrides/%ff", "", ""},
		{1, "/api/features/f/preview", `{"buckets":[{"name":"A#1"}]}`, ""},
		{1, "/api/features/f/rollback", `{"version":1e99}`, ""},
		{1, "/ofrep/v1/evaluate/flags/f", `{"context":{"targetingKey":"u"}}`, ""},
		{1, "/ofrep/v1/evaluate/flags", `{"context":{"targetingKey":"u","flags":["f",1]}}`, `"x"`},
		{0, "/api/features/f/versions?before=-1&limit=x", "", ""},
	}
	for _, s := range seeds {
		f.Add(s.method, s.path, []byte(s.body), s.ifMatch)
	}
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(f.TempDir(), "rollout.db"))
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { db.Close() })
	svc, err := rollout.NewService(ctx, db, nil)
	if err != nil {
		f.Fatal(err)
	}
	feat := feature.Feature{Key: "f", Enabled: true, Salt: "f", Buckets: []feature.Bucket{{Name: "A", Replicas: 3}, {Name: "B", Replicas: 3}}}
	if _, err := svc.Create(ctx, feat, rollout.ChangeOptions{}); err != nil {
		f.Fatal(err)
	}
	e := api.New(svc, api.Options{})
	methods := []string{"GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"}

	f.Fuzz(func(t *testing.T, method uint8, path string, body []byte, ifMatch string) {
		if !strings.HasPrefix(path, "/") {
			path = "/" + path
		}
		req, err := http.NewRequest(methods[int(method)%len(methods)], "http://rollout.test"+path, bytes.NewReader(body))
		if err != nil {
			return // not a URL a client could send
		}
		if ifMatch != "" && !strings.ContainsAny(ifMatch, "\r\n\x00") {
			req.Header.Set("If-Match", ifMatch)
		}
		rec := httptest.NewRecorder()
		e.ServeHTTP(rec, req)
		if rec.Code >= 500 {
			t.Fatalf("%s %s %q = %d %s", req.Method, path, body, rec.Code, rec.Body)
		}
		if rec.Code >= 400 && req.Method != "HEAD" && !json.Valid(rec.Body.Bytes()) {
			t.Fatalf("%s %s %q = %d with a body that is not JSON: %s", req.Method, path, body, rec.Code, rec.Body)
		}
	})
}
