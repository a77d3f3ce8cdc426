package serve

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/rollout/rollout/rollout/auth"
)

// floodServer serves on loopback with room for limit connections, with a
// feature "f" to evaluate, and returns its address.
func floodServer(t *testing.T, s *Server) string {
	t.Helper()
	s.Addr, s.DBPath = "127.0.0.1:0", filepath.Join(t.TempDir(), "rollout.db")
	if err := s.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	res, err := client.Post(s.URL()+"/api/features", "application/json",
		strings.NewReader(`{"key":"f","buckets":[{"name":"A","replicas":3},{"name":"B","replicas":3}]}`))
	if err != nil || res.StatusCode != 201 {
		t.Fatalf("create feature: %v %v", res, err)
	}
	res.Body.Close()
	return strings.TrimPrefix(s.URL(), "http://")
}

// probe evaluates on a new connection, as a new client would, and returns
// the status and how long the answer took. A connection closed before any
// answer is tried again, twice, as clients retry such requests.
func probe(addr string, i int) (status int, took time.Duration, err error) {
	start := time.Now()
	for range 3 {
		var c net.Conn
		if c, err = net.Dial("tcp", addr); err != nil {
			continue
		}
		// The deadline only keeps a server that never answers from
		// hanging the test.
		c.SetDeadline(time.Now().Add(20 * time.Second))
		ic := &idleConn{Conn: c, r: bufio.NewReader(c)}
		status, err = ic.get(fmt.Sprintf("/evaluate?feature=f&user=probe-%d", i))
		c.Close()
		if err == nil {
			return status, time.Since(start), nil
		}
	}
	return 0, time.Since(start), err
}

// probes makes n probes one after the other, pause apart, and fails the
// test unless each is answered 200. It logs how long the answers took:
// measured, never asserted.
func probes(t *testing.T, addr string, n int, pause time.Duration) {
	t.Helper()
	var took []time.Duration
	for i := range n {
		time.Sleep(pause)
		status, d, err := probe(addr, i)
		if err != nil || status != http.StatusOK {
			t.Errorf("evaluation %d of %d under the flood: %d, %v; want 200", i+1, n, status, err)
			continue
		}
		took = append(took, d)
	}
	slices.Sort(took)
	if len(took) > 0 {
		t.Logf("%d evaluations on new connections under the flood: median %v, slowest %v", len(took), took[len(took)/2], took[len(took)-1])
	}
}

// metric returns the value of a metric with labels (name=value pairs) from
// GET /metrics.
func metric(t *testing.T, addr, name string, labels ...string) float64 {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second)) // against a server that never answers
	fmt.Fprintf(c, "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
	res, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	var total float64
next:
	for _, m := range fams[name].GetMetric() {
		for i := 0; i+1 < len(labels); i += 2 {
			if !hasLabel(m, labels[i], labels[i+1]) {
				continue next
			}
		}
		total += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return total
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// TestStreamFloodLeavesEvaluation serves with room for 64 connections and
// opens 100 streams that never read: 32 (half the limit) are served, the
// others refused at once, and evaluation on new connections is answered
// meanwhile.
func TestStreamFloodLeavesEvaluation(t *testing.T) {
	const limit, flood = 64, 100
	// One share for all: without tokens every stream is the API's.
	s := &Server{MaxConns: limit, MaxStreamsPerToken: limit / 2, IdleTimeout: time.Hour}
	addr := floodServer(t, s)

	for i := range flood {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "GET /sync/v1/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n") // and never read
	}
	// The streams fill their budget (the deadline only keeps a broken
	// server from hanging the test); the others are refused, or closed
	// by the connection limit before they were read.
	for deadline := time.Now().Add(20 * time.Second); metric(t, addr, "rollout_streams_open") < limit/2; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%v streams open, want %d", metric(t, addr, "rollout_streams_open"), limit/2)
		}
	}
	probes(t, addr, 20, 0)
	streams, refusedStreams := metric(t, addr, "rollout_streams_open"), metric(t, addr, "rollout_streams_refused_total")
	if streams > limit/2 {
		t.Errorf("%v streams open, want at most %d", streams, limit/2)
	}
	open, closed, refused := s.conns.counts()
	t.Logf("%v streams open, %v refused; %d connections open, %d closed to make room, %d refused", streams, refusedStreams, open, closed, refused)
}

