package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/api/client"
	"github.com/rollout/rollout/rollout/document"
)

// TestEnvironmentsAsCode: export, plan and apply with --env read and
// change that environment alone, through the server rollout serve runs.
func TestEnvironmentsAsCode(t *testing.T) {
	s := startServer(t, "")
	s.must(201, "POST", "/api/features", abcFeature("checkout"))
	s.must(201, "POST", "/api/environments", map[string]any{"key": "staging", "name": "Staging"})
	file := filepath.Join(t.TempDir(), "staging.yaml")
	if _, err := runWith(t, s.m.URL(), "", "export", "--env", "staging", "--out", file); err != nil {
		t.Fatalf("export --env staging: %v", err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "enabled: false") || !strings.Contains(string(data), "environment: staging") {
		t.Fatalf("staging's export does not say it is staging's, with checkout switched off:\n%s", data)
	}
	// The file says its environment: without --env it is planned there;
	// with another it is refused.
	if out, err := runWith(t, s.m.URL(), "", "plan", "-f", file); err != nil {
		t.Fatalf("plan of staging's own export without --env = %v (production's checkout differs from it), want no change:\n%s", err, out)
	}
	if _, err := runWith(t, s.m.URL(), "", "plan", "--env", "production", "-f", file); err == nil || !strings.Contains(err.Error(), "is for environment") {
		t.Fatalf("plan --env production of staging's file = %v, want a refusal naming the environment", err)
	}
	editDocument(t, file, func(d *document.Document) { on := true; d.Features[0].Enabled = &on })
	out, err := runWith(t, s.m.URL(), "", "plan", "--env", "staging", "-f", file)
	if err == nil || !strings.Contains(out, "checkout") {
		t.Fatalf("plan --env staging = %v\n%s\nwant a change of checkout (exit 2)", err, out)
	}
	if _, err := runWith(t, s.m.URL(), "", "apply", "--env", "staging", "-f", file); err != nil {
		t.Fatalf("apply --env staging: %v", err)
	}
	if got := s.must(200, "GET", "/api/features/checkout?env=staging", nil)["enabled"]; got != true {
		t.Errorf("checkout in staging after the apply: enabled = %v, want true", got)
	}
	prod := s.must(200, "GET", "/api/features/checkout", nil)
	if prod["enabled"] != true || prod["version"] != float64(1) {
		t.Errorf("checkout in production after staging's apply = %v, want it unchanged", prod)
	}
	if _, err := runWith(t, s.m.URL(), "", "export", "--env", "nowhere"); err == nil || !strings.Contains(err.Error(), "unknown_environment") {
		t.Errorf("export --env nowhere = %v, want unknown_environment", err)
	}
}

// TestEnvironmentsInAppClient: in-app clients with sdk tokens scoped to
// staging and to production each evaluate their environment's
// configuration, as the server does for their tokens, and alike once a
// promotion has made the environments equal.
func TestEnvironmentsInAppClient(t *testing.T) {
	s := startServer(t, "")
	s.must(201, "POST", "/api/features", map[string]any{"key": "f", "enabled": true,
		"buckets": []map[string]any{{"name": "on", "replicas": 20}, {"name": "off", "replicas": 20}}})
	s.must(201, "POST", "/api/environments", map[string]any{"key": "staging", "name": "Staging", "copy_from": "production"})
	s.must(200, "PUT", "/api/features/f/buckets/on?env=staging", map[string]any{"replicas": 60})
	admin := s.must(201, "POST", "/api/tokens", map[string]any{"name": "root", "role": "admin"})["token"].(string)
	asAdmin := []string{"Authorization", "Bearer " + admin}
	secrets := map[string]string{}
	for _, env := range []string{"staging", "production"} {
		secrets[env] = s.must(201, "POST", "/api/tokens", map[string]any{"name": "app-" + env, "role": "sdk", "environment": env}, asAdmin...)["token"].(string)
	}
	clients := map[string]*client.Client{}
	for env, secret := range secrets {
		c, err := client.New(context.Background(), client.Config{URL: s.m.URL(), Token: secret, PollInterval: 100 * time.Millisecond})
		if err != nil {
			t.Fatalf("client for %s: %v", env, err)
		}
		t.Cleanup(func() { c.Close() })
		clients[env] = c
	}
	const n = 300
	buckets := func(env string) (fromClient, fromServer []string) {
		for i := range n {
			user := fmt.Sprint("u", i)
			e, err := clients[env].Evaluate("f", user)
			if err != nil {
				t.Fatalf("%s client: %v", env, err)
			}
			fromClient = append(fromClient, e.Bucket)
			got := s.must(200, "GET", "/evaluate?feature=f&user="+user, nil, "Authorization", "Bearer "+secrets[env])
			fromServer = append(fromServer, fmt.Sprint(got["bucket"]))
		}
		return fromClient, fromServer
	}
	cs, ss := buckets("staging")
	cp, sp := buckets("production")
	if !slices.Equal(cs, ss) || !slices.Equal(cp, sp) {
		t.Fatalf("the clients answer otherwise than the server for their tokens")
	}
	if slices.Equal(cs, cp) {
		t.Fatalf("staging (75 %% on) and production (50 %% on) serve every user alike in the clients")
	}
	tag := s.do("GET", "/api/features/f", nil, asAdmin...).header.Get("ETag")
	s.must(200, "POST", "/api/features/f/promote", map[string]any{"from": "staging", "to": "production"}, append(asAdmin, "If-Match", tag)...)
	deadline := time.Now().Add(20 * time.Second)
	for {
		cs, _ := buckets("staging")
		cp, sp := buckets("production")
		if slices.Equal(cs, cp) && slices.Equal(cp, sp) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("20 s after the promotion the production client still answers otherwise than staging")
		}
		time.Sleep(100 * time.Millisecond)
	}
}
