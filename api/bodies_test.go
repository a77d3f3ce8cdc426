package api_test

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/api"
)

// rawConn is a connection to a test server on which a test writes what it
// wants, as slowly as it wants.
type rawConn struct {
	net.Conn
	r *bufio.Reader
}

func dialRaw(t *testing.T, url string) *rawConn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	// The deadline only keeps a server that waits for what never comes
	// from hanging the test.
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	return &rawConn{Conn: c, r: bufio.NewReader(c)}
}

// answer reads an answer to a request of method.
func (c *rawConn) answer(t *testing.T, method string) (*http.Response, string) {
	t.Helper()
	res, err := http.ReadResponse(c.r, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("read the answer: %v", err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res, string(body)
}

// closed reports whether the server closed the connection (after anything
// left to read).
func (c *rawConn) closed() bool {
	_, err := io.Copy(io.Discard, c.r)
	ne, ok := errors.AsType[net.Error](err)
	return !ok || !ne.Timeout()
}

// TestBodyRefusedWhereNoneIsTaken: a route that takes no body refuses a
// request announcing one at once, without waiting for it, with a JSON 413,
// and closes the connection; a client that announced 100,000 bytes and sent
// one gets its answer all the same.
func TestBodyRefusedWhereNoneIsTaken(t *testing.T) {
	s := newServer(t, "", api.Options{})
	s.seed()
	for _, tt := range []struct{ method, path, body string }{
		{"GET", "/healthz", "Content-Length: 100000\r\n\r\nx"},
		{"HEAD", "/healthz", "Content-Length: 100000\r\n\r\nx"},
		{"GET", "/readyz", "Content-Length: 100000\r\n\r\nx"},
		{"GET", "/evaluate?feature=checkout&user=u1", "Content-Length: 100000\r\n\r\nx"},
		{"GET", "/sync/v1/snapshot", "Content-Length: 100000\r\n\r\nx"},
		{"GET", "/sync/v1/stream", "Content-Length: 100000\r\n\r\nx"},
		{"GET", "/api/features", "Content-Length: 100000\r\n\r\nx"},
		{"GET", "/healthz", "Transfer-Encoding: chunked\r\n\r\n1\r\nx"},
		{"GET", "/evaluate?feature=checkout&user=u1", "Transfer-Encoding: chunked\r\n\r\n1\r\nx"},
		{"GET", "/no/such/route", "Content-Length: 100000\r\n\r\nx"},
	} {
		t.Run(tt.method+" "+tt.path+" "+strings.Fields(tt.body)[0], func(t *testing.T) {
			c := dialRaw(t, s.URL)
			fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\n%s", tt.method, tt.path, tt.body)
			res, body := c.answer(t, tt.method)
			if res.StatusCode != http.StatusRequestEntityTooLarge {
				t.Errorf("%s %s with a body = %d %s, want 413", tt.method, tt.path, res.StatusCode, body)
			}
			if tt.method != "HEAD" && (!strings.Contains(body, `"code":"too_large"`) || !strings.Contains(body, "takes no request body")) {
				t.Errorf("%s %s with a body: %s, want a too_large JSON error", tt.method, tt.path, body)
			}
			if !c.closed() {
				t.Errorf("%s %s with a body: the connection stays open", tt.method, tt.path)
			}
		})
	}

	// Without a body, the same connection serves request after request.
	c := dialRaw(t, s.URL)
	for range 3 {
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n")
		if res, body := c.answer(t, "GET"); res.StatusCode != http.StatusOK {
			t.Errorf("GET /healthz = %d %s, want 200", res.StatusCode, body)
		}
	}
}

// TestBodyWindow: each route that takes a body waits for it only so long
// (its window, shortened here): a client that trickles its body, which
// never ends, is answered 408 in the route's shape and its connection
// closed, however loaded the machine. How long the window is, and that a
// body sent at once is read whenever it comes, is
// TestBodyWindowOnTheClock's, on a fake clock.
func TestBodyWindow(t *testing.T) {
	api.SetBodyWindows(t, 200*time.Millisecond, 300*time.Millisecond)
	s := newServer(t, "", api.Options{})
	s.seed()
	for _, tt := range []struct{ path, want string }{
		{"/evaluate", `"code":"request_timeout"`},
		{"/ofrep/v1/evaluate/flags", `"errorDetails":"the request body did not arrive within 200ms"`},
		{"/api/features", `"code":"request_timeout"`},
		{"/api/features/checkout/preview", `"code":"request_timeout"`},
	} {
		t.Run(tt.path, func(t *testing.T) {
			c := dialRaw(t, s.URL)
			fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", tt.path)
			stop := make(chan struct{})
			defer close(stop)
			go func() { // a byte every 50 ms, until the server hangs up
				for {
					select {
					case <-stop:
						return
					case <-time.After(50 * time.Millisecond):
					}
					if _, err := c.Write([]byte(" ")); err != nil {
						return
					}
				}
			}()
			res, body := c.answer(t, "POST")
			if res.StatusCode != http.StatusRequestTimeout || !strings.Contains(body, tt.want) {
				t.Errorf("POST %s trickled = %d %s, want 408 %s", tt.path, res.StatusCode, body, tt.want)
			}
			if !c.closed() {
				t.Errorf("POST %s trickled: the connection stays open", tt.path)
			}
		})
	}
}

// TestBodyNotWaitedForWhenRefused: a request refused before its body is
// read (no token here) is answered at once, and its connection closed,
// however slowly the body comes.
func TestBodyNotWaitedForWhenRefused(t *testing.T) {
	url := newGuardedServer(t).url
	for _, path := range []string{"/api/features", "/evaluate", "/ofrep/v1/evaluate/flags", "/api/exposures"} {
		t.Run(path, func(t *testing.T) {
			c := dialRaw(t, url)
			fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 60000\r\n\r\n{", path)
			if res, body := c.answer(t, "POST"); res.StatusCode != http.StatusUnauthorized {
				t.Errorf("POST %s without a token = %d %s, want 401", path, res.StatusCode, body)
			}
			if !c.closed() {
				t.Errorf("POST %s without a token: the connection stays open", path)
			}
		})
	}
}
