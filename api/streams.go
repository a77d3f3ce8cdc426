package api

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
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

// Streams. A stream (GET /sync/v1/stream) holds its connection for as long
// as its client stays, so streams have a budget of their own, in all
// (Options.MaxStreams, which the binary keeps to half its connection limit)
// and per token (Options.MaxStreamsPerToken): a stream beyond it is refused
// at once, 503 or 429 with Retry-After, and never takes the connections
// that evaluation needs. An open stream ends when its token is revoked or
// its role no longer allows the route (checked whenever the tokens are
// reloaded), and when its client does not read: events wait in a short
// queue behind the write under way, and a client that lets the queue fill,
// or takes longer than a write's window to take one write, is dropped. A
// client whose stream ends reconnects and reads the snapshot again.

// DefaultMaxStreams is the stream budget when Options.MaxStreams is 0: half
// the binary's default connection limit.
const DefaultMaxStreams = 2048

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
// tests.
var streamWriteWindow = 5 * time.Second

// errStreamEnded is send's error once the stream's writer has stopped.
var errStreamEnded = errors.New("the stream ended")

// streams counts the open streams and ends those whose token no longer
// allows them. Safe for concurrent use.
type streams struct {
	auth          *Auth // nil: everything is open
	log           *slog.Logger
	max, perToken int

	mu      sync.Mutex
	open    int
	byToken map[string]int // open streams by token ID ("": no token)
	warned  bool           // that the budget was reached

	refused *prometheus.CounterVec // reason: budget, token
	ended   *prometheus.CounterVec // reason: revoked, slow
}

func newStreams(opts Options, log *slog.Logger, m *Metrics) *streams {
	st := &streams{auth: opts.Auth, log: log, max: opts.MaxStreams, perToken: opts.MaxStreamsPerToken, byToken: map[string]int{}}
	if st.max <= 0 {
		st.max = DefaultMaxStreams
	}
	if st.perToken <= 0 {
		st.perToken = max(st.max/2, 1)
	}
	st.refused = register(m, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rollout_streams_refused_total",
		Help: "Streams refused at their budget: budget (the server's), token (the token's share).",
	}, []string{"reason"}))
	st.ended = register(m, prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "rollout_streams_ended_total",
		Help: "Streams the server ended: revoked (the token no longer allows them), slow (the client did not read).",
	}, []string{"reason"}))
	register(m, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "rollout_streams_open",
		Help: "Streams open (GET /sync/v1/stream).",
	}, func() float64 { return float64(st.openCount()) }))
	return st
}

// register registers c in m's registry, or returns the collector already
// registered in its place (a Metrics given to a second API).
func register[C prometheus.Collector](m *Metrics, c C) C {
	if err := m.reg.Register(c); err != nil {
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
func (st *streams) openCount() int {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.open
}

// middleware admits a stream (a Route.Stream) within the budgets and ends
// it, by cancelling its request's context, when its token no longer allows
// the route. It runs after the access check, so that only allowed streams
// count.
func (st *streams) middleware(route Route) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc { return st.admitted(route.Access, next) }
}

func (st *streams) admitted(need auth.Permission, next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		// The credentials alone, read again at every reload of the
		// tokens while the handler runs.
		creds := &http.Request{Header: r.Header.Clone()}
		var key string
		if tok, _, ok := st.auth.identify(creds); ok {
			key = tok.ID
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
		if st.auth != nil && st.auth.tokens != nil {
			watch.Go(func() { st.watch(ctx, cancel, creds, need) })
		}
		err := next(c)
		cancel()
		watch.Wait()
		return err
	}
}

// admit counts a new stream of token key, or refuses it beyond the budgets.
func (st *streams) admit(key string) error {
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

func (st *streams) release(key string) {
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
func (st *streams) watch(ctx context.Context, cancel context.CancelFunc, creds *http.Request, need auth.Permission) {
	for {
		changed := st.auth.tokens.Changed()
		if !st.auth.allows(creds, need) {
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

// allows reports whether the credentials of r allow need now, as the
// access check (Auth.middleware) would decide for a request with them.
func (a *Auth) allows(r *http.Request, need auth.Permission) bool {
	if !a.Enforced() || need == Public {
		return true
	}
	tok, _, ok := a.identify(r)
	return ok && tok.Role.Allows(need)
}

// streamWriter writes a stream's events from a goroutine of its own, so
// that the stream sees a client that does not read: its events queue up
// behind the blocked write, and one too many drops it.
type streamWriter struct {
	st *streams
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
func (st *streams) writer(c echo.Context) *streamWriter { return st.newWriter(c.Response()) }

func (st *streams) newWriter(w http.ResponseWriter) *streamWriter {
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
	window := streamWriteWindow + time.Duration(len(b))*time.Second/streamMinRate
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
