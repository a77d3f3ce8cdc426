package serve

import (
	"container/list"
	"net"
	"net/http"
	"sync"
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
// Its methods are safe for concurrent use.
type connLimiter struct {
	max int
	// full is called once, the first time a connection arrives with the
	// limit reached.
	full func()

	mu    sync.Mutex
	conns map[net.Conn]*tracked // every open connection counted
	idle  list.List             // of net.Conn, idle keep-alive connections, longest idle first
	fresh list.List             // of net.Conn, accepted but no request read yet, oldest first
	// closed counts the connections closed to make room, refused the
	// newcomers closed for want of any.
	closed, refused int
	warned          bool
}

// tracked is a connection's place in the idle or fresh list, nil while it
// serves a request.
type tracked struct{ elem *list.Element }

func newConnLimiter(max int, full func()) *connLimiter {
	return &connLimiter{max: max, full: full, conns: map[net.Conn]*tracked{}}
}

// ConnState is the http.Server.ConnState hook.
func (l *connLimiter) ConnState(c net.Conn, state http.ConnState) {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch state {
	case http.StateNew:
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
		l.conns[c] = &tracked{elem: l.fresh.PushBack(c)}
	case http.StateActive:
		if t, ok := l.conns[c]; ok {
			l.unlist(t)
		}
	case http.StateIdle:
		if t, ok := l.conns[c]; ok {
			l.unlist(t)
			t.elem = l.idle.PushBack(c)
		}
	case http.StateHijacked, http.StateClosed:
		if t, ok := l.conns[c]; ok {
			l.unlist(t)
			delete(l.conns, c)
		}
	}
}

// closeOldest closes the longest idle connection, or else the oldest one
// with no request read yet, and stops counting it. It reports whether it
// found one.
func (l *connLimiter) closeOldest() bool {
	e := l.idle.Front()
	if e == nil {
		e = l.fresh.Front()
	}
	if e == nil {
		return false
	}
	c := e.Value.(net.Conn)
	l.unlist(l.conns[c])
	delete(l.conns, c)
	l.closed++
	c.Close() // its StateClosed finds it gone from conns
	return true
}

// unlist takes t out of the idle or fresh list it is in.
func (l *connLimiter) unlist(t *tracked) {
	if t.elem == nil {
		return
	}
	// Remove is a no-op on the list an element is not in.
	l.idle.Remove(t.elem)
	l.fresh.Remove(t.elem)
	t.elem = nil
}

// counts returns the connections open, and those closed to make room and
// refused so far.
func (l *connLimiter) counts() (open, closed, refused int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.conns), l.closed, l.refused
}
