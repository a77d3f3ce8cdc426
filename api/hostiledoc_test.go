package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout/document"
)

// sendDocument posts body to path as role, as YAML or JSON (contentType).
func (g *guardedServer) sendDocument(t *testing.T, role, path, contentType, body string) (int, string, time.Duration) {
	t.Helper()
	req, err := http.NewRequest("POST", g.url+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	req.Header.Set("Authorization", "Bearer "+g.secrets[role])
	start := time.Now()
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(data), time.Since(start)
}

// smallDocument is a document a plan answers at once.
const smallDocument = "features:\n- key: small\n  buckets: [{name: \"on\", share: 0.25}, {name: \"off\", share: 0.75}]\n"

// TestHostileDocuments: documents that cost the YAML parser far more than
// their size (a megabyte of closing brackets, whose parse error was
// formatted in the square of its line), or that hold far more features
// than a document takes, are refused with 400 (422 for too many features,
// as a document that lists them in less space is) when sent
// (by a viewer; to apply, by an editor), and an admin's plan sent right
// after is answered.
func TestHostileDocuments(t *testing.T) {
	g := newGuardedServer(t)
	var dense, block strings.Builder
	dense.WriteString("features: [")
	for i := 0; i < 80_000; i++ {
		fmt.Fprintf(&dense, "{key: %s},", strconv.FormatInt(int64(i), 36))
	}
	dense.WriteString("]\n")
	block.WriteString("features:\n")
	for i := 0; block.Len() < api.MaxBodyBytes-64; i++ {
		fmt.Fprintf(&block, "- key: feature-%07d\n", i)
	}
	yaml, json := "application/yaml", "application/json"
	for _, tc := range []struct {
		name, role, path, contentType, body, want string
		status                                    int
	}{
		{"brackets", "viewer", "/api/plan", yaml, "features: [" + strings.Repeat("]", 1_040_000), "too dense", http.StatusBadRequest},
		{"brackets to apply", "editor", "/api/apply", yaml, "document:\n  features: [" + strings.Repeat("]", 1_040_000), "too dense", http.StatusBadRequest},
		{"80,000 features", "viewer", "/api/plan", yaml, dense.String(), "too dense", http.StatusBadRequest},
		{"features in block style", "viewer", "/api/plan", yaml, block.String(), "features has more than 1000 entries", http.StatusUnprocessableEntity},
		{"features as JSON", "viewer", "/api/plan", json, `{"features":[` + strings.Repeat("{},", document.MaxBytes/3-8) + `{}]}`, "features has more than 1000 entries", http.StatusUnprocessableEntity},
		{"features as JSON to apply", "editor", "/api/apply", json, `{"document":{"features":[` + strings.Repeat("{},", document.MaxBytes/3-16) + `{}]}}`, "features has more than 1000 entries", http.StatusUnprocessableEntity},
		{"a second document", "viewer", "/api/plan", yaml, smallDocument + "---\n" + smallDocument, "a second document", http.StatusBadRequest},
		{"a quoted share", "viewer", "/api/plan", yaml, "features:\n- key: a\n  buckets: [{name: A, share: \"1\"}]\n", "a quoted string", http.StatusBadRequest},
		{"replicas with a fraction", "viewer", "/api/plan", yaml, "features:\n- key: a\n  buckets: [{name: A, replicas: 1.5}]\n", "with a fraction", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, took := g.sendDocument(t, tc.role, tc.path, tc.contentType, tc.body)
			t.Logf("%d bytes answered %d in %v", len(tc.body), status, took)
			if status != tc.status || !strings.Contains(body, tc.want) || len(body) > 4096 {
				t.Errorf("POST %s = %d %.300s (%d bytes), want %d saying %q in a short answer", tc.path, status, body, len(body), tc.status, tc.want)
			}
			status, body, _ = g.sendDocument(t, "admin", "/api/plan", yaml, smallDocument)
			if status != http.StatusOK {
				t.Errorf("admin's plan after it = %d %.300s, want 200", status, body)
			}
		})
	}
}

// TestPlanSlotsPerToken: a token holds at most half the plan slots; beyond
// them its plans are refused with 429, while another token's plan runs.
func TestPlanSlotsPerToken(t *testing.T) {
	g := newGuardedServer(t)
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	api.SetPlanHook(t, func(context.Context) func() {
		first := false
		once.Do(func() { first = true })
		if first {
			entered <- struct{}{}
			<-release
		}
		return nil
	})
	held := make(chan int, 1)
	go func() {
		status, _, _ := g.sendDocument(t, "viewer", "/api/plan", "application/yaml", smallDocument)
		held <- status
	}()
	<-entered
	status, body, _ := g.sendDocument(t, "viewer", "/api/plan", "application/yaml", smallDocument)
	if status != http.StatusTooManyRequests || !strings.Contains(body, "this token runs as many plans at once as one token may") {
		t.Errorf("viewer's second plan = %d %s, want 429 for the token", status, body)
	}
	if status, body, _ := g.sendDocument(t, "admin", "/api/plan", "application/yaml", smallDocument); status != http.StatusOK {
		t.Errorf("admin's plan while the viewer's runs = %d %.300s, want 200", status, body)
	}
	close(release)
	if status := <-held; status != http.StatusOK {
		t.Errorf("viewer's held plan = %d, want 200", status)
	}
	if status, body, _ := g.sendDocument(t, "viewer", "/api/plan", "application/yaml", smallDocument); status != http.StatusOK {
		t.Errorf("viewer's plan after its first ended = %d %.300s, want 200", status, body)
	}
}

// TestLongKeysCut: a key quoted in an error message is cut, whatever its
// length.
func TestLongKeysCut(t *testing.T) {
	g := newGuardedServer(t)
	long := strings.Repeat("k", 100_000)
	for _, tc := range []struct{ name, contentType, body string }{
		{"JSON unknown field", "application/json", `{"features":[],"` + long + `":1}`},
		{"YAML unknown field", "application/yaml", "features: []\n" + long + ": 1\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, _ := g.sendDocument(t, "viewer", "/api/plan", tc.contentType, tc.body)
			if status != http.StatusBadRequest || len(body) > 1024 || !strings.Contains(body, long[:64]+"…") {
				t.Errorf("POST /api/plan = %d %.200s… (%d bytes), want 400 quoting the key cut to 64 bytes", status, body, len(body))
			}
		})
	}
}
