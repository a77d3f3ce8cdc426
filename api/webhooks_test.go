package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/webhook"
)

type webhookAnswer struct {
	webhook.Hook
	Secret     string             `json:"secret"`
	Deliveries []webhook.Delivery `json:"deliveries"`
}

// TestWebhooksAPI: an admin registers a webhook (the secret shown once,
// made when none is given), lists it without its secret, reads its log,
// cannot resume an active one, deletes it.
func TestWebhooksAPI(t *testing.T) {
	g := newGuardedServer(t)
	var made webhookAnswer
	body := g.must(t, 201, "admin", "POST", "/api/webhooks", map[string]any{"url": "https://hooks.example.com/rollout", "secret": "0123456789abcdef0123", "events": []string{"*"}})
	json.Unmarshal([]byte(body), &made)
	if made.ID == "" || made.Secret != "0123456789abcdef0123" || made.State != webhook.Active || made.CreatedBy != "admin-bot" || made.Events[0] != "*" {
		t.Fatalf("POST /api/webhooks = %s", body)
	}
	body = g.must(t, 201, "admin", "POST", "/api/webhooks", map[string]any{"url": "http://127.0.0.1:9/x", "events": []string{"archive", "purge"}})
	var generated webhookAnswer
	json.Unmarshal([]byte(body), &generated)
	if !strings.HasPrefix(generated.Secret, "whsec_") || len(generated.Secret) < 32 {
		t.Errorf("a webhook without a secret got %q, want one made", generated.Secret)
	}
	list := g.must(t, 200, "admin", "GET", "/api/webhooks", nil)
	if strings.Contains(list, made.Secret) || strings.Contains(list, generated.Secret) || strings.Contains(list, `"secret"`) {
		t.Errorf("GET /api/webhooks shows a secret: %s", list)
	}
	var listed struct{ Webhooks []webhook.Hook }
	json.Unmarshal([]byte(list), &listed)
	if len(listed.Webhooks) != 2 || listed.Webhooks[0].ID != made.ID {
		t.Errorf("GET /api/webhooks = %s", list)
	}
	one := g.must(t, 200, "admin", "GET", "/api/webhooks/"+made.ID, nil)
	if strings.Contains(one, made.Secret) || !strings.Contains(one, `"deliveries":[]`) {
		t.Errorf("GET /api/webhooks/ID = %s", one)
	}
	if status, body := g.send(t, "admin", "POST", "/api/webhooks/"+made.ID+"/resume", nil); status != 409 || !strings.Contains(body, "not paused") {
		t.Errorf("resume an active webhook = %d %s, want 409", status, body)
	}
	g.must(t, 204, "admin", "DELETE", "/api/webhooks/"+made.ID, nil)
	g.must(t, 404, "admin", "GET", "/api/webhooks/"+made.ID, nil)
	g.must(t, 404, "admin", "DELETE", "/api/webhooks/"+made.ID, nil)
	g.must(t, 404, "admin", "POST", "/api/webhooks/"+made.ID+"/resume", nil)
	for _, role := range []string{"editor", "viewer"} {
		g.must(t, 403, role, "GET", "/api/webhooks", nil)
		g.must(t, 403, role, "POST", "/api/webhooks", map[string]any{"url": "http://127.0.0.1:9/x"})
	}
	es := g.audit(t, "viewer", "/api/audit?actor=admin-bot").Events
	if len(es) != 3 || es[0].Kind != "webhook_delete" || es[2].Kind != "webhook_create" || !strings.Contains(es[2].Summary, "https://hooks.example.com/…") || strings.Contains(es[2].Summary, "/rollout") {
		t.Errorf("audit events of the admin: %+v, want the webhook named by its site alone (its path may be a secret)", es)
	}
}

