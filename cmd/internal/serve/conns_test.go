package serve

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// fakeConn is a connection that records whether it was closed.
type fakeConn struct {
	net.Conn
	name   string
	closed bool
}

func (c *fakeConn) Close() error { c.closed = true; return nil }

// Steps of TestConnLimiterPolicy beside the ConnStates: the API tells the
// connection's ConnWatcher that it waits for a request body, or read it.
const (
	waitingForBody http.ConnState = 100 + iota
	bodyRead
)

// TestConnLimiterPolicy: at the limit, a newcomer closes the longest idle
// connection, else the oldest that has not sent a whole request (headers
// or body), and is refused only when every connection is serving a request
// it has read.
func TestConnLimiterPolicy(t *testing.T) {
	type step struct {
		conn  string
		state http.ConnState
	}
	tests := []struct {
		name        string
		steps       []step // on a limiter of 3
		closed      string // the connections closed, in order of name
		open        int
		wantRefused int
	}{
		{"under the limit", []step{{"a", http.StateNew}, {"b", http.StateNew}, {"c", http.StateNew}}, "", 3, 0},
		{"longest idle goes first", []step{
			{"a", http.StateNew}, {"b", http.StateNew}, {"c", http.StateNew},
			{"a", http.StateActive}, {"b", http.StateActive}, {"c", http.StateActive},
			{"b", http.StateIdle}, {"a", http.StateIdle}, {"c", http.StateIdle},
			{"d", http.StateNew}, {"e", http.StateNew},
		}, "a b", 3, 0},
		{"idle before fresh", []step{
			{"a", http.StateNew}, {"b", http.StateNew}, {"c", http.StateNew},
			{"c", http.StateActive}, {"c", http.StateIdle},
			{"d", http.StateNew},
		}, "c", 3, 0},
		{"oldest fresh when none is idle", []step{
			{"a", http.StateNew}, {"b", http.StateNew}, {"c", http.StateNew},
			{"a", http.StateActive},
			{"d", http.StateNew},
		}, "b", 3, 0},
		{"an idle connection that turned active is kept", []step{
			{"a", http.StateNew}, {"b", http.StateNew}, {"c", http.StateNew},
			{"a", http.StateActive}, {"a", http.StateIdle}, {"a", http.StateActive},
			{"b", http.StateActive}, {"b", http.StateIdle},
			{"d", http.StateNew},
		}, "b", 3, 0},
		{"newcomer refused when all serve requests", []step{
			{"a", http.StateNew}, {"b", http.StateNew}, {"c", http.StateNew},
			{"a", http.StateActive}, {"b", http.StateActive}, {"c", http.StateActive},
			{"d", http.StateNew},
		}, "d", 3, 1},
		{"closed and hijacked connections free their place", []step{
			{"a", http.StateNew}, {"b", http.StateNew}, {"c", http.StateNew},
			{"a", http.StateActive}, {"b", http.StateActive}, {"c", http.StateActive},
			{"a", http.StateClosed}, {"b", http.StateHijacked},
			{"d", http.StateNew}, {"e", http.StateNew},
		}, "", 3, 0},
		{"a connection waiting for its request body goes when none is idle or fresh", []step{
			{"a", http.StateNew}, {"b", http.StateNew}, {"c", http.StateNew},
			{"a", http.StateActive}, {"b", http.StateActive}, {"c", http.StateActive},
			{"b", waitingForBody},
			{"d", http.StateNew},
		}, "b", 3, 0},
		{"the oldest of those waiting for their bodies", []step{
			{"a", http.StateNew}, {"b", http.StateNew}, {"c", http.StateNew},
			{"a", http.StateActive}, {"b", http.StateActive}, {"c", http.StateActive},
			{"c", waitingForBody}, {"b", waitingForBody},
			{"d", http.StateNew},
		}, "b", 3, 0},
		{"the oldest of those sending their headers or their body", []step{
			{"a", http.StateNew}, {"b", http.StateNew}, {"c", http.StateNew},
			{"a", http.StateActive}, {"a", waitingForBody}, {"b", http.StateActive},
			{"d", http.StateNew}, // closes a, the oldest
			{"d", http.StateActive}, {"b", waitingForBody},
			{"e", http.StateNew}, // closes b, older than c
		}, "a b", 3, 0},
		{"idle before waiting for a body", []step{
			{"a", http.StateNew}, {"b", http.StateNew}, {"c", http.StateNew},
			{"a", http.StateActive}, {"a", waitingForBody}, {"b", http.StateActive}, {"b", http.StateIdle},
			{"d", http.StateNew},
		}, "b", 3, 0},
		{"a body read in full is served", []step{
			{"a", http.StateNew}, {"b", http.StateNew}, {"c", http.StateNew},
			{"a", http.StateActive}, {"b", http.StateActive}, {"c", http.StateActive},
			{"a", waitingForBody}, {"a", bodyRead},
			{"d", http.StateNew},
		}, "d", 3, 1},
		{"a closed connection's late states are ignored", []step{
			{"a", http.StateNew}, {"b", http.StateNew}, {"c", http.StateNew},
			{"a", http.StateActive}, {"a", http.StateIdle},
			{"d", http.StateNew}, // closes a
			{"a", http.StateActive}, {"a", http.StateIdle}, {"a", http.StateClosed},
		}, "a", 3, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conns := map[string]*fakeConn{}
			l := newConnLimiter(3, nil)
			for _, s := range tt.steps {
				c, ok := conns[s.conn]
				if !ok {
					c = &fakeConn{name: s.conn}
					conns[s.conn] = c
				}
				switch s.state {
				case waitingForBody, bodyRead:
					if t, ok := l.lookup.Load(c); ok {
						t.(*tracked).WaitingForBody(s.state == waitingForBody)
					}
				default:
					l.ConnState(c, s.state)
				}
			}
			var closed []string
			for _, name := range []string{"a", "b", "c", "d", "e"} {
				if c := conns[name]; c != nil && c.closed {
					closed = append(closed, name)
				}
			}
			open, _, refused := l.counts()
			if got := strings.Join(closed, " "); got != tt.closed || open != tt.open || refused != tt.wantRefused {
				t.Errorf("closed %q, %d open, %d refused; want closed %q, %d open, %d refused",
					got, open, refused, tt.closed, tt.open, tt.wantRefused)
			}
		})
	}
}

