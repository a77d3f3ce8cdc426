package client_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/api/client"
	"github.com/rollout/rollout/internal/leaktest"
)

// TestCloseLeavesNoGoroutine: a client that has followed the stream,
// applied a change and sent its counts leaves no goroutine behind once
// Close returns: its sync loop and its flusher are joined, and the idle
// connections of the http.Client it made are closed.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	s := newServer(t)
	defer leaktest.Check(t, "github.com/rollout/rollout/api/client")()
	tr := &http.Transport{} // the test's own requests
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	c, err := client.New(context.Background(), client.Config{URL: s.URL, FlushInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatalf("client.New() = %v", err)
	}
	defer c.Close() // if the test fails before its own Close
	changed := make(chan client.Event, 10)
	defer c.Watch(func(ev client.Event) {
		if ev.Kind == client.EventChanged {
			changed <- ev
		}
	})()
	if _, err := c.Evaluate("f02", "u1"); err != nil {
		t.Fatal(err)
	}
	// A change reaches the client through its stream.
	req, _ := http.NewRequest("PATCH", s.URL+"/api/features/f01", strings.NewReader(`{"description":"changed"}`))
	req.Header.Set("Content-Type", "application/json")
	res, err := hc.Do(req)
	if err != nil || res.StatusCode != 200 {
		t.Fatalf("PATCH: %v %v", res, err)
	}
	res.Body.Close()
	select {
	case <-changed:
	case <-time.After(10 * time.Second): // a hang guard
		t.Fatal("the change did not reach the client within 10 s")
	}
	// The flusher sends the count.
	waitFor(t, "the evaluation count sent", func() bool {
		if err := s.Svc.FlushExposures(context.Background()); err != nil {
			t.Fatal(err)
		}
		rep, err := s.Svc.Exposures(context.Background(), "f02")
		if err != nil {
			t.Fatal(err)
		}
		return rep.Total > 0
	})
	if err := c.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
}
