package api_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/internal/storemetrics"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store/sqlite"
)

// The evaluation endpoints are measured through the real echo router, its
// whole middleware chain and a service over SQLite, by calling ServeHTTP in
// process, so that what is measured is the router's and handlers' cost
// rather than the network's. Each sits beside its baseline: a bare
// http.HandlerFunc answering a constant JSON body of the same size, called
// the same way. Issue #7 compares them over the network with
// cmd/rollout-bench.

// benchFeatures is how many features the bulk benchmarks evaluate.
const benchFeatures = 20

// benchAPI is the API over a new database holding benchFeatures features
// of 4 buckets × 100 replicas, its service, and the secret of an
// evaluate-role token when withToken is set (the token is then required).
func benchAPI(b *testing.B, withToken bool) (http.Handler, *rollout.Service, string) {
	b.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "rollout.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { db.Close() })
	metrics := api.NewMetrics()
	svc, err := rollout.NewService(ctx, storemetrics.New(metrics.Registry(), db), nil)
	if err != nil {
		b.Fatal(err)
	}
	for i := range benchFeatures {
		f := feature.Feature{Key: fmt.Sprintf("feature-%02d", i), Enabled: true, Salt: fmt.Sprintf("feature-%02d", i),
			Buckets: []feature.Bucket{{Name: "control", Replicas: 100}, {Name: "A", Replicas: 100}, {Name: "B", Replicas: 100}, {Name: "C", Replicas: 100}}}
		if _, err := svc.Create(ctx, f, rollout.ChangeOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	opts := api.Options{Metrics: metrics, Ready: db.Ping}
	var secret string
	if withToken {
		tokens, err := auth.NewTokens(ctx, db, nil)
		if err != nil {
			b.Fatal(err)
		}
		if _, secret, err = tokens.Create(ctx, "bench", auth.RoleEvaluate, time.Now()); err != nil {
			b.Fatal(err)
		}
		opts.Auth = api.NewAuth(tokens, nil)
	}
	return api.New(svc, opts), svc, secret
}

// benchRequest is a request the benchmarks send again and again: a template
// copied into one reused request, with its body rewound each time.
type benchRequest struct {
	template *http.Request
	body     []byte
	r        http.Request
	rd       benchBody
}

type benchBody struct{ bytes.Reader }

func (*benchBody) Close() error { return nil }

func newBenchRequest(method, target, body, secret string) *benchRequest {
	br := &benchRequest{template: httptest.NewRequest(method, target, nil), body: []byte(body)}
	if body != "" {
		br.template.Header.Set("Content-Type", "application/json")
		br.template.ContentLength = int64(len(body))
	}
	if secret != "" {
		br.template.Header.Set("Authorization", "Bearer "+secret)
	}
	return br
}

// next returns the request, ready to be served once more.
func (br *benchRequest) next() *http.Request {
	br.r = *br.template
	if len(br.body) > 0 {
		br.rd.Reset(br.body)
		br.r.Body = &br.rd
	}
	return &br.r
}

// benchWriter is a ResponseWriter that keeps the status and counts the
// bytes, reused from one request to the next.
type benchWriter struct {
	header http.Header
	status int
	n      int
}

func (w *benchWriter) Header() http.Header { return w.header }

func (w *benchWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *benchWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.n += len(p)
	return len(p), nil
}

func (w *benchWriter) reset() {
	clear(w.header)
	w.status, w.n = 0, 0
}

// bare is the baseline: a handler that answers body, whatever is asked.
func bare(body []byte) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header()["Content-Type"] = []string{"application/json"}
		w.Write(body)
	})
}

// benchEndpoint measures one request to the API beside the bare handler
// answering a body of the same size as the API's answer.
func benchEndpoint(b *testing.B, method, target, body string) {
	for _, withToken := range []bool{false, true} {
		h, _, secret := benchAPI(b, withToken)
		br := newBenchRequest(method, target, body, secret)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, br.next())
		if rec.Code != http.StatusOK {
			b.Fatalf("%s %s = %d %s, want 200", method, target, rec.Code, rec.Body)
		}
		answer := rec.Body.Bytes()
		if !withToken {
			b.Run("baseline", func(b *testing.B) { benchServe(b, bare(bytes.Clone(answer)), br, len(answer)) })
			b.Run("api", func(b *testing.B) { benchServe(b, h, br, len(answer)) })
		} else {
			b.Run("api-token", func(b *testing.B) { benchServe(b, h, br, len(answer)) })
		}
	}
}

func benchServe(b *testing.B, h http.Handler, br *benchRequest, size int) {
	w := &benchWriter{header: http.Header{}}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		w.reset()
		h.ServeHTTP(w, br.next())
		if w.status != http.StatusOK || w.n != size {
			b.Fatalf("answered %d with %d bytes, want 200 with %d", w.status, w.n, size)
		}
	}
}

func BenchmarkEvaluateGet(b *testing.B) {
	benchEndpoint(b, http.MethodGet, "/evaluate?feature=feature-07&user=user-4711@example.com", "")
}

func BenchmarkEvaluatePostTwenty(b *testing.B) {
	keys := make([]string, benchFeatures)
	for i := range keys {
		keys[i] = fmt.Sprintf("%q", fmt.Sprintf("feature-%02d", i))
	}
	body := `{"user":"user-4711@example.com","features":[` + strings.Join(keys, ",") + `]}`
	benchEndpoint(b, http.MethodPost, "/evaluate", body)
}

func BenchmarkOFREPEvaluate(b *testing.B) {
	benchEndpoint(b, http.MethodPost, "/ofrep/v1/evaluate/flags/feature-07", `{"context":{"targetingKey":"user-4711@example.com"}}`)
}

func BenchmarkOFREPBulkTwenty(b *testing.B) {
	keys := make([]string, benchFeatures)
	for i := range keys {
		keys[i] = fmt.Sprintf("%q", fmt.Sprintf("feature-%02d", i))
	}
	benchEndpoint(b, http.MethodPost, "/ofrep/v1/evaluate/flags", `{"context":{"targetingKey":"user-4711@example.com","flags":[`+strings.Join(keys, ",")+`]}}`)
}

// BenchmarkBucketChange is one change of a bucket's replicas through the
// API on a feature of 10 buckets × 100 replicas: the transaction, the churn
// report and the snapshot swap. Issue #7's target is a p50 under 5 ms.
func BenchmarkBucketChange(b *testing.B) {
	h, svc, _ := benchAPI(b, false)
	f := feature.Feature{Key: "writes", Enabled: true, Salt: "writes"}
	for i := range 10 {
		f.Buckets = append(f.Buckets, feature.Bucket{Name: fmt.Sprintf("b%d", i), Replicas: 100})
	}
	if _, err := svc.Create(context.Background(), f, rollout.ChangeOptions{}); err != nil {
		b.Fatal(err)
	}
	w := &benchWriter{header: http.Header{}}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		// Each bucket in turn to 101 replicas, then back to 100.
		br := newBenchRequest(http.MethodPut, fmt.Sprintf("/api/features/writes/buckets/b%d", i%10), fmt.Sprintf(`{"replicas":%d}`, 101-i/10%2), "")
		w.reset()
		h.ServeHTTP(w, br.next())
		if w.status != http.StatusOK {
			b.Fatalf("change %d answered %d", i, w.status)
		}
	}
}