// TestConnLimit: the bound fits in the open-file limit.
func TestConnLimit(t *testing.T) {
	tests := []struct {
		max    int
		nofile uint64
		want   int
		err    string
	}{
		{0, 1 << 20, DefaultMaxConns, ""},
		{0, 1024, 512, ""},
		{0, 0, DefaultMaxConns, ""}, // no limit known
		{100, 1024, 100, ""},
		{960, 1024, 960, ""},
		{961, 1024, 0, "does not fit in the open-file limit of 1024"},
		{10, 100, 0, "raise it"},
		{-1, 1024, 0, "positive"},
	}
	for _, tt := range tests {
		got, err := (&Server{MaxConns: tt.max}).connLimit(tt.nofile)
		if got != tt.want || (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
			t.Errorf("connLimit(max %d, nofile %d) = %d, %v; want %d, %q", tt.max, tt.nofile, got, err, tt.want, tt.err)
		}
	}
}

// TestIdleConnectionFlood serves on loopback with room for 100 connections
// and opens 500 keep-alive connections that each make a request and then
// idle: every one is answered, the server never holds more than 100, the
// oldest are the ones closed, and evaluation still answers.
func TestIdleConnectionFlood(t *testing.T) {
	const limit, flood = 100, 500
	// The idle timeout is long so that only the limit closes connections.
	s := &Server{Addr: "127.0.0.1:0", DBPath: filepath.Join(t.TempDir(), "rollout.db"), MaxConns: limit, IdleTimeout: time.Hour}
	if err := s.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	addr := strings.TrimPrefix(s.URL(), "http://")
	res, err := http.Post(s.URL()+"/api/features", "application/json",
		strings.NewReader(`{"key":"f","buckets":[{"name":"A","replicas":3},{"name":"B","replicas":3}]}`))
	if err != nil || res.StatusCode != 201 {
		t.Fatalf("create feature: %v %v", res, err)
	}
	res.Body.Close()
	http.DefaultClient.CloseIdleConnections()

	conns := make([]*idleConn, flood)
	for i := range conns {
		c, err := dialIdle(addr, "/healthz")
		if err != nil {
			t.Fatalf("connection %d of the flood: %v", i, err)
		}
		t.Cleanup(func() { c.Close() })
		conns[i] = c
		// The server has handled this connection's arrival: it is counted.
		if open, _, _ := s.conns.counts(); open > limit {
			t.Fatalf("after %d connections the server holds %d, want at most %d", i+1, open, limit)
		}
	}

	// A new client is answered, on a new connection.
	c, err := dialIdle(addr, "/evaluate?feature=f&user=u1")
	if err != nil {
		t.Fatalf("evaluate under the flood: %v", err)
	}
	if c.status != 200 {
		t.Errorf("evaluate under the flood = %d, want 200", c.status)
	}
	c.Close()

	open, closed, refused := s.conns.counts()
	t.Logf("after %d idle connections and one evaluation: %d open, %d closed to make room, %d refused", flood, open, closed, refused)
	if open > limit || closed < flood+1-limit || refused != 0 {
		t.Errorf("%d open, %d closed, %d refused; want at most %d open, at least %d closed, none refused",
			open, closed, refused, limit, flood+1-limit)
	}
	// The oldest connection was closed by the server; the newest still
	// serves requests.
	if err := conns[0].expectClosed(); err != nil {
		t.Errorf("the oldest idle connection: %v", err)
	}
	if status, err := conns[flood-1].get("/healthz"); err != nil || status != 200 {
		t.Errorf("the newest idle connection: GET /healthz = %d, %v; want 200", status, err)
	}
}

