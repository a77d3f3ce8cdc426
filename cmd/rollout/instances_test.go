package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/rollout/rollout/store/storetest"
)

// Several instances on one database, as behind a load balancer: real
// binaries, a real PostgreSQL (each test in a database of its own), traffic
// on loopback only.

// call sends a request and returns the status, headers and body.
func call(t *testing.T, method, url, body string, header ...string) (int, http.Header, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	client := &http.Client{Timeout: 30 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	return res.StatusCode, res.Header, data
}

// mustCall is call failing the test unless the status is want.
func mustCall(t *testing.T, want int, method, url, body string, header ...string) (http.Header, []byte) {
	t.Helper()
	status, h, data := call(t, method, url, body, header...)
	if status != want {
		t.Fatalf("%s %s = %d %s, want %d", method, url, status, data, want)
	}
	return h, data
}

// servedVersion is the version of the feature the instance serves, 0 when
// it serves none.
func servedVersion(t *testing.T, base, key string, header ...string) int {
	t.Helper()
	status, _, data := call(t, "GET", base+"/evaluate?feature="+key+"&user=u", "", header...)
	if status != 200 {
		return 0
	}
	var e struct{ Version int }
	json.Unmarshal(data, &e)
	return e.Version
}

// waitVersion waits until every instance serves the feature at version,
// and returns how long that took from since; it fails the test past limit.
func waitVersion(t *testing.T, since time.Time, limit time.Duration, key string, version int, bases ...string) time.Duration {
	t.Helper()
	for _, base := range bases {
		for servedVersion(t, base, key) < version {
			if time.Since(since) > limit {
				t.Fatalf("%s does not serve %s version %d after %v", base, key, version, limit)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	return time.Since(since)
}

// percentile returns the p-th percentile of ds (which it sorts).
func percentile(ds []time.Duration, p float64) time.Duration {
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(float64(len(ds))*p))]
}

// startInstances starts n binaries on dsn at once (their migrations race
// for goose's lock), each with extra args.
func startInstances(t *testing.T, n int, dsn string, args ...string) []*process {
	t.Helper()
	ps := make([]*process, n)
	var wg sync.WaitGroup
	for i := range ps {
		wg.Go(func() {
			ps[i] = startBinary(t, nil, append([]string{"serve", "--addr", "127.0.0.1:0", "--db", dsn}, args...)...)
		})
	}
	wg.Wait()
	return ps
}

const featureAB = `{"key":"f","buckets":[{"name":"A","replicas":10},{"name":"B","replicas":10}]}`

// TestInstancesFollowEachOther: three instances started at once on one
// PostgreSQL database. A change through one is served by the others; with
// a sync interval far longer than the test waits, only notifications can
// bring it. Concurrent If-Match writers on different instances: exactly
// one wins each round. Exposure counts of all three add up.
func TestInstancesFollowEachOther(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	ps := startInstances(t, 3, dsn, "--sync-interval", "1m")
	mustCall(t, 201, "POST", ps[0].url+"/api/features", featureAB)
	waitVersion(t, time.Now(), 10*time.Second, "f", 1, ps[1].url, ps[2].url)

	var delays []time.Duration
	for i := range 100 {
		start := time.Now()
		mustCall(t, 200, "PUT", ps[0].url+"/api/features/f/buckets/A", fmt.Sprintf(`{"replicas":%d}`, 11+i))
		delays = append(delays, waitVersion(t, start, 10*time.Second, "f", i+2, ps[1].url, ps[2].url))
	}
	t.Logf("propagation with notifications over %d changes: p50 %v, p99 %v", len(delays), percentile(delays, 0.5), percentile(delays, 0.99))

	// Concurrent writers on all three instances, each with the tag they read.
	for round := range 4 {
		h, _ := mustCall(t, 200, "GET", ps[0].url+"/api/features/f", "")
		tag := h.Get("ETag")
		statuses := make([]int, 6)
		var wg sync.WaitGroup
		for w := range statuses {
			wg.Go(func() {
				statuses[w], _, _ = call(t, "PUT", ps[w%3].url+"/api/features/f/buckets/B", fmt.Sprintf(`{"replicas":%d}`, 20+round*6+w), "If-Match", tag)
			})
		}
		wg.Wait()
		checkOneWinner(t, round, statuses)
		waitVersion(t, time.Now(), 10*time.Second, "f", 102+round, ps[0].url, ps[1].url, ps[2].url)
	}
	_, body := mustCall(t, 200, "GET", ps[2].url+"/api/features/f/versions?limit=500", "")
	var history struct{ Versions []struct{ Version int } }
	json.Unmarshal(body, &history)
	for i, v := range history.Versions {
		if want := len(history.Versions) - i; v.Version != want {
			t.Fatalf("history[%d] = version %d, want %d: not contiguous", i, v.Version, want)
		}
	}
	if len(history.Versions) != 105 {
		t.Errorf("history has %d versions, want 105", len(history.Versions))
	}

	// Exposures: each instance serves some evaluations of a new feature g;
	// after they stop (flushing their counts) a new instance reports the
	// sum. (Waiting for g reads the API, which counts nothing.)
	mustCall(t, 201, "POST", ps[0].url+"/api/features", strings.Replace(featureAB, `"f"`, `"g"`, 1))
	for _, p := range ps {
		waitStatusAt(t, p.url+"/api/features/g", nil, 200)
	}
	for i, p := range ps {
		for j := range 10 * (i + 1) {
			mustCall(t, 200, "GET", fmt.Sprintf("%s/evaluate?feature=g&user=u%d", p.url, j), "")
		}
		p.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, p := range ps {
		if err := <-p.exited; err != nil {
			t.Fatalf("instance exited with %v:\n%s", err, p.stderr)
		}
	}
	p := startBinary(t, nil, "serve", "--addr", "127.0.0.1:0", "--db", dsn)
	_, body = mustCall(t, 200, "GET", p.url+"/api/features/g/exposures", "")
	var exp struct{ Total int }
	json.Unmarshal(body, &exp)
	if exp.Total != 60 {
		t.Errorf("exposures of three instances = %d, want 10+20+30 = 60", exp.Total)
	}
}

// TestInstancesPollingOnly: with notifications off, the sync interval
// alone brings every change (20, 3 with -short: each waits for a poll) to
// the other instance.
func TestInstancesPollingOnly(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	ps := startInstances(t, 2, dsn, "--pg-notify=false", "--sync-interval", "1s")
	mustCall(t, 201, "POST", ps[0].url+"/api/features", featureAB)
	changes := 20
	if testing.Short() {
		changes = 3
	}
	var delays []time.Duration
	for i := range changes {
		start := time.Now()
		mustCall(t, 200, "PUT", ps[0].url+"/api/features/f/buckets/A", fmt.Sprintf(`{"replicas":%d}`, 11+i))
		delays = append(delays, waitVersion(t, start, 15*time.Second, "f", i+2, ps[1].url))
	}
	t.Logf("propagation by polling every 1s over %d changes: p50 %v, p99 %v", len(delays), percentile(delays, 0.5), percentile(delays, 0.99))
}

// TestInstanceKilledMidWrites: SIGKILL an instance while it takes changes;
// every change it acknowledged is in the history the other one serves.
func TestInstanceKilledMidWrites(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	ps := startInstances(t, 2, dsn)
	mustCall(t, 201, "POST", ps[1].url+"/api/features", featureAB)
	acked := map[int]int{}   // version → replicas of A
	var changes atomic.Int64 // acknowledged
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			req, _ := http.NewRequest("PUT", ps[1].url+"/api/features/f/buckets/A", strings.NewReader(fmt.Sprintf(`{"replicas":%d}`, 11+i%900)))
			req.Header.Set("Content-Type", "application/json")
			res, err := http.DefaultClient.Do(req)
			if err != nil {
				return // killed
			}
			var body struct{ Feature struct{ Version int } }
			json.NewDecoder(res.Body).Decode(&body)
			res.Body.Close()
			if res.StatusCode == 200 {
				acked[body.Feature.Version] = 11 + i%900
				changes.Add(1)
			}
		}
	}()
	// Killed with changes under way, after some were acknowledged.
	for deadline := time.Now().Add(20 * time.Second); changes.Load() < 20; time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) { // a hang guard
			break // the test fails below if none was acknowledged
		}
	}
	ps[1].cmd.Process.Kill()
	<-done
	if len(acked) == 0 {
		t.Fatal("no change was acknowledged before the kill")
	}
	_, body := mustCall(t, 200, "GET", ps[0].url+"/api/features/f/versions?limit=500", "")
	var history struct {
		Versions []struct {
			Version int
			Config  struct {
				Buckets []struct {
					Name     string
					Replicas int
				}
			}
		}
	}
	json.Unmarshal(body, &history)
	stored := map[int]int{}
	for _, v := range history.Versions {
		stored[v.Version] = v.Config.Buckets[0].Replicas
	}
	for version, replicas := range acked {
		if stored[version] != replicas {
			t.Errorf("acknowledged version %d (A×%d) is stored as A×%d", version, replicas, stored[version])
		}
	}
	t.Logf("%d changes acknowledged before SIGKILL, all present", len(acked))
}

