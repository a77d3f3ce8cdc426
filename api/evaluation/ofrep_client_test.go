package evaluation_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/api/internal/apitest"
)

// clientDir holds the OpenFeature clients' package.json, lock file and
// script.
var clientDir = filepath.Join("testdata", "ofrep-client")

// details is what script.mjs reports of one evaluation.
type details struct {
	Value     any            `json:"value"`
	Variant   *string        `json:"variant"`
	Reason    *string        `json:"reason"`
	ErrorCode *string        `json:"errorCode"`
	Metadata  map[string]any `json:"metadata"`
}

type clientCall struct {
	IfNoneMatch *string `json:"ifNoneMatch"`
	Status      int     `json:"status"`
	ETag        *string `json:"etag"`
}

type clientResults struct {
	Server map[string]details `json:"server"`
	Web    struct {
		Before       map[string]details `json:"before"`
		Pinned       string             `json:"pinned"`
		FlagsChanged []string           `json:"flagsChanged"`
		After        map[string]details `json:"after"`
		Calls        []clientCall       `json:"calls"`
	} `json:"web"`
}

// runClients runs script.mjs against the server at url. Without the
// clients installed it skips, or fails in CI.
func runClients(t *testing.T, url string) clientResults {
	t.Helper()
	missing := ""
	if _, err := os.Stat(filepath.Join(clientDir, "node_modules")); err != nil {
		missing = "the OpenFeature clients are not installed: run `npm ci` in api/evaluation/testdata/ofrep-client"
	}
	node, err := exec.LookPath("node")
	if err != nil {
		missing = "node is not installed: the OpenFeature clients need Node.js 20 or later"
	}
	if missing != "" {
		if os.Getenv("CI") == "true" {
			t.Fatal(missing)
		}
		t.Skip(missing)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "script.mjs", url)
	cmd.Dir = clientDir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("node script.mjs %s: %v\nstderr:\n%s", url, err, stderr.Bytes())
	}
	var res clientResults
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		t.Fatalf("node script.mjs printed no JSON: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.Bytes(), stderr.Bytes())
	}
	return res
}

// TestOpenFeatureClients evaluates flags through OpenFeature's own OFREP
// providers for Node, the server one (single-flag endpoint) and the web one
// (bulk endpoint, polled with If-None-Match), against the real server.
func TestOpenFeatureClients(t *testing.T) {
	s := apitest.New(t, "", api.Options{})
	s.Seed()
	var bulk struct{ Metadata map[string]any }
	if err := json.Unmarshal(s.Must(200, "POST", ofrepFlags, ofrepBody("user-1")).Body, &bulk); err != nil {
		t.Fatal(err)
	}

	// What the clients should resolve, before they pin user-1.
	str := func(s string) *string { return &s }
	value := func(key, user string) any {
		var v any
		if err := json.Unmarshal(s.Evaluate(key, user).Value, &v); err != nil {
			t.Fatal(err)
		}
		return v
	}
	version1 := map[string]any{"version": 1.0}
	served := func(key, user, reason string) details {
		return details{Value: value(key, user), Variant: str(s.Evaluate(key, user).Bucket), Reason: str(reason), Metadata: version1}
	}
	codeDefault := func(reason, code string) details {
		d := details{Value: "code-default", Reason: str(reason), Metadata: map[string]any{}}
		if code != "" {
			d.ErrorCode = str(code)
		}
		return d
	}
	common := map[string]details{
		"string":           served("checkout", "user-1", "SPLIT"),
		"boolean":          served("dark-mode", "user-1", "SPLIT"),
		"object":           served("banner", "user-1", "SPLIT"),
		"number":           served("limit", "user-1", "SPLIT"),
		"disabledFallback": served("paused", "user-1", "DISABLED"),
		"unknown":          codeDefault("ERROR", "FLAG_NOT_FOUND"),
	}
	wantServer := map[string]details{
		"override": served("checkout", "vip", "TARGETING_MATCH"),
		// The server provider on the registry (0.1.3, with ofrep-core
		// 0.1.4) predates answers without a value: it takes one for a
		// malformed answer, and so returns the code default with a
		// GENERAL error rather than with reason DISABLED.
		"disabled":       codeDefault("ERROR", "GENERAL"),
		"noTargetingKey": codeDefault("ERROR", "TARGETING_KEY_MISSING"),
	}
	wantWeb := map[string]details{
		"disabled": {Value: "code-default", Reason: str("DISABLED"), Metadata: version1},
	}
	for k, d := range common {
		wantServer[k], wantWeb[k] = d, d
	}
	// The web provider gives a flag it did not get the flag set's metadata.
	wantWeb["unknown"] = details{Value: "code-default", Reason: str("ERROR"), ErrorCode: str("FLAG_NOT_FOUND"), Metadata: bulk.Metadata}

	got := runClients(t, s.URL)
	if diff := cmp.Diff(wantServer, got.Server); diff != "" {
		t.Errorf("server provider (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantWeb, got.Web.Before); diff != "" {
		t.Errorf("web provider (-want +got):\n%s", diff)
	}

	// The ETag round trip: the first request has no If-None-Match; polls
	// send the ETag and get 304 until the pin changes the flags, when a
	// poll gets 200 with a new ETag, which later polls send.
	calls := got.Web.Calls
	if len(calls) < 3 || calls[0].IfNoneMatch != nil || calls[0].Status != 200 || calls[0].ETag == nil {
		t.Fatalf("web provider's requests %v: want a first 200 with an ETag, then polls", calls)
	}
	etag, changes, notModified := *calls[0].ETag, 0, 0
	for i, c := range calls[1:] {
		if c.IfNoneMatch == nil || *c.IfNoneMatch != etag {
			t.Errorf("poll %d sent If-None-Match %v, want the last ETag %s", i+1, c.IfNoneMatch, etag)
			continue
		}
		switch {
		case c.Status == 304:
			notModified++
		case c.Status == 200 && c.ETag != nil && *c.ETag != etag:
			changes++
			etag = *c.ETag
		default:
			t.Errorf("poll %d = %d with ETag %v (sent %s), want 304, or 200 with a new ETag", i+1, c.Status, c.ETag, *c.IfNoneMatch)
		}
	}
	if notModified == 0 || changes != 1 {
		t.Errorf("polls: %d answered 304 and %d brought a change, want some 304s and one change", notModified, changes)
	}
	if !cmp.Equal(got.Web.FlagsChanged, []string{"checkout"}) {
		t.Errorf("ConfigurationChanged named %v, want [checkout]", got.Web.FlagsChanged)
	}
	after := got.Web.After["string"]
	if after.Variant == nil || *after.Variant != got.Web.Pinned || after.Value != got.Web.Pinned ||
		after.Reason == nil || *after.Reason != "TARGETING_MATCH" || after.Metadata["version"] != 2.0 {
		t.Errorf("after pinning user-1 to %s: %+v, want it served by override at version 2", got.Web.Pinned, after)
	}
}
