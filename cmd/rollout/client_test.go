package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rollout/rollout/api/client"
	"github.com/rollout/rollout/store/storetest"
)

// TestClientAgainstBinary: the Go client against the real binary, on
// PostgreSQL with two instances. Its answers equal the server's; a change
// made through the other instance reaches it through the stream; with the
// server gone it keeps answering, stale; restarted, it is ready again and
// catches up; its evaluation counts reach the server once.
func TestClientAgainstBinary(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	ps := startInstances(t, 2, dsn)
	for i := range 5 {
		body := fmt.Sprintf(`{"key":"f%d","salt":"%s","buckets":[{"name":"A","replicas":%d,"value":{"n":%d}},{"name":"B","replicas":50}],"overrides":{"vip":"B"},"enabled":%v}`,
			i, []string{"", "s", "f2", "x", "y"}[i], 10+20*i, i, i != 3)
		mustCall(t, 201, "POST", ps[0].url+"/api/features", body)
	}
	for i := range 5 { // the other instance serves them too
		waitStatusAt(t, fmt.Sprintf("%s/api/features/f%d", ps[1].url, i), nil, 200)
	}
	addr := strings.TrimPrefix(ps[0].url, "http://")
	ctx := context.Background()
	c, err := client.New(ctx, client.Config{URL: ps[0].url, CacheFile: filepath.Join(t.TempDir(), "cache.json"), PollInterval: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	events := make(chan client.Event, 100)
	stop := c.Watch(func(e client.Event) {
		select {
		case events <- e:
		default:
		}
	})
	defer stop()

	// Bit-identical to the server's answers.
	for i := range 5 {
		for u := range 300 {
			user := fmt.Sprintf("user-%d", u)
			if u == 0 {
				user = "vip"
			}
			_, data := mustCall(t, 200, "GET", fmt.Sprintf("%s/evaluate?feature=f%d&user=%s", ps[1].url, i, user), "")
			var want struct {
				Bucket  *string
				Value   json.RawMessage
				Version int
				Reason  string
			}
			json.Unmarshal(data, &want)
			got, err := c.Evaluate(fmt.Sprintf("f%d", i), user)
			wantBucket := ""
			if want.Bucket != nil {
				wantBucket = *want.Bucket
			}
			wantValue := string(want.Value)
			if wantValue == "null" {
				wantValue = "" // no bucket: no value
			}
			if err != nil || got.Bucket != wantBucket || got.Reason != want.Reason || got.Version != want.Version || string(got.Value) != wantValue {
				t.Fatalf("client f%d %s = %+v, %v; server %s", i, user, got, err, data)
			}
		}
	}

	// A change through the other instance reaches the client.
	start := time.Now()
	mustCall(t, 200, "PUT", ps[1].url+"/api/features/f1/buckets/A", `{"replicas":99}`)
	for {
		if e, _ := c.Evaluate("f1", "user-1"); e.Version == 2 {
			break
		}
		if time.Since(start) > 20*time.Second {
			t.Fatal("the client never saw f1 version 2")
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("a change through another instance reached the client in %v", time.Since(start))

	// The server it follows goes away: answers go on, stale.
	want, _ := c.Evaluate("f2", "user-7")
	ps[0].cmd.Process.Signal(syscall.SIGTERM)
	<-ps[0].exited
	waitEvent(t, events, client.EventStale)
	if got, err := c.Evaluate("f2", "user-7"); err != nil || got.Bucket != want.Bucket || got.Version != want.Version {
		t.Fatalf("stale client: %+v, %v; want %+v", got, err, want)
	}
	mustCall(t, 200, "PUT", ps[1].url+"/api/features/f2/buckets/B", `{"replicas":60}`)

	// Back on the same address: ready, and the change made meanwhile is in.
	startBinary(t, nil, "serve", "--addr", addr, "--db", dsn)
	waitEvent(t, events, client.EventReady)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if e, _ := c.Evaluate("f2", "user-7"); e.Version == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the client did not catch up after the server came back")
		}
		time.Sleep(10 * time.Millisecond)
	}

	// Its counts of a new feature, which no server evaluates, reach the
	// server, once.
	mustCall(t, 201, "POST", ps[1].url+"/api/features", `{"key":"g","buckets":[{"name":"A"},{"name":"B"}]}`)
	deadline = time.Now().Add(20 * time.Second)
	for {
		if _, err := c.Evaluate("g", "user-1"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the client never saw feature g")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for range 39 {
		c.Evaluate("g", "user-1")
	}
	if err := c.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Flush(ctx); err != nil { // nothing more to send
		t.Fatal(err)
	}
	_, data := mustCall(t, 200, "GET", ps[1].url+"/api/features/g/exposures", "")
	var exp struct{ Total int }
	json.Unmarshal(data, &exp)
	if exp.Total != 40 {
		t.Errorf("exposures of g after the client's flushes = %d, want its 40 evaluations", exp.Total)
	}
}

func waitEvent(t *testing.T, events <-chan client.Event, kind client.EventKind) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case e := <-events:
			if e.Kind == kind {
				return
			}
		case <-timeout:
			t.Fatalf("no event of kind %d within 30s", kind)
		}
	}
}