// pgProxy forwards loopback connections to PostgreSQL and can cut them all
// and refuse new ones, as if the server had gone, then come back on the same
// address.
type pgProxy struct {
	t      *testing.T
	addr   string
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
}

func newPGProxy(t *testing.T, target string) *pgProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pgProxy{t: t, addr: ln.Addr().String(), target: target}
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

func (p *pgProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, c, up)
			p.mu.Unlock()
			go func() { io.Copy(up, c); up.Close() }()
			go func() { io.Copy(c, up); c.Close() }()
		}
	}()
}

// cut closes the listener and every connection.
func (p *pgProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// restore listens again on the same address.
func (p *pgProxy) restore() {
	deadline := time.Now().Add(10 * time.Second)
	for {
		ln, err := net.Listen("tcp", p.addr)
		if err == nil {
			p.serve(ln)
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("listen again on %s: %v", p.addr, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPostgresGoneWhileServing: with the database unreachable, evaluation
// goes on from memory, changes answer 503 and /readyz says why; once it is
// back, every instance catches up without a restart.
func TestPostgresGoneWhileServing(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	u, _ := url.Parse(dsn)
	proxy := newPGProxy(t, u.Host)
	u.Host = proxy.addr
	ps := startInstances(t, 2, u.String(), "--sync-interval", "200ms")
	mustCall(t, 201, "POST", ps[0].url+"/api/features", featureAB)
	waitVersion(t, time.Now(), 10*time.Second, "f", 1, ps[1].url)
	_, before := mustCall(t, 200, "GET", ps[1].url+"/evaluate?feature=f&user=alice", "")

	proxy.cut()
	for _, p := range ps {
		_, got := mustCall(t, 200, "GET", p.url+"/evaluate?feature=f&user=alice", "")
		if !bytes.Equal(got, before) {
			t.Errorf("evaluation while the database is gone = %s, want %s", got, before)
		}
		if status, _, body := call(t, "PUT", p.url+"/api/features/f/buckets/A", `{"replicas":20}`); status != 503 {
			t.Errorf("a change while the database is gone = %d %s, want 503", status, body)
		}
		status, _, body := call(t, "GET", p.url+"/readyz", "")
		if status != 503 || !strings.Contains(string(body), "database") {
			t.Errorf("/readyz while the database is gone = %d %s, want 503 naming the database", status, body)
		}
	}

	proxy.restore()
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, _, body := call(t, "PUT", ps[0].url+"/api/features/f/buckets/A", `{"replicas":20}`)
		if status == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a change after the database came back = %d %s", status, body)
		}
		time.Sleep(100 * time.Millisecond)
	}
	waitVersion(t, time.Now(), 15*time.Second, "f", 2, ps[1].url)
	mustCall(t, 200, "GET", ps[1].url+"/readyz", "")
}

// TestSessionsAndTokensAcrossInstances: a dashboard session made on one
// instance works on another; signing out there ends it everywhere; a token
// revoked with the command is refused by every instance within the sync
// interval.
func TestSessionsAndTokensAcrossInstances(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	admin := createToken(t, dsn, "admin", "admin")
	viewer := createToken(t, dsn, "viewer", "viewer")
	ps := startInstances(t, 3, dsn, "--sync-interval", "500ms")

	form := url.Values{"token": {admin}, "next": {"/ui/"}}.Encode()
	req, _ := http.NewRequest("POST", ps[0].url+"/ui/login", strings.NewReader(form))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	res, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	var cookie string
	for _, c := range res.Cookies() {
		if c.Name == "rollout_session" {
			cookie = c.Name + "=" + c.Value
		}
	}
	if cookie == "" {
		t.Fatalf("sign-in on instance 1 = %d without a session cookie", res.StatusCode)
	}
	for _, p := range ps {
		mustCall(t, 200, "GET", p.url+"/api/features", "", "Cookie", cookie)
	}
	mustCall(t, 303, "POST", ps[1].url+"/ui/logout", "", "Cookie", cookie)
	waitStatusAt(t, ps[2].url+"/api/features", []string{"Cookie", cookie}, 401)

	mustCall(t, 200, "GET", ps[2].url+"/api/features", "", "Authorization", "Bearer "+viewer)
	if _, stderr, err := runCLI(t, "token", "revoke", "--name", "viewer", "--db", dsn); err != nil {
		t.Fatalf("token revoke: %v\n%s", err, stderr)
	}
	for _, p := range ps {
		waitStatusAt(t, p.url+"/api/features", []string{"Authorization", "Bearer " + viewer}, 401)
	}
}

// waitStatusAt polls a GET until it answers want, for up to 10 s.
func waitStatusAt(t *testing.T, url string, header []string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		status, _, _ := call(t, "GET", url, "", header...)
		if status == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s = %d, want %d within 10s", url, status, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestSQLiteTwoProcesses: two binaries on one SQLite file stay coherent
// by polling.
func TestSQLiteTwoProcesses(t *testing.T) {
	db := filepath.Join(t.TempDir(), "rollout.db")
	one := startBinary(t, nil, "serve", "--addr", "127.0.0.1:0", "--db", db, "--sync-interval", "200ms")
	two := startBinary(t, nil, "serve", "--addr", "127.0.0.1:0", "--db", db, "--sync-interval", "200ms")
	mustCall(t, 201, "POST", one.url+"/api/features", featureAB)
	waitVersion(t, time.Now(), 10*time.Second, "f", 1, two.url)
	mustCall(t, 200, "PUT", two.url+"/api/features/f/buckets/A", `{"replicas":30}`)
	waitVersion(t, time.Now(), 10*time.Second, "f", 2, one.url)
	mustCall(t, 204, "DELETE", one.url+"/api/features/f", "")
	deadline := time.Now().Add(10 * time.Second)
	for servedVersion(t, two.url, "f") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the archived feature is still served by the other process")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Restored on the other process, served again on the first; archived
	// and purged there, created again on the other: "already exists"
	// nowhere.
	mustCall(t, 200, "POST", two.url+"/api/features/f/restore", "")
	waitVersion(t, time.Now(), 10*time.Second, "f", 3, one.url)
	mustCall(t, 204, "DELETE", one.url+"/api/features/f", "")
	mustCall(t, 204, "DELETE", one.url+"/api/features/f?purge=true", "")
	mustCall(t, 201, "POST", two.url+"/api/features", featureAB)
}
