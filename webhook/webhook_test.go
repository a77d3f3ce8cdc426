package webhook_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store"
	"github.com/rollout/rollout/store/postgres"
	"github.com/rollout/rollout/store/sqlite"
	"github.com/rollout/rollout/store/storetest"
	"github.com/rollout/rollout/webhook"
)

// clock is a time tests move.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newClock() *clock { return &clock{t: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)} }

func openSQLite(t *testing.T) *store.DB {
	t.Helper()
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func service(t *testing.T, db *store.DB, c *clock) *rollout.Service {
	t.Helper()
	svc, err := rollout.NewService(context.Background(), db, c.Now)
	if err != nil {
		t.Fatal(err)
	}
	return svc
}

func testFeature(key string) feature.Feature {
	return feature.Feature{Key: key, Enabled: true, Fallback: "control", Buckets: []feature.Bucket{
		{Name: "control", Replicas: 100}, {Name: "treatment", Replicas: 100}}}
}

func createFeature(t *testing.T, svc *rollout.Service, key string) {
	t.Helper()
	if _, err := svc.Create(context.Background(), testFeature(key), rollout.ChangeOptions{Actor: "alice", Comment: "new " + key}); err != nil {
		t.Fatal(err)
	}
}

func register(t *testing.T, db *store.DB, url string, c *clock) webhook.Hook {
	t.Helper()
	h, err := webhook.NewHook(url, "s3cret-s3cret-s3cret", nil, "admin", c.Now())
	if err != nil {
		t.Fatal(err)
	}
	h, err = db.CreateWebhook(context.Background(), h)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// received is what a receiver got.
type received struct {
	body      []byte
	signature string
	event     webhook.Payload
}

// receiver is an endpoint on loopback that checks signatures and answers
// with status.
type receiver struct {
	t      *testing.T
	secret string
	status atomic.Int32
	mu     sync.Mutex
	got    []received
	srv    *httptest.Server
}

func newReceiver(t *testing.T, secret string) *receiver {
	r := &receiver{t: t, secret: secret}
	r.status.Store(200)
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		var p webhook.Payload
		if err := json.Unmarshal(body, &p); err != nil {
			t.Errorf("delivery body %q: %v", body, err)
		}
		if req.Method != http.MethodPost || req.Header.Get("Content-Type") != "application/json" {
			t.Errorf("delivery %s %s", req.Method, req.Header.Get("Content-Type"))
		}
		r.mu.Lock()
		r.got = append(r.got, received{body: body, signature: req.Header.Get("X-Rollout-Signature"), event: p})
		r.mu.Unlock()
		w.WriteHeader(int(r.status.Load()))
		io.WriteString(w, strings.Repeat("x", 1<<20)) // a large answer: read at most a few KB
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) deliveries() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

func runOnce(t *testing.T, w *webhook.Worker) int {
	t.Helper()
	n, err := w.RunOnce(context.Background())
	if err != nil {
		t.Fatalf("RunOnce = %v", err)
	}
	return n
}

// TestDeliverSigned: each event after the webhook's creation is POSTed
// once, in order, signed with the secret, with a text in words.
func TestDeliverSigned(t *testing.T) {
	c := newClock()
	db := openSQLite(t)
	svc := service(t, db, c)
	rcv := newReceiver(t, "s3cret-s3cret-s3cret")
	h := register(t, db, rcv.srv.URL+"/hook", c)
	createFeature(t, svc, "checkout")
	if _, err := svc.Archive(context.Background(), "checkout", rollout.ChangeOptions{Actor: "bob", Comment: "done"}); err != nil {
		t.Fatal(err)
	}
	w := webhook.New(db, webhook.Options{Clock: c.Now})
	for runOnce(t, w) > 0 {
	}
	got := rcv.deliveries()
	var kinds []string
	for _, g := range got {
		kinds = append(kinds, string(g.event.Kind))
		if want := webhook.Signature(h.Secret, g.body); g.signature != want {
			t.Errorf("signature %q, want %q", g.signature, want)
		}
		if !strings.HasPrefix(g.signature, "sha256=") || len(g.signature) != len("sha256=")+64 {
			t.Errorf("signature %q is not sha256=<64 hex digits>", g.signature)
		}
	}
	if strings.Join(kinds, " ") != "webhook_create create archive" {
		t.Fatalf("delivered %v, want webhook_create create archive", kinds)
	}
	create := got[1].event
	if create.Feature != "checkout" || create.Actor != "alice" || create.Comment != "new checkout" || create.ID == 0 {
		t.Errorf("create event %+v", create)
	}
	if want := `alice create checkout (version 1): `; !strings.HasPrefix(create.Text, want) || !strings.Contains(create.Text, `"new checkout"`) {
		t.Errorf("text %q, want it to start %q and quote the comment", create.Text, want)
	}
	if !strings.Contains(string(got[1].body), `"text":`) || !strings.Contains(string(got[1].body), `"summary":`) {
		t.Errorf("body %s lacks text or summary", got[1].body)
	}
	log, err := db.WebhookDeliveries(context.Background(), h.ID, 0)
	if err != nil || len(log) != 3 || !log[0].OK() || log[0].Status != 200 || log[0].EventKind != audit.Archive {
		t.Fatalf("log %+v, %v", log, err)
	}
	// Nothing more to do, and nothing sent again.
	if n := runOnce(t, w); n != 0 || len(rcv.deliveries()) != 3 {
		t.Fatalf("RunOnce after all delivered: %d claims, %d deliveries", n, len(rcv.deliveries()))
	}
}

// TestRetryBackoffPause: an endpoint answering 500 is retried after each
// backoff, not before, and paused at the tenth failure with an audit
// event; once resumed (and fixed) it gets the event it missed.
func TestRetryBackoffPause(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	db := openSQLite(t)
	svc := service(t, db, c)
	rcv := newReceiver(t, "s3cret-s3cret-s3cret")
	rcv.status.Store(500)
	good := newReceiver(t, "s3cret-s3cret-s3cret")
	h := register(t, db, rcv.srv.URL, c)
	other := register(t, db, good.srv.URL, c)
	w := webhook.New(db, webhook.Options{Clock: c.Now})
	start := c.Now()
	for i := 1; i <= webhook.MaxFailures; i++ {
		if n := runOnce(t, w); n == 0 {
			t.Fatalf("attempt %d: nothing claimed", i)
		}
		if got := len(rcv.deliveries()); got != i {
			t.Fatalf("attempt %d: %d deliveries", i, got)
		}
		for runOnce(t, w) > 0 { // the good webhook goes on; the failing one waits
		}
		if got := len(rcv.deliveries()); got != i {
			t.Fatalf("attempt %d: retried before its backoff (%d deliveries)", i, got)
		}
		c.Add(webhook.Backoff(i) - time.Second)
		for runOnce(t, w) > 0 {
		}
		if got := len(rcv.deliveries()); got != i {
			t.Fatalf("attempt %d: retried a second before its backoff ran out", i)
		}
		c.Add(time.Second)
	}
	if elapsed := c.Now().Sub(start); elapsed < 24*time.Hour {
		t.Errorf("paused after %v of retries, want at least 24 h", elapsed)
	}
	got, err := db.Webhook(ctx, h.ID)
	if err != nil || got.State != webhook.Paused || !strings.Contains(got.PausedReason, "500") {
		t.Fatalf("after %d failures: %+v, %v", webhook.MaxFailures, got, err)
	}
	if n := runOnce(t, w); n != 0 {
		// The good webhook gets the pause event; the paused one nothing.
		for runOnce(t, w) > 0 {
		}
	}
	if len(rcv.deliveries()) != webhook.MaxFailures {
		t.Fatalf("a paused webhook was delivered to")
	}
	var goodKinds []string
	for _, g := range good.deliveries() {
		goodKinds = append(goodKinds, string(g.event.Kind))
	}
	if strings.Join(goodKinds, " ") != "webhook_create webhook_paused" || !strings.Contains(good.deliveries()[1].event.Text, "paused webhook "+rcv.srv.URL) {
		t.Errorf("the other webhook got %v", goodKinds)
	}
	log, _ := db.WebhookDeliveries(ctx, h.ID, 0)
	if len(log) != webhook.MaxFailures || log[0].Status != 500 || !strings.Contains(log[0].Error, "500") || len(log[0].Error) > 300 {
		t.Errorf("log: %d entries, latest %+v", len(log), log[0])
	}

	rcv.status.Store(204)
	if err := db.ResumeWebhook(ctx, h.ID, "admin", c.Now()); err != nil {
		t.Fatal(err)
	}
	createFeature(t, svc, "after")
	for runOnce(t, w) > 0 {
	}
	var kinds []string
	for _, g := range rcv.deliveries()[webhook.MaxFailures-1:] {
		kinds = append(kinds, string(g.event.Kind)+" "+g.event.Subject+g.event.Feature)
	}
	// The first event (its own creation's, retried) is delivered at
	// last, then everything after it.
	want := []string{"webhook_create " + h.ID, "webhook_create " + h.ID, "webhook_create " + other.ID, "webhook_paused " + h.ID, "webhook_resume " + h.ID, "create after"}
	if strings.Join(kinds, ",") != strings.Join(want, ",") {
		t.Errorf("after resume delivered %v, want %v", kinds, want)
	}
}

// TestTimeoutNeverSlowsAChange: a webhook that hangs gets no answer from
// the change: the change returns while the delivery hangs, and the attempt
// ends at the timeout, logged, to be retried.
func TestTimeoutNeverSlowsAChange(t *testing.T) {
	ctx := context.Background()
	c := newClock()
	db := openSQLite(t)
	svc := service(t, db, c)
	arrived := make(chan struct{}, 10)
	release := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(hang.Close)
	t.Cleanup(func() { close(release) })
	h := register(t, db, hang.URL, c)

	wctx, stop := context.WithCancel(ctx)
	w := webhook.New(db, webhook.Options{Clock: c.Now, Timeout: 200 * time.Millisecond})
	done := make(chan struct{})
	go func() { defer close(done); w.Run(wctx, 10*time.Millisecond, func(err error) { t.Error(err) }) }()
	<-arrived // the worker is stuck in the first delivery
	// A change while the delivery hangs: it does not wait for it (were it
	// to, it would never return: the endpoint answers only once released).
	createFeature(t, svc, "quick")
	stop()
	<-done
	_ = h
	// The timeout, by RunOnce (the Run above stopped before recording).
	w2 := webhook.New(db, webhook.Options{Clock: c.Now, Timeout: 100 * time.Millisecond, Owner: "second"})
	c.Add(time.Hour) // past the first worker's lease
	if n := runOnce(t, w2); n != 1 {
		t.Fatalf("RunOnce claimed %d", n)
	}
	log, err := db.WebhookDeliveries(ctx, h.ID, 0)
	if err != nil || len(log) != 1 || !strings.Contains(log[0].Error, "timeout") || log[0].Status != 0 {
		t.Fatalf("log after a timeout: %+v, %v", log, err)
	}
	got, _ := db.Webhook(ctx, h.ID)
	if got.Failures != 1 || !got.NextAttempt.Equal(c.Now().Add(webhook.Backoff(1))) {
		t.Errorf("after a timeout: failures %d, next attempt %v", got.Failures, got.NextAttempt)
	}
}

// TestTwoWorkersOneDatabase: two processes' workers on one PostgreSQL
// database, delivering at once, send each event once per webhook.
func TestTwoWorkersOneDatabase(t *testing.T) {
	ctx := context.Background()
	dsn := storetest.PostgresDSN(t)
	open := func() *store.DB {
		db, err := postgres.Open(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	a, b := open(), open()
	c := newClock()
	svc := service(t, a, c)
	var rcvs []*receiver
	for range 3 {
		r := newReceiver(t, "s3cret-s3cret-s3cret")
		register(t, a, r.srv.URL, c)
		rcvs = append(rcvs, r)
	}
	const features = 12
	for i := range features {
		createFeature(t, svc, "f"+string(rune('a'+i)))
	}
	wa := webhook.New(a, webhook.Options{Clock: c.Now, Owner: "a", Concurrency: 2})
	wb := webhook.New(b, webhook.Options{Clock: c.Now, Owner: "b", Concurrency: 2})
	var wg sync.WaitGroup
	for _, w := range []*webhook.Worker{wa, wb} {
		wg.Go(func() {
			for idle := 0; idle < 3; {
				n, err := w.RunOnce(ctx)
				if err != nil {
					t.Error(err)
					return
				}
				if n == 0 {
					idle++
				} else {
					idle = 0
				}
			}
		})
	}
	wg.Wait()
	for runOnce(t, wa) > 0 { // whatever is left
	}
	for i, r := range rcvs {
		seen := map[int64]int{}
		for _, g := range r.deliveries() {
			seen[g.event.ID]++
		}
		// Its own creation, the later webhooks' and the features'.
		if want := (3 - i) + features; len(seen) != want {
			t.Errorf("receiver %d got %d distinct events, want %d", i, len(seen), want)
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("receiver %d got event %d %d times", i, id, n)
			}
		}
	}
}

// TestUnreachableKeepsURLSecret: an endpoint that cannot be reached is
// logged without its URL, whose path may be a secret (the reason reaches
// the audit trail, which viewers read, when it pauses the webhook).
func TestUnreachableKeepsURLSecret(t *testing.T) {
	c := newClock()
	db := openSQLite(t)
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	h := register(t, db, closed.URL+"/services/T0/B0/very-secret", c)
	if n := runOnce(t, webhook.New(db, webhook.Options{Clock: c.Now})); n != 1 {
		t.Fatalf("RunOnce = %d", n)
	}
	log, err := db.WebhookDeliveries(context.Background(), h.ID, 0)
	if err != nil || len(log) != 1 || log[0].Error != "connection refused" || strings.Contains(log[0].Detail, "very-secret") {
		t.Fatalf("log %+v, %v", log, err)
	}
	if got, want := webhook.Site(h.URL), closed.URL+"/…"; got != want {
		t.Errorf("WebhookSite(%q) = %q, want %q", h.URL, got, want)
	}
	if got := webhook.Site("https://example.com"); got != "https://example.com" {
		t.Errorf("WebhookSite(no path) = %q", got)
	}
}

// rawEndpoint is an endpoint on loopback that reads a request and writes
// answer as it is, bytes the test chooses (a status line of its own, or
// no HTTP at all), then closes the connection.
func rawEndpoint(t *testing.T, answer string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Go(func() {
				defer c.Close()
				req, err := http.ReadRequest(bufio.NewReader(c))
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				io.WriteString(c, answer)
			})
		}
	})
	return "http://" + ln.Addr().String()
}