// TestSlowClientFloodLeavesEvaluation serves with room for 64 connections
// while, for a few seconds, 120 connections that reopen as they are closed
// send requests slowly: 32 to GET /healthz announcing a 100,000-byte body
// sent a byte at a time, 16 with headers that never end, and 72 (more than
// the limit) to POST /evaluate with a body sent a byte at a time.
// Evaluation on new connections is answered meanwhile.
func TestSlowClientFloodLeavesEvaluation(t *testing.T) {
	const limit = 64
	s := &Server{MaxConns: limit, IdleTimeout: time.Hour}
	addr := floodServer(t, s)

	stop := make(chan struct{})
	var wg sync.WaitGroup
	opened := make([]int, 3)
	var mu sync.Mutex
	attack := func(kind int, head, drip string) {
		for {
			select {
			case <-stop:
				return
			default:
			}
			mu.Lock()
			opened[kind]++
			mu.Unlock()
			hold(addr, head, drip, stop)
			select { // reopen
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	for range 32 {
		wg.Go(func() {
			attack(0, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\nx", "x")
		})
	}
	for range 16 {
		wg.Go(func() {
			attack(1, "GET /evaluate?feature=f&user=slow HTTP/1.1\r\nHost: 127.0.0.1\r\n", "X-Slow: 1\r\n")
		})
	}
	for range 72 {
		wg.Go(func() {
			attack(2, "POST /evaluate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", " ")
		})
	}
	// The flood fills the limit: it has had to close connections.
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, closed, _ := s.conns.counts(); closed > 0 {
			break
		}
		if time.Now().After(deadline) { // a hang guard
			t.Fatal("the flood has not reached the connection limit after 20 s")
		}
	}
	probes(t, addr, 30, 50*time.Millisecond)
	close(stop)
	wg.Wait()
	open, closed, refused := s.conns.counts()
	t.Logf("connections opened by the flood: %d slow /healthz bodies, %d slow headers, %d slow /evaluate bodies; "+
		"%d open, %d closed to make room, %d refused", opened[0], opened[1], opened[2], open, closed, refused)
}

// hold connects, sends head, then drip every 100 ms until the server closes
// the connection or stop is closed.
func hold(addr, head, drip string, stop <-chan struct{}) {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return
	}
	defer c.Close()
	gone := make(chan struct{})
	go func() { io.Copy(io.Discard, c); close(gone) }()
	if _, err := io.WriteString(c, head); err != nil {
		return
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-stop:
			c.Close()
			<-gone
			return
		case <-gone:
			return
		case <-tick.C:
			if _, err := io.WriteString(c, drip); err != nil {
				c.Close()
				<-gone
				return
			}
		}
	}
}

// TestStreamEndsWhenRevokedElsewhere: a token revoked by another process
// (the rollout token command, another instance) ends its open stream, once
// the change feed shows the revocation and the tokens are reloaded.
func TestStreamEndsWhenRevokedElsewhere(t *testing.T) {
	s := &Server{SyncInterval: 20 * time.Millisecond}
	addr := floodServer(t, s)
	ctx := context.Background()
	db, closeDB, err := OpenStore(ctx, s.DBPath)
	if err != nil {
		t.Fatal(err)
	}
	defer closeDB()
	tokens, err := auth.NewTokens(ctx, db, nil) // as the rollout token command does
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := tokens.Create(ctx, "admin", auth.RoleAdmin, time.Now()); err != nil {
		t.Fatal(err)
	}
	_, secret, err := tokens.Create(ctx, "app", auth.RoleEvaluate, time.Now())
	if err != nil {
		t.Fatal(err)
	}

	// Once the server has the token, its stream opens.
	var c net.Conn
	var r *bufio.Reader
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if c, err = net.Dial("tcp", addr); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET /sync/v1/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n", secret)
		r = bufio.NewReader(c)
		res, err := http.ReadResponse(r, nil)
		if err == nil && res.StatusCode == http.StatusOK {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("the stream with a new token: %v %v", res, err)
		}
	}
	defer c.Close()

	if err := tokens.Revoke(ctx, "app", time.Now()); err != nil {
		t.Fatal(err)
	}
	// The deadline only keeps a stream that never ends from hanging the
	// test.
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err = io.Copy(io.Discard, r)
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		t.Errorf("the revoked token's stream goes on")
	}
}