// TestWebhooksAbuse: bad URLs, secrets and filters are refused with 4xx,
// bodies are bounded, and the number of webhooks is capped.
func TestWebhooksAbuse(t *testing.T) {
	g := newGuardedServer(t)
	long := "https://example.com/" + strings.Repeat("a", webhook.MaxURL)
	for _, tt := range []struct {
		name string
		body any
		want int
	}{
		{"huge URL", map[string]any{"url": long}, 422},
		{"huge body", map[string]any{"url": "https://example.com/" + strings.Repeat("a", 2<<20)}, 413},
		{"no URL", map[string]any{}, 422},
		{"ftp", map[string]any{"url": "ftp://example.com/x"}, 422},
		{"file", map[string]any{"url": "file:///etc/passwd"}, 422},
		{"javascript", map[string]any{"url": "javascript:alert(1)"}, 422},
		{"no host", map[string]any{"url": "http:///x"}, 422},
		{"relative", map[string]any{"url": "/api/features"}, 422},
		{"credentials", map[string]any{"url": "https://user:pw@example.com/x"}, 422},
		{"fragment", map[string]any{"url": "https://example.com/x#y"}, 422},
		{"short secret", map[string]any{"url": "https://example.com/x", "secret": "short"}, 422},
		{"long secret", map[string]any{"url": "https://example.com/x", "secret": strings.Repeat("s", webhook.MaxSecret+1)}, 422},
		{"secret with spaces", map[string]any{"url": "https://example.com/x", "secret": "a secret with spaces"}, 422},
		{"unknown event", map[string]any{"url": "https://example.com/x", "events": []string{"nope"}}, 422},
		{"too many events", map[string]any{"url": "https://example.com/x", "events": make([]string, webhook.MaxEvents+1)}, 422},
		{"unknown field", map[string]any{"url": "https://example.com/x", "retries": 99}, 400},
		{"events not a list", map[string]any{"url": "https://example.com/x", "events": "*"}, 400},
	} {
		if status, body := g.send(t, "admin", "POST", "/api/webhooks", tt.body); status != tt.want || !strings.Contains(body, `"error"`) {
			t.Errorf("%s: POST /api/webhooks = %d %.200s, want %d", tt.name, status, body, tt.want)
		}
	}
	g.must(t, 404, "admin", "GET", "/api/webhooks/"+strings.Repeat("x", 5000), nil)
	for i := range webhook.MaxHooks {
		g.must(t, 201, "admin", "POST", "/api/webhooks", map[string]any{"url": fmt.Sprintf("https://example.com/%d", i)})
	}
	if status, body := g.send(t, "admin", "POST", "/api/webhooks", map[string]any{"url": "https://example.com/one-more"}); status != 409 || !strings.Contains(body, "delete one first") {
		t.Errorf("webhook %d = %d %s, want 409", webhook.MaxHooks+1, status, body)
	}
}

// TestWebhookNeverSlowsAChange: with a worker delivering to an endpoint
// that hangs, a change over the API returns; then the endpoint receives
// the change's event, signed, once it is released.
func TestWebhookNeverSlowsAChange(t *testing.T) {
	g := newGuardedServer(t)
	arrived := make(chan webhook.Payload, 10)
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var p webhook.Payload
		json.Unmarshal(body, &p)
		if r.Header.Get("X-Rollout-Signature") != webhook.Signature("0123456789abcdef", body) {
			t.Errorf("bad signature on %s", body)
		}
		arrived <- p
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	g.must(t, 201, "admin", "POST", "/api/webhooks", map[string]any{"url": hang.URL, "secret": "0123456789abcdef"})
	ctx, stop := context.WithCancel(context.Background())
	w := webhook.New(g.db, webhook.Options{Timeout: time.Minute})
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx, 10*time.Millisecond, func(err error) { t.Error(err) }) }()
	defer func() { stop(); <-done }()
	if p := <-arrived; p.Kind != audit.WebhookCreate {
		t.Fatalf("first delivery %s", p.Kind)
	}
	// The endpoint hangs on its first delivery (until released, within a
	// minute's timeout): the change must not wait for it.
	g.must(t, 201, "editor", "POST", "/api/features", twoBuckets)
	g.must(t, 204, "editor", "DELETE", "/api/features/f", nil)
	close(release)
	for _, want := range []audit.Kind{audit.Create, audit.Archive} {
		p := <-arrived
		if p.Kind != want || p.Feature != "f" || p.Actor != "editor-bot" || !strings.HasPrefix(p.Text, "editor-bot "+string(want)+" f") {
			t.Errorf("delivery %+v, want %s of f by editor-bot", p, want)
		}
	}
}

