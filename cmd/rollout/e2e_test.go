package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rollout/rollout/cmd/internal/serve"
)

// The API's own tests (package api) drive it in process; the tests here
// drive the binary's wiring (serve.Server) and its commands, with these
// helpers.

// server is a running rollout service on a loopback port with its own
// database file.
type server struct {
	t      *testing.T
	m      *serve.Server
	dbPath string
}

func startServer(t *testing.T, dbPath string) *server {
	t.Helper()
	if dbPath == "" {
		dbPath = filepath.Join(t.TempDir(), "rollout.db")
	}
	m := &serve.Server{Addr: "127.0.0.1:0", DBPath: dbPath}
	if err := m.Open(context.Background()); err != nil {
		t.Fatalf("open server: %v", err)
	}
	s := &server{t: t, m: m, dbPath: dbPath}
	t.Cleanup(func() { s.stop() })
	return s
}

func (s *server) stop() {
	if s.m != nil {
		if err := s.m.Close(); err != nil {
			s.t.Errorf("close server: %v", err)
		}
		s.m = nil
	}
}

// restart stops the server and starts a new one on the same database.
func (s *server) restart() {
	s.t.Helper()
	s.stop()
	*s = *startServer(s.t, s.dbPath)
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
		t.Fatalf("response %d is not a JSON object: %v: %s", r.status, err, r.body)
	}
	return v
}

// errorCode returns the code of an error answer, or "".
func (r response) errorCode() string {
	var v struct {
		Error struct{ Code, Message string }
	}
	if json.Unmarshal(r.body, &v) != nil {
		return ""
	}
	return v.Error.Code
}

// do sends a request; body is sent as JSON unless it is a string.
func (s *server) do(method, path string, body any, header ...string) response {
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
	req, err := http.NewRequest(method, s.m.URL()+path, rd)
	if err != nil {
		s.t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
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
func (s *server) must(want int, method, path string, body any, header ...string) map[string]any {
	s.t.Helper()
	r := s.do(method, path, body, header...)
	if r.status != want {
		s.t.Fatalf("%s %s = %d %s, want %d", method, path, r.status, r.body, want)
	}
	if r.status == http.StatusNoContent || r.status == http.StatusNotModified {
		return nil
	}
	return r.json(s.t)
}

func (s *server) evaluate(feature, user string) map[string]any {
	s.t.Helper()
	return s.must(200, "GET", "/evaluate?feature="+url.QueryEscape(feature)+"&user="+url.QueryEscape(user), nil)
}

func abcFeature(key string) map[string]any {
	return map[string]any{
		"key": key, "salt": "",
		"buckets": []map[string]any{{"name": "A", "replicas": 3}, {"name": "B", "replicas": 3}, {"name": "C", "replicas": 3}},
	}
}

// dump is every feature and its history as the API shows them.
func dump(t *testing.T, s *server) string {
	t.Helper()
	var b bytes.Buffer
	fs := s.must(200, "GET", "/api/features", nil)
	json.NewEncoder(&b).Encode(fs)
	for _, f := range fs["features"].([]any) {
		key := f.(map[string]any)["key"].(string)
		json.NewEncoder(&b).Encode(s.must(200, "GET", "/api/features/"+key+"/versions", nil))
	}
	return b.String()
}

// checkOneWinner fails the test unless exactly one of a round's writers,
// who all sent the same If-Match, got 200 and every other got 412.
func checkOneWinner(t *testing.T, round int, statuses []int) {
	t.Helper()
	won := 0
	for _, st := range statuses {
		switch st {
		case 200:
			won++
		case 412:
		default:
			t.Errorf("round %d: a writer got %d, want 200 or 412", round, st)
		}
	}
	if won != 1 {
		t.Fatalf("round %d: %d writers won (%v), want exactly 1", round, won, statuses)
	}
}
