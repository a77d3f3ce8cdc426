package api

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/rollout/rollout/rollout/feature"
)

// Request bodies. A client that announces a body and sends it a byte at a
// time keeps its connection serving a request, which a connection limit
// spares, for as long as the server waits for the body. So a route that
// takes no body (GET, HEAD, OPTIONS) refuses one at once, with 413, and
// reads none of it; a route that takes one waits for it only so long (its
// body window), and a body left unread when the answer is ready is waited
// for only briefly (unreadGrace): its connection closes after the answer. While a connection
// waits for a body it tells its ConnWatcher, so that a connection limit
// may close it, as one that has not sent a whole request, to make room.

// The body windows: how long a route waits for its request body, from the
// end of the headers. Evaluation's bodies are small. Variables for tests.
var (
	appBodyWindow = 5 * time.Second
	bodyWindow    = 10 * time.Second
)

// unreadGrace is how long a body the handler left unread may still take to
// arrive: net/http reads the rest of a small one before answering, which
// spares a client that is still sending it a connection reset.
const unreadGrace = 250 * time.Millisecond

// ConnWatcher is told when its connection starts and stops waiting for a
// request body. Implementations must be safe for concurrent use and cheap:
// every request with a body calls them.
type ConnWatcher interface {
	WaitingForBody(waiting bool)
}

type connWatcherKey struct{}

// WithConnWatcher returns ctx carrying w, for requests on the connection
// whose context ctx is: an http.Server's ConnContext hook calls it, with
// one watcher per connection.
func WithConnWatcher(ctx context.Context, w ConnWatcher) context.Context {
	return context.WithValue(ctx, connWatcherKey{}, w)
}

// takesBody reports whether routes of method read a request body.
func takesBody(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// bodies is the middleware that bounds the wait for request bodies (see
// above).
func bodies(route Route) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc { return waitForBody(route, next) }
}

func waitForBody(route Route, next echo.HandlerFunc) echo.HandlerFunc {
	if !takesBody(route.Method) {
		return func(c echo.Context) error {
			r := c.Request()
			if r.ContentLength == 0 {
				return next(c)
			}
			// What of the body has not arrived is not waited for: the
			// connection closes after the answer (unless it all had).
			_ = http.NewResponseController(c.Response()).SetReadDeadline(time.Now())
			return feature.Errorf(codeTooLarge, "%s %s takes no request body", r.Method, r.URL.Path)
		}
	}
	window := bodyWindow
	if route.AppBody {
		window = appBodyWindow
	}
	return func(c echo.Context) error {
		r := c.Request()
		if r.ContentLength == 0 {
			return next(c) // no body
		}
		srv, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
		if srv == nil {
			return next(c) // not read from a connection (ServeHTTP called directly)
		}
		now := time.Now()
		deadline := now.Add(window)
		if srv.ReadTimeout > 0 {
			// The server's whole-request deadline comes first.
			if whole := now.Add(srv.ReadTimeout); whole.Before(deadline) {
				deadline = whole
			}
		}
		b := bodyReaders.Get().(*bodyReader)
		*b = bodyReader{body: r.Body, w: c.Response()}
		b.watcher, _ = r.Context().Value(connWatcherKey{}).(ConnWatcher)
		if b.watcher != nil {
			b.watcher.WaitingForBody(true)
		}
		_ = http.NewResponseController(b.w).SetReadDeadline(deadline)
		r.Body = b
		err := next(c)
		if !b.read {
			// The body was not read to its end: net/http reads what is
			// left (up to 256 KB) before answering, so that a client
			// still sending it is not reset, but only for unreadGrace:
			// a body that has not arrived by then is not waited for,
			// and the connection closes after the answer.
			grace := time.Now().Add(unreadGrace)
			if deadline.Before(grace) {
				grace = deadline
			}
			_ = http.NewResponseController(b.w).SetReadDeadline(grace)
			if b.watcher != nil {
				b.watcher.WaitingForBody(false)
			}
			if b.timedOut && !c.Response().Committed {
				err = echo.NewHTTPError(http.StatusRequestTimeout,
					fmt.Sprintf("the request body did not arrive within %v", deadline.Sub(now)))
			}
		}
		r.Body = b.body
		*b = bodyReader{}
		bodyReaders.Put(b)
		return err
	}
}

// bodyReader is a request body that, once read to its end, tells its
// watcher. Its window's read deadline needs no undoing then: net/http,
// as it does whenever a handler reads its body to the end, reads the
// connection in the background from then on without a deadline (to see
// the client go), so that a handler may work on the body for as long as it
// takes without its request's context being canceled.
type bodyReader struct {
	body    io.ReadCloser
	w       http.ResponseWriter
	watcher ConnWatcher // nil: none
	// read is set once the body was read to its end, timedOut when its
	// window passed first.
	read, timedOut bool
}

// bodyReaders are reused: a request with a body allocates none.
var bodyReaders = sync.Pool{New: func() any { return new(bodyReader) }}

func (b *bodyReader) Read(p []byte) (int, error) {
	n, err := b.body.Read(p)
	switch {
	case err == nil || b.read:
	case err == io.EOF:
		b.read = true
		if b.watcher != nil {
			b.watcher.WaitingForBody(false)
		}
	case errors.Is(err, os.ErrDeadlineExceeded):
		b.timedOut = true
	}
	return n, err
}

func (b *bodyReader) Close() error { return b.body.Close() }
