package api

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
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

// TestBodyReadLeavesNoDeadline: once a handler has read its body to the
// end, the connection has no read deadline, as net/http leaves it for any
// body read: a handler that works past the server's ReadTimeout after
// reading its body keeps its request's context, and answers.
func TestBodyReadLeavesNoDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const readTimeout = 30 * time.Second
		route := Route{Method: http.MethodPost, Path: "/app", AppBody: true}
		e := echo.New()
		e.Add(route.Method, route.Path, apply(func(c echo.Context) error {
			if _, err := io.ReadAll(c.Request().Body); err != nil {
				return err
			}
			time.Sleep(2 * readTimeout) // working on the body
			return c.String(http.StatusOK, fmt.Sprint(c.Request().Context().Err()))
		}, []echo.MiddlewareFunc{bodies(route)}))
		ln := newPipeListener()
		srv := &http.Server{Handler: e, ReadTimeout: readTimeout}
		served := make(chan error, 1)
		go func() { served <- srv.Serve(ln) }()
		defer func() {
			srv.Close()
			<-served
		}()

		c := ln.dial()
		defer c.Close()
		go fmt.Fprintf(c, "POST /app HTTP/1.1\r\nHost: pipe\r\nContent-Length: 2\r\n\r\n{}")
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != http.StatusOK || string(got) != "<nil>" {
			t.Errorf("a handler working %v after reading its body: %d, context error %s, want 200 and <nil>", 2*readTimeout, res.StatusCode, got)
		}
	})
}

// deadlineConn counts the read deadlines set on its connection.
type deadlineConn struct {
	net.Conn
	reads *atomic.Int64
}

func (c deadlineConn) SetReadDeadline(t time.Time) error {
	c.reads.Add(1)
	return c.Conn.SetReadDeadline(t)
}

// BenchmarkBodyWindow: requests with a body of 2 bytes on one keep-alive
// connection, read by a handler alone (the baseline) and through the
// body window: what the window adds, in read deadlines set on the
// connection (deadlines/op; each changes a runtime timer) and in time.
func BenchmarkBodyWindow(b *testing.B) {
	route := Route{Method: http.MethodPost, Path: "/app", AppBody: true}
	read := func(c echo.Context) error {
		if _, err := io.Copy(io.Discard, c.Request().Body); err != nil {
			return err
		}
		return c.NoContent(http.StatusNoContent)
	}
	for _, bench := range []struct {
		name string
		mw   []echo.MiddlewareFunc
	}{{"baseline", nil}, {"window", []echo.MiddlewareFunc{bodies(route)}}} {
		b.Run(bench.name, func(b *testing.B) {
			e := echo.New()
			e.Add(route.Method, route.Path, apply(read, bench.mw))
			var reads atomic.Int64
			ln := newPipeListener()
			srv := &http.Server{Handler: e, ReadTimeout: 30 * time.Second, ReadHeaderTimeout: 5 * time.Second,
				ConnContext: func(ctx context.Context, _ net.Conn) context.Context { return ctx }}
			served := make(chan error, 1)
			go func() { served <- srv.Serve(deadlineListener{ln, &reads}) }()
			defer func() {
				srv.Close()
				<-served
			}()
			c := ln.dial()
			defer c.Close()
			r := bufio.NewReader(c)
			req := []byte("POST /app HTTP/1.1\r\nHost: pipe\r\nContent-Length: 2\r\n\r\n{}")
			b.ReportAllocs()
			for b.Loop() {
				go c.Write(req)
				res, err := http.ReadResponse(r, nil)
				if err != nil {
					b.Fatal(err)
				}
				res.Body.Close()
				if res.StatusCode != http.StatusNoContent {
					b.Fatalf("status %d", res.StatusCode)
				}
			}
			b.ReportMetric(float64(reads.Load())/float64(b.N), "deadlines/op")
		})
	}
}

// deadlineListener gives its connections to deadlineConn.
type deadlineListener struct {
	*pipeListener
	reads *atomic.Int64
}

func (l deadlineListener) Accept() (net.Conn, error) {
	c, err := l.pipeListener.Accept()
	if err != nil {
		return nil, err
	}
	return deadlineConn{c, l.reads}, nil
}
