package serve

import (
	"context"
	"net"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/rollout/rollout/api"
)

// connLimiter bounds the open connections of an http.Server through its
// ConnState and ConnContext hooks. When a connection arrives with the limit
// reached, it closes the connection that has been idle the longest to make
// room; with none idle, the oldest that has not yet sent a whole request,
// still sending its headers or its body (the API says which wait for their
// body through api.ConnWatcher), so that a newcomer, younger than any
// flood's, keeps its place; and only when every connection is serving a
// request it has read does it close the newcomer. A
// flood of idle keep-alive connections, or of slow headers or slow bodies,
// therefore cannot hold the process's file descriptors and lock out new
// clients: their connections push the flood's out. Streams, which serve one
// request for as long as they last, are bounded by the API (api.Options.
// MaxStreams) well below the limit.
//
// A connection closed while idle may have just been sent a request the
// server has not read yet; clients retry such a request on a new connection
// as they do after the server's idle timeout (Go's, curl's and browsers'
// HTTP clients do for idempotent requests).
//
// Every request moves its connection from idle to active and back, so those
// two moves take no lock, allocate nothing and look nothing up: each
// connection's state is a few atomic words kept beside it (the listener
// that connLimiter.listener returns wraps each TCP connection with them),
// or, for a connection of another kind, found through a lock-free map. Choosing whom
// to close scans the connections, under the lock, only when the limit is
// reached.
//
// Its methods are safe for concurrent use.
type connLimiter struct {
	max int
	// full is called once, the first time a connection arrives with the
	// limit reached, from a goroutine of its own that wait waits for.
	full      func()
	callbacks sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]*tracked // every open connection counted
	// closed counts the connections closed to make room, refused the
	// newcomers closed for want of any.
	closed, refused int
	warned          bool

	// lookup is conns again, read without mu, for connections that are not
	// trackedConns.
	lookup sync.Map // net.Conn → *tracked
	// seq orders arrivals and the moments connections went idle.
	seq atomic.Int64
}

// tracked is the state of one connection: serving a request (busy), idle
// between requests (idle), or neither, accepted with no request read yet;
// body is set while a request it serves waits for its body; since is the
// seq of its arrival or of its last going idle.
type tracked struct {
	busy, idle, body atomic.Bool
	since            atomic.Int64
}

// WaitingForBody is api.ConnWatcher's.
func (t *tracked) WaitingForBody(waiting bool) { t.body.Store(waiting) }

// trackedConn is a TCP connection with its state beside it.
type trackedConn struct {
	*net.TCPConn
	state tracked
}

// listener returns ln, its TCP connections made trackedConns: the
// http.Server's hooks then find their state without looking it up.
func (l *connLimiter) listener(ln net.Listener) net.Listener { return trackingListener{ln} }

type trackingListener struct{ net.Listener }

func (ln trackingListener) Accept() (net.Conn, error) {
	c, err := ln.Listener.Accept()
	if tcp, ok := c.(*net.TCPConn); ok {
		return &trackedConn{TCPConn: tcp}, err
	}
	return c, err
}

// tracking returns the state of c: beside it, or the one ConnContext made.
func (l *connLimiter) tracking(c net.Conn) (*tracked, bool) {
	if tc, ok := c.(*trackedConn); ok {
		return &tc.state, true
	}
	t, ok := l.lookup.Load(c)
	if !ok {
		return nil, false
	}
	return t.(*tracked), true
}

func newConnLimiter(max int, full func()) *connLimiter {
	return &connLimiter{max: max, full: full, conns: map[net.Conn]*tracked{}}
}

// wait waits for the call of full, if one was made.
func (l *connLimiter) wait() { l.callbacks.Wait() }

// ConnContext is the http.Server.ConnContext hook, called before a new
// connection's ConnState: it makes the connection's state, which the API
// tells when the connection waits for a request body.
func (l *connLimiter) ConnContext(ctx context.Context, c net.Conn) context.Context {
	if tc, ok := c.(*trackedConn); ok {
		return api.WithConnWatcher(ctx, &tc.state)
	}
	t := new(tracked)
	l.lookup.Store(c, t) // counted by ConnState
	return api.WithConnWatcher(ctx, t)
}

// ConnState is the http.Server.ConnState hook.
func (l *connLimiter) ConnState(c net.Conn, state http.ConnState) {
	switch state {
	case http.StateNew:
		l.mu.Lock()
		defer l.mu.Unlock()
		if len(l.conns) >= l.max {
			if !l.warned {
				l.warned = true
				if l.full != nil {
					l.callbacks.Go(l.full) // not under the lock
				}
			}
			if !l.closeOldest() {
				l.refused++
				l.lookup.Delete(c)
				c.Close()
				return
			}
		}
		t, ok := l.tracking(c)
		if !ok {
			t = new(tracked)
		}
		t.since.Store(l.seq.Add(1))
		l.conns[c] = t
		if _, beside := c.(*trackedConn); !beside {
			l.lookup.Store(c, t)
		}
	case http.StateActive:
		if t, ok := l.tracking(c); ok {
			t.idle.Store(false)
			t.busy.Store(true)
		}
	case http.StateIdle:
		if t, ok := l.tracking(c); ok {
			t.since.Store(l.seq.Add(1))
			t.busy.Store(false)
			t.idle.Store(true)
		}
	case http.StateHijacked, http.StateClosed:
		l.mu.Lock()
		defer l.mu.Unlock()
		l.forget(c)
	}
}

// closeOldest closes the longest idle connection, or else the oldest one
// that has not sent a whole request (none read yet, or one whose body is
// awaited), and stops counting it. It reports whether it found one.
func (l *connLimiter) closeOldest() bool {
	var idle, unread net.Conn
	var idleSince, unreadSince int64
	for c, t := range l.conns {
		switch since := t.since.Load(); {
		case t.busy.Load() && !t.body.Load():
		case t.idle.Load():
			if idle == nil || since < idleSince {
				idle, idleSince = c, since
			}
		case unread == nil || since < unreadSince:
			unread, unreadSince = c, since
		}
	}
	c := idle
	if c == nil {
		c = unread
	}
	if c == nil {
		return false
	}
	l.forget(c)
	l.closed++
	c.Close() // its StateClosed finds it gone from conns
	return true
}

// forget stops counting c.
func (l *connLimiter) forget(c net.Conn) {
	delete(l.conns, c)
	l.lookup.Delete(c)
}

// counts returns the connections open, and those closed to make room and
// refused so far.
func (l *connLimiter) counts() (open, closed, refused int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns), l.closed, l.refused
}
