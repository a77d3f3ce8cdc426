package stream_test

import (
	"bufio"
	"context"
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/rollout/auth"
)

// TestDashboardStream: GET /api/events says hello, then one change event
// per batch naming each changed feature with its version and ETag now, or
// that it is gone.
func TestDashboardStream(t *testing.T) {
	s, _ := streamServer(t)
	s.Seed()
	caughtUp(t, s)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", s.URL+"/api/events", nil)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK || res.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("GET /api/events = %d %s, want 200 text/event-stream", res.StatusCode, res.Header.Get("Content-Type"))
	}
	events := readEvents(t, bufio.NewReader(res.Body))
	next := func(what string) sseEvent {
		t.Helper()
		for {
			select {
			case ev, ok := <-events:
				if !ok {
					t.Fatalf("the stream ended, waiting for %s", what)
				}
				if ev.comment != "" {
					continue
				}
				return ev
			case <-time.After(10 * time.Second):
				t.Fatalf("no %s within 10 s", what)
			}
		}
	}
	if hello := next("hello"); hello.name != "hello" {
		t.Fatalf("first event = %+v, want hello", hello)
	}

	patched := s.Must(200, "PATCH", "/api/features/checkout", map[string]any{"description": "elsewhere"}).Body
	var changed struct {
		Feature struct{ Version int }
	}
	json.Unmarshal(patched, &changed)
	etag := s.Must(200, "GET", "/api/features/checkout", nil).Header.Get("ETag")
	ev := next("the change")
	var data struct {
		Revision int64
		Features []struct {
			Key, Tag string
			Version  int
			Deleted  bool
		}
	}
	if err := json.Unmarshal([]byte(ev.data), &data); err != nil || ev.name != "change" {
		t.Fatalf("event %+v: %v; want a change", ev, err)
	}
	if len(data.Features) != 1 || data.Features[0].Key != "checkout" || data.Features[0].Version != changed.Feature.Version ||
		`"`+data.Features[0].Tag+`"` != etag {
		t.Errorf("change event = %s, want checkout at version %d, ETag %s", ev.data, changed.Feature.Version, etag)
	}

	s.Must(204, "DELETE", "/api/features/checkout", nil)
	ev = next("the deletion")
	if err := json.Unmarshal([]byte(ev.data), &data); err != nil || len(data.Features) != 1 || !data.Features[0].Deleted {
		t.Errorf("event after the deletion = %s (%v), want checkout deleted", ev.data, err)
	}
}

// TestDashboardStreamBudget: the dashboard's streams count in the budget of
// every stream: a viewer's token beyond its share is refused with 429, any
// beyond the server's with 503, and an sdk-only token may not open one.
func TestDashboardStreamBudget(t *testing.T) {
	e := newStreamEnv(t, api.Options{MaxStreams: 2, MaxStreamsPerToken: 1}, nil, nil)
	viewer, other := e.token("pm", auth.RoleViewer), e.token("pm-2", auth.RoleViewer)
	sdk := e.token("app", auth.RoleSDK)
	open := func(secret string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", e.url+"/api/events", nil)
		req.Header.Set("Authorization", "Bearer "+secret)
		res, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		if res.StatusCode == http.StatusOK {
			t.Cleanup(func() { res.Body.Close() })
		} else {
			res.Body.Close()
		}
		return res.StatusCode
	}
	for i, tt := range []struct {
		secret string
		want   int
	}{
		{sdk, http.StatusForbidden},
		{viewer, http.StatusOK},
		{viewer, http.StatusTooManyRequests},
		{other, http.StatusOK},
		{e.admin, http.StatusServiceUnavailable},
	} {
		if got := open(tt.secret); got != tt.want {
			t.Errorf("stream %d = %d, want %d", i, got, tt.want)
		}
	}
}
