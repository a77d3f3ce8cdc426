package evaluation_test

import (
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

// The API as package evaluation's routes are served: package api's router,
// over a real SQLite store. These helpers are a copy of package api's test
// helpers that the tests of evaluation's routes use.

// testServer is the API over a real SQLite store in a temporary directory,
// served on a loopback port.
type testServer struct {
	t      testing.TB
	URL    string
	svc    *rollout.Service
	db     *store.DB
	dbPath string
}

// newServer starts the API on 127.0.0.1 over a new database at dbPath ("":
// a temporary one). opts.Ready defaults to the store's Ping.
func newServer(t testing.TB, dbPath string, opts api.Options) *testServer {
	t.Helper()
	return newServerOver(t, dbPath, opts, nil)
}

// newServerOver is newServer with the service's store wrapped by wrap, when
// not nil.
func newServerOver(t testing.TB, dbPath string, opts api.Options, wrap func(rollout.Store) rollout.Store) *testServer {
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
	return &testServer{t: t, URL: srv.URL, svc: svc, db: db, dbPath: dbPath}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(r.body, &v); err != nil {
		t.Fatalf("answer %d is not a JSON object: %v: %s", r.status, err, r.body)
	}
	return v
}

// do sends a request; body is sent as is when a string, and as JSON
// otherwise. header holds name, value pairs.
func (s *testServer) do(method, path string, body any, header ...string) response {
	s.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, err := json.Marshal(b)
		if err != nil {
			s.t.Fatal(err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequest(method, s.URL+path, rd)
	if err != nil {
		s.t.Fatal(err)
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
		s.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	data, err := io.ReadAll(res.Body)
	if err != nil {
		s.t.Fatal(err)
	}
	return response{status: res.StatusCode, header: res.Header, body: data}
}

// must sends a request and fails the test unless it answers want.
func (s *testServer) must(want int, method, path string, body any, header ...string) response {
	s.t.Helper()
	r := s.do(method, path, body, header...)
	if r.status != want {
		s.t.Fatalf("%s %s = %d %s, want %d", method, path, r.status, r.body, want)
	}
	return r
}

// create stores f through the service, with the salt its key unless given.
func (s *testServer) create(f feature.Feature) {
	s.t.Helper()
	if _, err := s.svc.Create(context.Background(), f, rollout.ChangeOptions{}); err != nil {
		s.t.Fatalf("create %s: %v", f.Key, err)
	}
}

// seed creates the features the OFREP tests evaluate: string, boolean,
// object and number values, an override, and two disabled features, one with
// a fallback bucket.
func (s *testServer) seed() {
	s.t.Helper()
	raw := func(v string) json.RawMessage { return json.RawMessage(v) }
	s.create(feature.Feature{Key: "checkout", Enabled: true, Salt: "",
		Buckets:   []feature.Bucket{{Name: "A", Replicas: 3}, {Name: "B", Replicas: 3}, {Name: "C", Replicas: 3}},
		Overrides: map[string]string{"vip": "C"}})
	s.create(feature.Feature{Key: "dark-mode", Enabled: true, Salt: "dark-mode",
		Buckets: []feature.Bucket{{Name: "on", Replicas: 100, Value: raw("true")}, {Name: "off", Replicas: 100, Value: raw("false")}}})
	s.create(feature.Feature{Key: "banner", Enabled: true, Salt: "banner",
		Buckets: []feature.Bucket{
			{Name: "blue", Replicas: 100, Value: raw(`{"color":"blue","size":3}`)},
			{Name: "red", Replicas: 100, Value: raw(`{"color":"red","size":1}`)},
		}})
	s.create(feature.Feature{Key: "limit", Enabled: true, Salt: "limit",
		Buckets: []feature.Bucket{{Name: "low", Replicas: 100, Value: raw("10")}, {Name: "high", Replicas: 100, Value: raw("20")}}})
	s.create(feature.Feature{Key: "paused", Enabled: false, Salt: "paused", Fallback: "old",
		Buckets: []feature.Bucket{{Name: "old", Replicas: 100, Value: raw(`"old-flow"`)}, {Name: "new", Replicas: 100, Value: raw(`"new-flow"`)}}})
	s.create(feature.Feature{Key: "killed", Enabled: false, Salt: "killed",
		Buckets: []feature.Bucket{{Name: "A", Replicas: 100}, {Name: "B", Replicas: 100}}})
}

// evaluate returns the service's own evaluation, which answers must match.
func (s *testServer) evaluate(key, user string) feature.Evaluation {
	s.t.Helper()
	e, err := s.svc.Evaluate(key, user)
	if err != nil {
		s.t.Fatalf("Evaluate(%q, %q): %v", key, user, err)
	}
	return e
}

func newRulesServer(t *testing.T) *testServer {
	s := newServer(t, "", api.Options{})
	s.create(feature.Feature{Key: "checkout", Enabled: true, Salt: "checkout",
		Buckets: []feature.Bucket{{Name: "off", Replicas: 100}, {Name: "on", Replicas: 100}}})
	return s
}

// scrape reads GET /metrics as Prometheus does.
func (s *testServer) scrape() map[string]*dto.MetricFamily {
	s.t.Helper()
	res, err := http.Get(s.URL + "/metrics")
	if err != nil {
		s.t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		s.t.Fatalf("GET /metrics = %d", res.StatusCode)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		s.t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// sample returns the value of the sample of the metric name whose labels are
// exactly labels (name=value pairs): a counter's or gauge's value, a
// histogram's count. ok is false when there is none.
func sample(fams map[string]*dto.MetricFamily, name string, labels ...string) (v float64, ok bool) {
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

func ptr[T any](v T) *T { return &v }

// jsonText is s as it appears inside a JSON string.
func jsonText(s string) string {
	b, _ := json.Marshal(s)
	return string(b[1 : len(b)-1])
}
