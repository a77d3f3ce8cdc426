package stream_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/api/internal/apitest"
	"github.com/rollout/rollout/api/stream"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store"
	"github.com/rollout/rollout/store/sqlite"
)

// streamEnv is the API with tokens required, over a real SQLite store that
// its service follows as the binary's does, on a loopback server.
type streamEnv struct {
	t      *testing.T
	url    string
	svc    *rollout.Service
	tokens *auth.Tokens
	admin  string // an admin token's secret
}

// roleStore is a token store whose tokens' roles a test may change, as a
// new version with other roles, or another instance, would see them.
type roleStore struct {
	*store.DB
	roles map[string]auth.Role // by token name; guarded by the test's order
}

func (s *roleStore) Tokens(ctx context.Context) ([]auth.Token, error) {
	all, err := s.DB.Tokens(ctx)
	for i, tok := range all {
		if role, ok := s.roles[tok.Name]; ok {
			all[i].Role = role
		}
	}
	return all, err
}

// newStreamEnv starts the API with opts (Auth set here) over a new store.
// connContext, when not nil, is the server's ConnContext hook.
func newStreamEnv(t *testing.T, opts api.Options, rs *roleStore, connContext func(context.Context, net.Conn) context.Context) *streamEnv {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	if rs == nil {
		rs = &roleStore{}
	}
	rs.DB = db
	tokens, err := auth.NewTokens(ctx, rs, nil)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := rollout.NewService(ctx, db, nil)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { defer close(done); svc.Follow(ctx, rollout.FollowOptions{Interval: 50 * time.Millisecond}) }()
	opts.Auth = api.NewAuth(tokens, nil)
	srv := httptest.NewUnstartedServer(api.New(svc, opts))
	srv.Config.ConnContext = connContext
	srv.Start()
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		cancel()
		<-done
		db.Close()
	})
	env := &streamEnv{t: t, url: srv.URL, svc: svc, tokens: tokens}
	env.admin = env.token("admin", auth.RoleAdmin)
	return env
}

// token creates a token and returns its secret.
func (e *streamEnv) token(name string, role auth.Role) string {
	e.t.Helper()
	_, secret, err := e.tokens.Create(context.Background(), name, role, time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	return secret
}

// stream opens a stream with secret. A stream that opens is read up to
// its hello event; the caller closes the body.
func (e *streamEnv) stream(secret string) (*http.Response, *bufio.Reader) {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.url+"/sync/v1/stream", nil)
	req.Header.Set("Authorization", "Bearer "+secret)
	// A transport of its own: each stream has its own connection.
	res, err := (&http.Client{Transport: &http.Transport{}}).Do(req)
	if err != nil {
		e.t.Fatalf("open a stream: %v", err)
	}
	r := bufio.NewReader(res.Body)
	if res.StatusCode == http.StatusOK {
		if line, err := apitest.ReadUntil(r, "event: hello"); err != nil {
			e.t.Fatalf("the stream's hello: %v (read %q)", err, line)
		}
	}
	return res, r
}

