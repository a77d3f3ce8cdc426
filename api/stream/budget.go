package stream

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/feature"
)

// The budget of streams. A stream holds its connection for as long as its
// client stays, so streams have a budget of their own, in all (Options.Max,
// which the binary keeps to half its connection limit) and per token
// (Options.PerToken): a stream beyond it is refused
// at once, 503 or 429 with Retry-After, and never takes the connections
// that evaluation needs. An open stream ends when its token is revoked or
// its role no longer allows the route (checked whenever the tokens are
// reloaded), and when its client does not read: events wait in a short
// queue behind the write under way, and a client that lets the queue fill,
// or takes longer than a write's window to take one write, is dropped. A
// client whose stream ends reconnects and reads the snapshot again.

// DefaultMax is the stream budget when Options.Max is 0: half the binary's
// default connection limit.
const DefaultMax = 2048

const (
	// streamQueue and streamQueueBytes bound the events that wait behind
	// the write under way: one more drops the client. An event is queued
	// whatever its size when none waits.
	streamQueue      = 16
	streamQueueBytes = 256 << 10
	// streamMinRate is the slowest a client may take a large event, in
	// bytes a second: a write's window grows by its size at this rate.
	streamMinRate = 64 << 10
	// streamRetryAfter is the Retry-After of a refused stream, in seconds.
	streamRetryAfter = "10"
)

// streamWriteWindow bounds each write of a stream, beyond the time its size
// takes at streamMinRate: the server's WriteTimeout is for whole answers,
// and a stream's deadline is set before every write instead. A variable for
// tests; a Server keeps the one it was made with (Server.WriteWindow).
var streamWriteWindow = 5 * time.Second

// errStreamEnded is send's error once the stream's writer has stopped.
var errStreamEnded = errors.New("the stream ended")

// register registers c in reg, or returns the collector already registered
// in its place (the metrics given to a second API).
func register[C prometheus.Collector](reg prometheus.Registerer, c C) C {
	if err := reg.Register(c); err != nil {
		if are, ok := errors.AsType[prometheus.AlreadyRegisteredError](err); ok {
			if prev, ok := are.ExistingCollector.(C); ok {
				return prev
			}
		}
		panic(err)
	}
	return c
}

// openCount returns the open streams.
func (st *Server) openCount() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.open
}

// Admit returns the middleware that admits a stream (package api's
// Route.Stream) within the budgets and ends it, by cancelling its request's
// context, when its credentials no longer allow need, the route's access.
// It runs after the access check, so that only allowed streams count.
func (st *Server) Admit(need auth.Permission) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc { return st.admitted(need, next) }
}

func (st *Server) admitted(need auth.Permission, next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		// The credentials alone, read again at every reload of the
		// tokens while the handler runs.
		creds := &http.Request{Header: r.Header.Clone()}
		var key string
		if st.access != nil {
			key = st.access.TokenID(creds)
		}
		if err := st.admit(key); err != nil {
			c.Response().Header().Set("Retry-After", streamRetryAfter)
			return err
		}
		defer st.release(key)
		ctx, cancel := context.WithCancel(r.Context())
		defer cancel()
		c.SetRequest(r.WithContext(ctx))
		var watch sync.WaitGroup
		if st.access != nil {
			watch.Go(func() { st.watch(ctx, cancel, creds, need) })
		}
		err := next(c)
		cancel()
		watch.Wait()
		return err
	}
}

// admit counts a new stream of token key, or refuses it beyond the budgets.
func (st *Server) admit(key string) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	switch {
	case st.open >= st.max:
		st.refused.WithLabelValues("budget").Inc()
		if !st.warned {
			st.warned = true
			st.log.Warn("stream budget reached: new streams are refused until some end (see rollout_streams_refused_total)",
				"max_streams", st.max)
		}
		return feature.Errorf(feature.EUnavailable, "this server has %d streams open, its most: read the snapshot meanwhile, "+
			"and open the stream again later", st.max)
	case st.byToken[key] >= st.perToken:
		st.refused.WithLabelValues("token").Inc()
		return echo.NewHTTPError(http.StatusTooManyRequests, fmt.Sprintf("this token (or, with none, the API) has %d streams open, "+
			"its most: close one, or give each app a token of its own", st.perToken))
	}
	st.open++
	st.byToken[key]++
	return nil
}

func (st *Server) release(key string) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.open--
	if st.byToken[key]--; st.byToken[key] == 0 {
		delete(st.byToken, key)
	}
}

