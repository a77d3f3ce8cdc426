package serve

import (
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// connLimiter bounds the open connections of an http.Server through its
// ConnState hook. When a connection arrives with the limit reached, it
// closes the connection that has been idle the longest to make room; with
// none idle, the oldest that has not yet sent a request; and only when
// every connection is serving a request does it close the newcomer. A flood
// of idle keep-alive connections therefore cannot hold the process's file
// descriptors and lock out new clients: their connections push the flood's
// out.
//
// A connection closed while idle may have just been sent a request the
// server has not read yet; clients retry such a request on a new connection
// as they do after the server's idle timeout (Go's, curl's and browsers'
// HTTP clients do for idempotent requests).
//
// Every request moves its connection from idle to active and back, so those
// two moves take no lock and allocate nothing: each connection's state is a
// few atomic words, found through a lock-free map. Choosing whom to close
// scans the connections, under the lock, only when the limit is reached.
//
// Its methods are safe for concurrent use.
type connLimiter struct {
	max int
	// full is called once, the first time a connection arrives with the
	// limit reached.
	full func()

	mu    sync.Mutex
	conns map[net.Conn]*tracked // every open connection counted
	// closed counts the connections closed to make room, refused the
	// newcomers closed for want of any.
	closed, refused int
	warned          bool

	// lookup is conns again, read without mu on every request.
	lookup sync.Map // net.Conn → *tracked
	// seq orders arrivals and the moments connections went idle.
	seq atomic.Int64
}

// tracked is the state of one connection: serving a request (busy), idle
// between requests (idle), or neither, accepted with no request read yet;
// since is the seq of its arrival or of its last going idle.
type tracked struct {
	busy, idle atomic.Bool
	since      atomic.Int64
}

func newConnLimiter(max int, full func()) *connLimiter {
	return &connLimiter{max: max, full: full, conns: map[net.Conn]*tracked{}}
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
					go l.full() // not under the lock
				}
			}
			if !l.closeOldest() {
				l.refused++
				c.Close()
				return
			}
		}
		t := new(tracked)
		t.since.Store(l.seq.Add(1))
		l.conns[c] = t
		l.lookup.Store(c, t)
	case http.StateActive:
		if t, ok := l.lookup.Load(c); ok {
			t := t.(*tracked)
			t.idle.Store(false)
			t.busy.Store(true)
		}
	case http.StateIdle:
		if t, ok := l.lookup.Load(c); ok {
			t := t.(*tracked)
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
// with no request read yet, and stops counting it. It reports whether it
// found one.
func (l *connLimiter) closeOldest() bool {
	var idle, fresh net.Conn
	var idleSince, freshSince int64
	for c, t := range l.conns {
		switch since := t.since.Load(); {
		case t.busy.Load():
		case t.idle.Load():
			if idle == nil || since < idleSince {
				idle, idleSince = c, since
			}
		case fresh == nil || since < freshSince:
			fresh, freshSince = c, since
		}
	}
	c := idle
	if c == nil {
		c = fresh
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
