package api_test

import (
	"net/http"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/api/internal/apitest"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store"
)

// testServer is the API over a real SQLite store in a temporary directory,
// served on a loopback port: an apitest.Server under the names these tests
// use.
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
	h := apitest.NewOver(t, dbPath, opts, wrap)
	return &testServer{t: t, URL: h.URL, svc: h.Svc, db: h.DB, dbPath: h.DBPath}
}

// harness is s as an apitest.Server.
func (s *testServer) harness() *apitest.Server {
	return &apitest.Server{T: s.t, URL: s.URL, Svc: s.svc, DB: s.db, DBPath: s.dbPath}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

func answered(r apitest.Response) response {
	return response{status: r.Status, header: r.Header, body: r.Body}
}

func (r response) json(t *testing.T) map[string]any {
	t.Helper()
	return apitest.Response{Status: r.status, Header: r.header, Body: r.body}.JSON(t)
}

// do sends a request; body is sent as is when a string, and as JSON
// otherwise. header holds name, value pairs.
func (s *testServer) do(method, path string, body any, header ...string) response {
	s.t.Helper()
	return answered(s.harness().Do(method, path, body, header...))
}

// must sends a request and fails the test unless it answers want.
func (s *testServer) must(want int, method, path string, body any, header ...string) response {
	s.t.Helper()
	return answered(s.harness().Must(want, method, path, body, header...))
}

// create stores f through the service, with the salt its key unless given.
func (s *testServer) create(f feature.Feature) { s.t.Helper(); s.harness().Create(f) }

// seed creates the features the OFREP tests evaluate (apitest's Seed).
func (s *testServer) seed() { s.t.Helper(); s.harness().Seed() }

// evaluate returns the service's own evaluation, which answers must match.
func (s *testServer) evaluate(key, user string) feature.Evaluation {
	s.t.Helper()
	return s.harness().Evaluate(key, user)
}

// scrape reads GET /metrics as Prometheus does.
func (s *testServer) scrape() map[string]*dto.MetricFamily { return s.harness().Scrape() }

// sample is apitest.Sample.
var sample = apitest.Sample

// ofrepFlags is the path of OFREP's bulk evaluation (package evaluation).
const ofrepFlags = "/ofrep/v1/evaluate/flags"

// ofrepBody is the body of an OFREP evaluation for user.
func ofrepBody(user string) map[string]any {
	return map[string]any{"context": map[string]any{"targetingKey": user}}
}
