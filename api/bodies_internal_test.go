package api

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/labstack/echo/v4"
)

// pipeListener is a listener whose connections are in-memory pipes, so
// that a server runs inside a synctest bubble, on its fake clock.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *pipeListener) Addr() net.Addr { return &net.UnixAddr{Name: "pipe", Net: "unix"} }

// dial returns the client's end of a new connection.
func (l *pipeListener) dial() net.Conn {
	client, server := net.Pipe()
	l.conns <- server
	return client
}

// TestBodyWindowOnTheClock: on a fake clock, a body sent at once is read
// however long the connection was idle before it (each request's window is
// its own), and a body that stops coming is answered 408 exactly when its
// window ends, and its connection closed.
func TestBodyWindowOnTheClock(t *testing.T) {
	for _, route := range []Route{
		{Method: http.MethodPost, Path: "/app", AppBody: true},
		{Method: http.MethodPost, Path: "/other"},
	} {
		t.Run(route.Path, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				window := bodyWindow
				if route.AppBody {
					window = appBodyWindow
				}
				e := echo.New()
				e.Add(route.Method, route.Path, apply(func(c echo.Context) error {
					b, err := io.ReadAll(c.Request().Body)
					if err != nil {
						return err
					}
					return c.String(http.StatusOK, string(b))
				}, []echo.MiddlewareFunc{bodies(route)}))
				ln := newPipeListener()
				srv := &http.Server{Handler: e}
				served := make(chan error, 1)
				go func() { served <- srv.Serve(ln) }()
				defer func() {
					srv.Close()
					<-served
				}()

				c := ln.dial()
				defer c.Close()
				r := bufio.NewReader(c)
				send := func(announced int, body string) {
					go fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: pipe\r\nContent-Length: %d\r\n\r\n%s", route.Path, announced, body)
				}
				for i := range 3 {
					body := fmt.Sprintf(`{"request":%d}`, i)
					send(len(body), body)
					res, err := http.ReadResponse(r, nil)
					if err != nil {
						t.Fatalf("request %d: %v", i, err)
					}
					got, _ := io.ReadAll(res.Body)
					res.Body.Close()
					if res.StatusCode != http.StatusOK || string(got) != body {
						t.Fatalf("request %d = %d %s, want 200 %s", i, res.StatusCode, got, body)
					}
					time.Sleep(3 * window) // idle past any window: the next request's is its own
				}

				start := time.Now()
				send(100, "{") // 99 bytes never come
				res, err := http.ReadResponse(r, nil)
				if err != nil {
					t.Fatal(err)
				}
				got, _ := io.ReadAll(res.Body)
				res.Body.Close()
				if took := time.Since(start); res.StatusCode != http.StatusRequestTimeout || took != window ||
					!strings.Contains(string(got), fmt.Sprintf("did not arrive within %v", window)) {
					t.Errorf("a body that stops = %d %s after %v, want 408 after its window of %v", res.StatusCode, got, took, window)
				}
				if _, err := r.ReadByte(); err != io.EOF {
					t.Errorf("after the 408 the connection reads %v, want it closed (EOF)", err)
				}
			})
		})
	}
}