// scrape reads the metrics with the admin token.
func (e *streamEnv) scrape() map[string]*dto.MetricFamily {
	e.t.Helper()
	req, _ := http.NewRequest("GET", e.url+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+e.admin)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(res.Body)
	if err != nil {
		e.t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// waitMetric waits until the sample of name with labels is want. The
// deadline only keeps a broken server from hanging the test.
func (e *streamEnv) waitMetric(want float64, name string, labels ...string) {
	e.t.Helper()
	var got float64
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if got, _ = apitest.Sample(e.scrape(), name, labels...); got == want {
			return
		}
	}
	e.t.Fatalf("%s%v = %v, want %v", name, labels, got, want)
}

// errorOf decodes an error answer.
func errorOf(t *testing.T, res *http.Response) (code, message string) {
	t.Helper()
	var body struct {
		Error struct{ Code, Message string }
	}
	data, _ := io.ReadAll(res.Body)
	if err := json.Unmarshal(data, &body); err != nil {
		t.Fatalf("answer %d is not a JSON error: %s", res.StatusCode, data)
	}
	return body.Error.Code, body.Error.Message
}

// TestStreamBudget: beyond its share a token's new stream is refused with
// 429, beyond the server's budget any new stream with 503, both at once,
// as JSON errors with Retry-After; evaluation is still answered, and a
// stream that ends frees its place.
func TestStreamBudget(t *testing.T) {
	e := newStreamEnv(t, api.Options{MaxStreams: 3, MaxStreamsPerToken: 2}, nil, nil)
	app1, app2 := e.token("app-1", auth.RoleEvaluate), e.token("app-2", auth.RoleEvaluate)

	var open []*http.Response
	t.Cleanup(func() {
		for _, res := range open {
			res.Body.Close()
		}
	})
	expect := func(secret string, status int, code string) {
		t.Helper()
		res, _ := e.stream(secret)
		if res.StatusCode == http.StatusOK {
			open = append(open, res)
		} else {
			defer res.Body.Close()
		}
		if res.StatusCode != status {
			t.Fatalf("stream %d: status %d, want %d", len(open), res.StatusCode, status)
		}
		if status == http.StatusOK {
			return
		}
		if got := res.Header.Get("Retry-After"); got == "" {
			t.Errorf("refused stream: no Retry-After")
		}
		if got, msg := errorOf(t, res); got != code {
			t.Errorf("refused stream: error %q (%s), want %q", got, msg, code)
		}
	}
	expect(app1, http.StatusOK, "")
	expect(app1, http.StatusOK, "")
	expect(app1, http.StatusTooManyRequests, "too_many_requests") // app-1's share
	expect(app2, http.StatusOK, "")
	expect(app2, http.StatusServiceUnavailable, feature.EUnavailable) // the server's budget
	expect(e.admin, http.StatusServiceUnavailable, feature.EUnavailable)

	req, _ := http.NewRequest("GET", e.url+"/evaluate?feature=none&user=u", nil)
	req.Header.Set("Authorization", "Bearer "+app1)
	if res, err := http.DefaultClient.Do(req); err != nil || res.StatusCode != http.StatusNotFound {
		t.Errorf("evaluate at the stream budget: %v, %v; want 404 (no such feature)", res, err)
	} else {
		res.Body.Close()
	}

	open[0].Body.Close() // an app-1 stream ends
	e.waitMetric(2, "rollout_streams_open")
	expect(app2, http.StatusOK, "")
	e.waitMetric(1, "rollout_streams_refused_total", "reason", "token")
	e.waitMetric(2, "rollout_streams_refused_total", "reason", "budget")
}

// TestStreamEndsWhenRevoked: a stream ends when its token is revoked, or
// when its role no longer allows the stream (checked at every reload of
// the tokens, which the change feed's token commits cause); the streams of
// other tokens go on.
func TestStreamEndsWhenRevoked(t *testing.T) {
	stream.SetHeartbeat(t, 20*time.Millisecond)
	rs := &roleStore{roles: map[string]auth.Role{}}
	e := newStreamEnv(t, api.Options{}, rs, nil)
	doomed, demoted, kept := e.token("doomed", auth.RoleEvaluate), e.token("demoted", auth.RoleEvaluate), e.token("kept", auth.RoleEvaluate)
	var streams []*bufio.Reader
	for _, secret := range []string{doomed, demoted, kept} {
		res, r := e.stream(secret)
		t.Cleanup(func() { res.Body.Close() })
		if res.StatusCode != http.StatusOK {
			t.Fatalf("open a stream: %d", res.StatusCode)
		}
		streams = append(streams, r)
	}
	// ends reads the stream until it ends; the deadline only keeps a
	// stream that never ends from hanging the test.
	ends := func(r *bufio.Reader) error {
		done := make(chan error, 1)
		go func() {
			_, err := io.Copy(io.Discard, r)
			done <- err
		}()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			return fmt.Errorf("the stream goes on")
		}
	}

	if err := e.tokens.Revoke(context.Background(), "doomed", time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := ends(streams[0]); err != nil && strings.Contains(err.Error(), "goes on") {
		t.Errorf("the revoked token's stream: %v", err)
	}

	// A role without the stream's permission: "client", the browsers'
	// role, may evaluate but never read the snapshot or follow it.
	rs.roles["demoted"] = auth.Role("client")
	if err := e.tokens.Refresh(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := ends(streams[1]); err != nil && strings.Contains(err.Error(), "goes on") {
		t.Errorf("the demoted token's stream: %v", err)
	}
	e.waitMetric(2, "rollout_streams_ended_total", "reason", "revoked")

	// The other stream goes on: it still beats.
	for range 3 {
		if _, err := apitest.ReadUntil(streams[2], ": heartbeat"); err != nil {
			t.Fatalf("the kept token's stream: %v", err)
		}
	}
	e.waitMetric(1, "rollout_streams_open")
	res, _ := e.stream(doomed)
	res.Body.Close()
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("a stream with the revoked token: %d, want 401", res.StatusCode)
	}
}

// TestStreamDropsClientThatDoesNotRead: a client that stops reading while
// changes keep coming is dropped once its queue is full, well before the
// write's window (a minute here) could end it, and the server closes its
// connection; the changes' other streams go on.
func TestStreamDropsClientThatDoesNotRead(t *testing.T) {
	stream.SetStreamWriteWindow(t, time.Minute)
	// Small socket buffers, so that few changes fill them.
	e := newStreamEnv(t, api.Options{}, nil, func(ctx context.Context, c net.Conn) context.Context {
		c.(*net.TCPConn).SetWriteBuffer(4 << 10)
		return ctx
	})
	app := e.token("app", auth.RoleEvaluate)
	ctx := context.Background()
	key := strings.Repeat("f", 64) // the longest key: the longest events
	if _, err := e.svc.Create(ctx, feature.Feature{Key: key, Enabled: true, Salt: "f",
		Buckets: []feature.Bucket{{Name: "A", Replicas: 100}, {Name: "B", Replicas: 100}}}, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}

	conn, err := net.Dial("tcp", strings.TrimPrefix(e.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	fmt.Fprintf(conn, "GET /sync/v1/stream HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer %s\r\n\r\n", app)
	r := bufio.NewReader(conn)
	if line, err := apitest.ReadUntil(r, "event: hello"); err != nil {
		t.Fatalf("the stream's hello: %v (read %q)", err, line)
	}
	// A reading client beside it.
	res, reader := e.stream(app)
	defer res.Body.Close()
	events := make(chan string, 1<<14)
	go func() {
		defer close(events)
		for {
			line, err := reader.ReadString('\n')
			if err != nil {
				return
			}
			if strings.HasPrefix(line, "id: ") {
				events <- line
			}
		}
	}()

	// The first client reads no more. Each change is an event of about
	// 130 bytes: a few hundred fill the sockets' buffers, StreamQueue
	// more the queue.
	const most = 3000
	changes, dropped := 0, false
	for ; changes < most && !dropped; changes++ {
		replicas := 100 + changes%2
		if _, err := e.svc.Change(ctx, key, change.UpdateBucket("A", &replicas, nil), rollout.ChangeOptions{}); err != nil {
			t.Fatal(err)
		}
		if changes%25 == 24 {
			v, _ := apitest.Sample(e.scrape(), "rollout_streams_ended_total", "reason", "slow")
			dropped = v == 1
		}
	}
	if !dropped {
		t.Fatalf("after %d changes the client that does not read is still served", changes)
	}
	t.Logf("the client that does not read was dropped after %d changes or fewer", changes)

	// Its connection is closed: reading what was sent comes to an end.
	conn.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := io.Copy(io.Discard, r)
	if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
		t.Errorf("the dropped client's connection is still open (read %d bytes)", n)
	}
	// The reading client had every change.
	last := ""
	for deadline := time.After(10 * time.Second); !strings.HasPrefix(last, "id: "+fmt.Sprint(e.svc.Snapshot().Revision())+"\n"); {
		select {
		case last = <-events:
		case <-deadline:
			t.Fatalf("the reading client's last event: %q, want revision %d", last, e.svc.Snapshot().Revision())
		}
	}
	e.waitMetric(1, "rollout_streams_open")
}