// TestFailureReasonsHoldNothingTheEndpointSent: whatever an endpoint
// answers (a body or a status line echoing its URL's secret path, bytes
// that are not HTTP, nothing), a failed delivery's reason is in the
// server's own words, which the audit trail may show; what the endpoint
// sent is in the log's detail only.
func TestFailureReasonsHoldNothingTheEndpointSent(t *testing.T) {
	const secret = "SECRETPATH-9f3a"
	for _, tt := range []struct {
		name, answer string
		reason       string
		status       int
		detail       string // contained in the log's detail
	}{
		{"404 with the path in its body", "HTTP/1.1 404 Not Found\r\nContent-Length: 45\r\n\r\nCannot POST /services/T1/B1/" + secret + "-----", "HTTP 404", 404, "Cannot POST /services/T1/B1/" + secret},
		{"a reason phrase of its own", "HTTP/1.1 410 Gone to /services/" + secret + "\r\nContent-Length: 0\r\n\r\n", "HTTP 410", 410, ""},
		{"a redirect", "HTTP/1.1 302 Found\r\nLocation: /services/" + secret + "\r\nContent-Length: 0\r\n\r\n", "HTTP 302", 302, ""},
		{"not HTTP", secret + " is not a status line\r\n\r\n", "no valid answer", 0, "malformed HTTP"},
		{"nothing", "", "connection closed without an answer", 0, "EOF"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := newClock()
			db := openSQLite(t)
			h := register(t, db, rawEndpoint(t, tt.answer)+"/services/T1/B1/"+secret, c)
			if n := runOnce(t, webhook.New(db, webhook.Options{Clock: c.Now})); n != 1 {
				t.Fatalf("RunOnce = %d", n)
			}
			log, err := db.WebhookDeliveries(context.Background(), h.ID, 0)
			if err != nil || len(log) != 1 {
				t.Fatalf("log %+v, %v", log, err)
			}
			d := log[0]
			if d.Error != tt.reason || d.Status != tt.status || strings.Contains(d.Error, "SECRET") {
				t.Errorf("delivery error %q, status %d; want %q, %d", d.Error, d.Status, tt.reason, tt.status)
			}
			if !strings.Contains(d.Detail, tt.detail) || len(d.Detail) > 200 {
				t.Errorf("delivery detail %q, want at most 200 bytes holding %q", d.Detail, tt.detail)
			}
			out := h.Outcome(audit.Event{ID: 1}, d, c.Now())
			for range webhook.MaxFailures - 1 {
				h.Failures++
				out = h.Outcome(audit.Event{ID: 1}, d, c.Now())
			}
			if paused := webhook.PausedEvent(h, out.Pause, c.Now()); !strings.Contains(paused.Summary, tt.reason) || strings.Contains(paused.Summary, "SECRET") {
				t.Errorf("paused event %q, want the reason %q and nothing the endpoint sent", paused.Summary, tt.reason)
			}
		})
	}
}
