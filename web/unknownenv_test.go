package web_test

import (
	"net/http"
	"strings"
	"testing"
)

// TestUnknownEnvironmentPage: a dashboard page asked of an environment that
// does not exist answers a page saying so, with the dashboard's headers,
// not the API's JSON; the API itself still answers JSON.
func TestUnknownEnvironmentPage(t *testing.T) {
	a, _, _ := envApp(t, false)
	for _, path := range []string{"/ui/?env=nowhere", "/ui/features/checkout?env=nowhere", "/ui/environments/compare?env=nowhere", "/ui/changes?env=%3Cb%3E"} {
		r := a.get(t, path)
		body := r.Body.String()
		if r.Code != http.StatusNotFound || !strings.HasPrefix(r.Header().Get("Content-Type"), "text/html") ||
			!strings.Contains(body, "Unknown environment") || r.Header().Get("Content-Security-Policy") == "" {
			t.Fatalf("GET %s = %d %s %q, want a 404 page saying the environment is unknown", path, r.Code, r.Header().Get("Content-Type"), body)
		}
		if strings.Contains(body, "<b>") {
			t.Fatalf("GET %s echoes the environment unescaped: %s", path, body)
		}
	}
	if r := a.get(t, "/api/features?env=nowhere"); r.Code != http.StatusNotFound || !strings.Contains(r.Body.String(), "unknown_environment") {
		t.Fatalf("the API's answer = %d %s, want its JSON 404", r.Code, r.Body.String())
	}
	if r := a.get(t, "/ui/?env=staging"); r.Code != http.StatusOK {
		t.Fatalf("GET /ui/?env=staging = %d, want the page", r.Code)
	}
}
