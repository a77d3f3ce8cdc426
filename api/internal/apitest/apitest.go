// Package apitest is the test harness of the API's packages (api,
// api/evaluation, api/stream): the API served on a loopback port over a
// real SQLite store in a temporary directory (New, NewOver), requests to it
// (Do, Must), lines of a stream (ReadUntil), the features the evaluation tests use (Seed), and its metrics
// as Prometheus scrapes them (Scrape, Sample). Tests only import it; it is
// this one file.
package apitest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/internal/storemetrics"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store"
	"github.com/rollout/rollout/store/sqlite"
)

// Server is the API over a real SQLite store in a temporary directory,
// served on a loopback port.
type Server struct {
	T      testing.TB
	URL    string
	Svc    *rollout.Service
	DB     *store.DB
	DBPath string
}

// New starts the API on 127.0.0.1 over a new database at dbPath ("":
// a temporary one). opts.Ready defaults to the store's Ping.
func New(t testing.TB, dbPath string, opts api.Options) *Server {
	t.Helper()
	return NewOver(t, dbPath, opts, nil)
}

// NewOver is New with the service's store wrapped by wrap, when
// not nil.
func NewOver(t testing.TB, dbPath string, opts api.Options, wrap func(rollout.Store) rollout.Store) *Server {
	t.Helper()
	if dbPath == "" {
		dbPath = filepath.Join(t.TempDir(), "rollout.db")
	}
	db, err := sqlite.Open(context.Background(), dbPath)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	if opts.Metrics == nil {
		opts.Metrics = api.NewMetrics()
	}
	if opts.Ready == nil {
		opts.Ready = db.Ping
	}
	var st rollout.Store = db
	if wrap != nil {
		st = wrap(st)
	}
	svc, err := rollout.NewService(context.Background(), storemetrics.New(opts.Metrics.Registry(), st), nil)
	if err != nil {
		db.Close()
		t.Fatalf("new service: %v", err)
	}
	srv := httptest.NewServer(api.New(svc, opts))
	t.Cleanup(func() {
		srv.Close()
		if err := db.Close(); err != nil {
			t.Errorf("close store: %v", err)
		}
	})
	return &Server{T: t, URL: srv.URL, Svc: svc, DB: db, DBPath: dbPath}
}

// Response is an answer of the API.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON is the answer's body as a JSON object; it fails the test when it
// is not one.

func (r Response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("answer %d is not a JSON object: %v: %s", r.Status, err, r.Body)
	}
	return v
}

// Do sends a request; body is sent as is when a string, and as JSON
// otherwise. header holds name, value pairs.
func (s *Server) Do(method, path string, body any, header ...string) Response {
	s.T.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			s.T.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, s.URL+path, rd)
	if err != nil {
		s.T.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
		}
		req.Header.Set(header[i], header[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		s.T.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		s.T.Fatal(err)
	}
	return Response{Status: res.StatusCode, Header: res.Header, Body: data}
}

// Must sends a request and fails the test unless it answers want.
func (s *Server) Must(want int, method, path string, body any, header ...string) Response {
	s.T.Helper()
	r := s.Do(method, path, body, header...)
	if r.Status != want {
		s.T.Fatalf("%s %s = %d %s, want %d", method, path, r.Status, r.Body, want)
	}
	return r
}

// Create stores f through the service, with the salt its key unless given.
func (s *Server) Create(f feature.Feature) {
	s.T.Helper()
	if _, err := s.Svc.Create(context.Background(), f, rollout.ChangeOptions{}); err != nil {
		s.T.Fatalf("create %s: %v", f.Key, err)
	}
}

// Seed creates the features the OFREP tests evaluate: string, boolean,
// object and number values, an override, and two disabled features, one with
// a fallback bucket.
func (s *Server) Seed() {
	s.T.Helper()
	raw := func(v string) json.RawMessage { return json.RawMessage(v) }
	s.Create(feature.Feature{Key: "checkout", Enabled: true, Salt: "",
		Buckets:   []feature.Bucket{{Name: "A", Replicas: 3}, {Name: "B", Replicas: 3}, {Name: "C", Replicas: 3}},
		Overrides: map[string]string{"vip": "C"}})
	s.Create(feature.Feature{Key: "dark-mode", Enabled: true, Salt: "dark-mode",
		Buckets: []feature.Bucket{{Name: "on", Replicas: 100, Value: raw("true")}, {Name: "off", Replicas: 100, Value: raw("false")}}})
	s.Create(feature.Feature{Key: "banner", Enabled: true, Salt: "banner",
		Buckets: []feature.Bucket{
			{Name: "blue", Replicas: 100, Value: raw(`{"color":"blue","size":3}`)},
			{Name: "red", Replicas: 100, Value: raw(`{"color":"red","size":1}`)},
		}})
	s.Create(feature.Feature{Key: "limit", Enabled: true, Salt: "limit",
		Buckets: []feature.Bucket{{Name: "low", Replicas: 100, Value: raw("10")}, {Name: "high", Replicas: 100, Value: raw("20")}}})
	s.Create(feature.Feature{Key: "paused", Enabled: false, Salt: "paused", Fallback: "old",
		Buckets: []feature.Bucket{{Name: "old", Replicas: 100, Value: raw(`"old-flow"`)}, {Name: "new", Replicas: 100, Value: raw(`"new-flow"`)}}})
	s.Create(feature.Feature{Key: "killed", Enabled: false, Salt: "killed",
		Buckets: []feature.Bucket{{Name: "A", Replicas: 100}, {Name: "B", Replicas: 100}}})
}

// Evaluate returns the service's own evaluation, which answers must match.
func (s *Server) Evaluate(key, user string) feature.Evaluation {
	s.T.Helper()
	e, err := s.Svc.Evaluate(key, user)
	if err != nil {
		s.T.Fatalf("Evaluate(%q, %q): %v", key, user, err)
	}
	return e
}

// Scrape reads GET /metrics as Prometheus does.
func (s *Server) Scrape() map[string]*dto.MetricFamily {
	s.T.Helper()
	res, err := http.Get(s.URL + "/metrics")
	if err != nil {
		s.T.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		s.T.Fatalf("GET /metrics = %d", res.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		s.T.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// Sample returns the value of the sample of the metric name whose labels are
// exactly labels (name=value pairs): a counter's or gauge's value, a
// histogram's count. ok is false when there is none.
func Sample(fams map[string]*dto.MetricFamily, name string, labels ...string) (v float64, ok bool) {
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	fam := fams[name]
	if fam == nil {
		return 0, false
	}
next:
	for _, m := range fam.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			if l.GetValue() != "" {
				got[l.GetName()] = l.GetValue()
			}
		}
		if len(got) != len(want) {
			continue
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// ReadUntil reads lines until one is want, returning the last one read (a
// stream's event line, say).
func ReadUntil(r *bufio.Reader, want string) (string, error) {
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return line, err
		}
		if strings.TrimSuffix(line, "\n") == want {
			return line, nil
		}
	}
}