// watch cancels the stream when its credentials no longer allow need: at
// every reload of the tokens (a revoked token, a session signed out, a role
// that no longer has the route's permission), until ctx is done.
func (st *Server) watch(ctx context.Context, cancel context.CancelFunc, creds *http.Request, need auth.Permission) {
	for {
		changed := st.access.Changed()
		if !st.access.Allows(creds, need) {
			st.ended.WithLabelValues("revoked").Inc()
			cancel()
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}

// streamWriter writes a stream's events from a goroutine of its own, so
// that the stream sees a client that does not read: its events queue up
// behind the blocked write, and one too many drops it.
type streamWriter struct {
	st *Server
	w  http.ResponseWriter

	mu     sync.Mutex
	queue  [][]byte
	queued int // bytes in queue

	wake    chan struct{} // a send for the writer, buffered
	halted  atomic.Bool
	stopped chan struct{} // closed by halt
	done    chan struct{} // closed when the writer returns
	once    sync.Once
	wg      sync.WaitGroup
}

// writer starts the writer of the stream answering c. Its caller sends
// events with send until ended is closed, and calls stop before it
// returns.
func (st *Server) writer(c echo.Context) *streamWriter { return st.newWriter(c.Response()) }

func (st *Server) newWriter(w http.ResponseWriter) *streamWriter {
	sw := &streamWriter{st: st, w: w, wake: make(chan struct{}, 1),
		stopped: make(chan struct{}), done: make(chan struct{})}
	sw.wg.Go(sw.run)
	return sw
}

// send queues a copy of b to be written after what is queued. It returns
// errStreamEnded once the writer has stopped, and when the queue is full:
// the client does not read, and is dropped.
func (sw *streamWriter) send(b []byte) error {
	if sw.halted.Load() {
		return errStreamEnded
	}
	sw.mu.Lock()
	full := len(sw.queue) >= streamQueue || len(sw.queue) > 0 && sw.queued+len(b) > streamQueueBytes
	if !full {
		sw.queue = append(sw.queue, bytes.Clone(b))
		sw.queued += len(b)
	}
	sw.mu.Unlock()
	if full {
		if sw.halt() {
			sw.st.ended.WithLabelValues("slow").Inc()
		}
		return errStreamEnded
	}
	select {
	case sw.wake <- struct{}{}:
	default:
	}
	return nil
}

// ended is closed when the writer has stopped: the client was dropped, or
// is gone.
func (sw *streamWriter) ended() <-chan struct{} { return sw.done }

// stop stops the writer, dropping what is queued, and waits for it. The
// connection closes after the answer.
func (sw *streamWriter) stop() {
	sw.halt()
	sw.wg.Wait()
}

// halt stops the writer and interrupts a write under way. It reports
// whether this call halted it.
func (sw *streamWriter) halt() bool {
	first := false
	sw.once.Do(func() {
		first = true
		sw.halted.Store(true) // before the deadline: see write
		close(sw.stopped)
		_ = http.NewResponseController(sw.w).SetWriteDeadline(time.Now())
	})
	return first
}

func (sw *streamWriter) run() {
	defer close(sw.done)
	for {
		select {
		case <-sw.wake:
		case <-sw.stopped:
			return
		}
		for {
			sw.mu.Lock()
			if len(sw.queue) == 0 {
				sw.mu.Unlock()
				break
			}
			b := sw.queue[0]
			sw.queue[0] = nil
			sw.queue = sw.queue[1:]
			sw.queued -= len(b)
			sw.mu.Unlock()
			if err := sw.write(b); err != nil {
				if sw.halt() && errors.Is(err, os.ErrDeadlineExceeded) {
					sw.st.ended.WithLabelValues("slow").Inc()
				}
				return
			}
		}
	}
}

// write writes b and flushes it within its window.
func (sw *streamWriter) write(b []byte) error {
	rc := http.NewResponseController(sw.w)
	window := sw.st.window + time.Duration(len(b))*time.Second/streamMinRate
	if err := rc.SetWriteDeadline(time.Now().Add(window)); err != nil {
		return err
	}
	// halt sets its deadline after it marks the writer halted: either
	// this sees the mark, or halt's deadline comes after this one's.
	if sw.halted.Load() {
		return errStreamEnded
	}
	if _, err := sw.w.Write(b); err != nil {
		return err
	}
	return rc.Flush()
}