// TestWebhookPausedKeepsTheAnswerFromViewers: an endpoint that answers 404
// with its URL's secret path in the body is paused after its failures;
// the webhook_paused event, which viewers read and the other webhooks
// receive, says "HTTP 404" and holds nothing the endpoint answered, which
// only the admins' delivery log shows.
func TestWebhookPausedKeepsTheAnswerFromViewers(t *testing.T) {
	const secret = "SECRETPATH-7c1e"
	g := newGuardedServer(t)
	leaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, "Cannot POST "+r.URL.Path, http.StatusNotFound)
	}))
	defer leaky.Close()
	got := make(chan []byte, 100)
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got <- body
	}))
	defer other.Close()
	g.must(t, 201, "admin", "POST", "/api/webhooks", map[string]any{"url": other.URL, "events": []string{"webhook_paused"}})
	var made webhookAnswer
	json.Unmarshal([]byte(g.must(t, 201, "admin", "POST", "/api/webhooks", map[string]any{"url": leaky.URL + "/services/T1/B1/" + secret})), &made)

	now := time.Now()
	w := webhook.New(g.db, webhook.Options{Clock: func() time.Time { return now }})
	for i := 1; i <= webhook.MaxFailures; i++ {
		for {
			n, err := w.RunOnce(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if n == 0 {
				break
			}
		}
		now = now.Add(webhook.Backoff(i))
	}
	if _, err := w.RunOnce(context.Background()); err != nil { // the other webhook gets the pause
		t.Fatal(err)
	}

	leaked := func(where, text string) {
		t.Helper()
		for _, part := range []string{secret, "Cannot POST", "/services/T1"} {
			if strings.Contains(text, part) {
				t.Errorf("%s holds %q of the endpoint's answer: %s", where, part, text)
			}
		}
	}
	status, audit := g.send(t, "viewer", "GET", "/api/audit?kind=webhook_paused", nil)
	if status != 200 || !strings.Contains(audit, "webhook_paused") || !strings.Contains(audit, "HTTP 404") {
		t.Errorf("GET /api/audit as a viewer = %d %s, want the webhook_paused event saying HTTP 404", status, audit)
	}
	leaked("the audit trail", audit)
	select {
	case body := <-got:
		if !strings.Contains(string(body), `"kind":"webhook_paused"`) || !strings.Contains(string(body), "HTTP 404") {
			t.Errorf("the other webhook got %s, want the webhook_paused event saying HTTP 404", body)
		}
		leaked("the other webhook's delivery", string(body))
	default:
		t.Error("the other webhook got no webhook_paused event")
	}

	// The admins' delivery log keeps the answer.
	var detail webhookAnswer
	json.Unmarshal([]byte(g.must(t, 200, "admin", "GET", "/api/webhooks/"+made.ID, nil)), &detail)
	if detail.State != webhook.Paused || len(detail.Deliveries) != webhook.MaxFailures {
		t.Fatalf("GET /api/webhooks/ID = %+v, want paused after %d attempts", detail, webhook.MaxFailures)
	}
	leaked("the paused reason", detail.PausedReason)
	if d := detail.Deliveries[0]; d.Error != "HTTP 404" || d.Status != 404 || !strings.Contains(d.Detail, "Cannot POST /services/T1/B1/"+secret) {
		t.Errorf("latest delivery %+v, want HTTP 404 with the endpoint's answer as its detail", d)
	}
	for _, role := range []string{"editor", "viewer"} {
		g.must(t, 403, role, "GET", "/api/webhooks/"+made.ID, nil)
	}
}
