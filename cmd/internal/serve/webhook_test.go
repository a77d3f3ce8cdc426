package serve

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/internal/leaktest"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/webhook"
)

// TestServeDeliversWebhooks: the server runs the delivery worker: a change
// made over HTTP reaches a webhook registered over HTTP, signed; a second
// webhook whose endpoint hangs does not hold the first back, and Close
// ends its delivery and leaves no goroutine.
func TestServeDeliversWebhooks(t *testing.T) {
	defer leaktest.Check(t)()
	got := make(chan webhook.Payload, 10)
	good := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Header.Get("X-Rollout-Signature") != webhook.Signature("serve-test-secret-1", body) {
			t.Errorf("bad signature on %s", body)
		}
		var p webhook.Payload
		json.Unmarshal(body, &p)
		got <- p
	}))
	defer good.Close()
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // then the server notices the client going away
		<-r.Context().Done()
	}))
	defer hang.Close()

	s := &Server{Addr: "127.0.0.1:0", DBPath: filepath.Join(t.TempDir(), "rollout.db"), Log: slog.New(slog.DiscardHandler),
		WebhookInterval: 5 * time.Millisecond}
	if err := s.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	post := func(path, body string, want int) {
		t.Helper()
		res, err := http.Post(s.URL()+path, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != want {
			t.Fatalf("POST %s = %d %s, want %d", path, res.StatusCode, b, want)
		}
	}
	post("/api/webhooks", `{"url":"`+hang.URL+`","secret":"serve-test-secret-2"}`, 201)
	post("/api/webhooks", `{"url":"`+good.URL+`","secret":"serve-test-secret-1","events":["create"]}`, 201)
	post("/api/features", `{"key":"f","buckets":[{"name":"A","replicas":3}]}`, 201)
	p := <-got
	if p.Kind != audit.Create || p.Feature != "f" || !strings.HasPrefix(p.Text, "anonymous create f (version 1)") {
		t.Errorf("delivered %+v", p)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