// idleConn is a raw keep-alive connection.
type idleConn struct {
	net.Conn
	r      *bufio.Reader
	status int // of the first request
}

// dialIdle connects, makes one request and reads its answer, leaving the
// connection open and idle.
func dialIdle(addr, path string) (*idleConn, error) {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return nil, err
	}
	c := &idleConn{Conn: conn, r: bufio.NewReader(conn)}
	if c.status, err = c.get(path); err != nil {
		conn.Close()
		return nil, err
	}
	return c, nil
}

func (c *idleConn) get(path string) (int, error) {
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path); err != nil {
		return 0, err
	}
	res, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return 0, err
	}
	defer res.Body.Close()
	_, err = io.Copy(io.Discard, res.Body)
	return res.StatusCode, err
}

// expectClosed reads until the server's end of the connection closes. The
// deadline only keeps a broken server from hanging the test.
func (c *idleConn) expectClosed() error {
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := c.r.Read(make([]byte, 1))
	if err == io.EOF || err != nil && strings.Contains(err.Error(), "reset") {
		return nil
	}
	return fmt.Errorf("read %d bytes, %v; want the connection closed", n, err)
}

// BenchmarkConnStates: what a request's two moves of its connection cost
// (active, then idle), from as many goroutines as there are cores, over
// 4,096 open connections taken in turn (so that, as in a server, the state
// is seldom in cache): a connection whose state is looked up (the
// baseline, as for any connection not accepted by the limiter's listener)
// and a trackedConn, whose state is beside it.
func BenchmarkConnStates(b *testing.B) {
	for _, kind := range []string{"looked-up", "beside"} {
		b.Run(kind, func(b *testing.B) {
			l := newConnLimiter(4096, nil)
			conns := make([]net.Conn, 4096)
			for i := range conns {
				conns[i] = &fakeConn{name: strconv.Itoa(i)}
				if kind == "beside" {
					conns[i] = &trackedConn{}
				}
				l.ConnContext(context.Background(), conns[i])
				l.ConnState(conns[i], http.StateNew)
			}
			var next atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				i := int(next.Add(1))
				for pb.Next() {
					c := conns[i%len(conns)]
					l.ConnState(c, http.StateActive)
					l.ConnState(c, http.StateIdle)
					i += 2 * 7919 // another connection, far in memory
				}
			})
		})
	}
}
