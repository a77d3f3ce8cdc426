package storetest

import (
	"bytes"
	"net"
	"net/url"
	"sync"
	"testing"
)

// Proxy forwards TCP connections on a loopback port to a server, and can
// stop forwarding without closing anything, as a hung server or a cut
// network does: bytes sent meanwhile wait in the proxy and go through once
// it thaws.
type Proxy struct {
	t      testing.TB
	ln     net.Listener
	target string

	mu       sync.Mutex
	cond     *sync.Cond
	frozen   bool
	armed    bool // hold the answers of the connection that sends the next COMMIT
	held     map[net.Conn]bool
	conns    []net.Conn
	accepted int
	wg       sync.WaitGroup
}

// NewProxy starts a proxy to target (host:port), stopped when t ends.
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{t: t, ln: ln, target: target, held: map[net.Conn]bool{}}
	p.cond = sync.NewCond(&p.mu)
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

// ProxyDSN starts a proxy to the server of the postgres:// URL dsn and
// returns it with dsn pointed at it.
func ProxyDSN(t testing.TB, dsn string) (*Proxy, string) {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p := NewProxy(t, u.Host)
	u.Host = p.ln.Addr().String()
	return p, u.String()
}

// Freeze stops forwarding, both ways, on every connection, open or new.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen = true
}

// Thaw forwards again everything held.
func (p *Proxy) Thaw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.frozen, p.armed = false, false
	clear(p.held)
	p.cond.Broadcast()
}

// HoldNextCommitAnswer makes the proxy forward the next PostgreSQL COMMIT
// a client sends, then hold everything the server sends back on that
// connection until Thaw: the transaction commits, and its client never
// hears of it.
func (p *Proxy) HoldNextCommitAnswer() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.armed = true
}

// Accepted returns how many connections the proxy has accepted.
func (p *Proxy) Accepted() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted
}

func (p *Proxy) accept() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.accepted++
		p.mu.Unlock()
		p.wg.Go(func() { p.pipe(client, server, client, true) })
		p.wg.Go(func() { p.pipe(server, client, client, false) })
	}
}

// commitQuery is a simple-protocol query message "commit", as pgx sends
// it to end a transaction.
var commitQuery = []byte("Q\x00\x00\x00\x0bcommit\x00")

// pipe copies src to dst, waiting before each write while the proxy (or,
// for answers, the connection of client) is held.
func (p *Proxy) pipe(src, dst, client net.Conn, toServer bool) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.frozen || (!toServer && p.held[client]) {
				p.cond.Wait()
			}
			if toServer && p.armed && bytes.Contains(buf[:n], commitQuery) {
				// Held before the COMMIT goes, so that no answer slips by.
				p.armed, p.held[client] = false, true
			}
			p.mu.Unlock()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *Proxy) close() {
	p.ln.Close()
	p.Thaw()
	p.mu.Lock()
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
