// Package client evaluates rollout's features inside a Go app, from a copy
// kept in sync with the server: no network call per evaluation, the same
// buckets the server gives (it runs the same feature and ring code), and
// answers from the last copy while the server is away.
//
// A Client loads GET /sync/v1/snapshot (gzipped), follows GET
// /sync/v1/stream and applies the changed features each change event
// carries, without loading the snapshot again; it reloads the snapshot
// (with If-None-Match, so an unchanged one costs a 304) only when it may
// have missed events: each time the stream connects, and after an event
// too large to carry its features. While the stream is down it polls the
// snapshot instead, and it spreads its reconnections with exponential
// backoff and jitter, so that many apps do not come back at once. It
// counts its evaluations per feature, version and bucket and sends them in
// batches to POST /api/exposures, each under an ID that a retry repeats, so
// the server counts each batch once.
//
// While experiments run on features, it also names in each batch the users
// it served those features (at most maxBatchUsers a batch; the server's
// answer says which features run one), so that experiments count users
// served in process too. Track reports events of metrics to POST
// /api/track, batched, under IDs that retries repeat, as exposures are.
//
// The snapshot holds no user IDs: overrides come keyed by a salted hash of
// their user (see feature.OverrideHash), which the client computes as it
// evaluates.
//
// The package imports nothing of the server (no echo, SQLite or
// Prometheus): apps that use it build with CGO_ENABLED=0.
package client

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	mathrand "math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rollout/rollout/rollout/feature"
)

// Defaults of Config.
const (
	DefaultPollInterval   = 5 * time.Second
	DefaultFlushInterval  = 10 * time.Second
	DefaultStreamTimeout  = 45 * time.Second // three missed heartbeats
	DefaultRequestTimeout = 10 * time.Second
	DefaultMaxRetry       = time.Minute
	maxPendingBatches     = 100
	// maxBatchUsers bounds the users one batch of exposures names (the
	// server takes at most 5,000); users past it in one flush interval
	// are named when next served.
	maxBatchUsers = 2_000
	// maxTrackBatch is how many events one POST /api/track holds (the
	// server's limit), and maxPendingEvents how many wait to be sent,
	// the oldest dropped first.
	maxTrackBatch    = 1_000
	maxPendingEvents = 100_000
	maxTrackUser     = 256 // bytes of a user ID
	maxTrackValue    = 1e9
	// maxEventBytes bounds one line of the stream: a change event carries
	// at most 2 MB of features (the server sends larger ones as keys
	// only).
	maxEventBytes = 8 << 20
)

// Config configures a Client. URL is required.
type Config struct {
	// URL is the server's base URL, such as "http://127.0.0.1:8080".
	URL string
	// Token is a token with the sdk role (or the older evaluate role),
	// sent as a bearer token. It reads every feature's configuration:
	// keep it in servers, never in a browser app (those use a token with
	// the client role, which may only evaluate).
	Token string
	// CacheFile, when set, is where the client keeps the last snapshot it
	// read, and what it starts from when the server cannot be reached.
	CacheFile string
	// HTTPClient makes the requests; nil means a new http.Client. Its
	// Timeout must be 0: it would cut the stream. Requests are bounded
	// by RequestTimeout instead.
	HTTPClient *http.Client
	// PollInterval is about how long the client waits, after the stream
	// ends, before it polls the snapshot and tries the stream again: a
	// random delay between half of it and all of it. Each failure in a
	// row doubles it, up to MaxRetryInterval. 0 means
	// DefaultPollInterval.
	PollInterval time.Duration
	// MaxRetryInterval caps the delay between tries while the server
	// cannot be reached; 0 means DefaultMaxRetry.
	MaxRetryInterval time.Duration
	// FlushInterval is how often evaluation counts are sent; 0 means
	// DefaultFlushInterval.
	FlushInterval time.Duration
	// StreamTimeout is how long the stream may stay silent (the server
	// sends a heartbeat every 15 s) before the client reconnects; 0 means
	// DefaultStreamTimeout.
	StreamTimeout time.Duration
	// RequestTimeout bounds each snapshot and exposures request; 0 means
	// DefaultRequestTimeout.
	RequestTimeout time.Duration
	// Logger receives the failures of background work; nil discards them.
	Logger *slog.Logger
}

// EventKind says what an Event reports.
type EventKind int

// The kinds of events.
const (
	// EventChanged: a new snapshot serves some features differently.
	EventChanged EventKind = iota + 1
	// EventStale: the stream and polling both fail; evaluations answer
	// from the last snapshot.
	EventStale
	// EventReady: the server answers again after EventStale.
	EventReady
)

func (k EventKind) String() string {
	switch k {
	case EventChanged:
		return "changed"
	case EventStale:
		return "stale"
	case EventReady:
		return "ready"
	}
	return fmt.Sprintf("EventKind(%d)", int(k))
}

// Event is a change of the client's snapshot or of its connection.
type Event struct {
	Kind     EventKind
	Features []string // EventChanged: the keys of the features that changed, sorted
	Revision int64    // the snapshot's store revision
	Err      error    // EventStale: why
}

// Client evaluates features from a synced snapshot. It is safe for
// concurrent use.
type Client struct {
	cfg  Config
	http *http.Client
	log  *slog.Logger
	snap atomic.Pointer[feature.Snapshot]

	stale   atomic.Bool
	etag    string         // of snap; used by the sync loop only
	random  func() float64 // in [0, 1): the jitter of retries
	cancel  context.CancelFunc
	loops   sync.WaitGroup // the sync loop and the flusher
	closing sync.Once
	// ownHTTP: the client made http, and closes its idle connections
	// on Close.
	ownHTTP bool

	watchMu  sync.Mutex
	watchers map[int]func(Event)
	nextW    int

	flushMu sync.Mutex // one flush at a time; guards pending and pendingTrack
	pending []batch
	// pendingTrack are batches of events not yet taken by the server.
	pendingTrack []trackBatch

	usersMu sync.Mutex                // guards users, experiments
	users   map[exposedUser]time.Time // when first served in this interval
	// experiments are the IDs of the features whose users batches name,
	// as the server last answered; nil until it has answered.
	experiments map[string]bool
	eventsMu    sync.Mutex // guards events
	events      []trackEvent
	retMu       sync.Mutex
	retired     []retired
}

// retired is a snapshot swapped out: evaluations that loaded it may still
// count on it for a moment, so it is taken from at two flushes.
type retired struct {
	snap    *feature.Snapshot
	flushes int
}

// batch is a batch of counts with its ID, kept until the server takes it.
type batch struct {
	id     string
	counts []feature.Exposure
	users  []exposedUser
}

// exposedUser is a user the client served a feature that an experiment
// runs on.
type exposedUser struct {
	FeatureID string `json:"feature_id"`
	Version   int    `json:"version"`
	Bucket    string `json:"bucket"`
	User      string `json:"user"`
	// At is when the client first served the user since the last
	// flush; not part of the key of Client.users.
	At time.Time `json:"at"`
}

// trackEvent is one event of Track; trackBatch a batch of them with its
// ID, kept until the server takes it.
type trackEvent struct {
	Metric string    `json:"metric"`
	User   string    `json:"user"`
	Value  float64   `json:"value"`
	At     time.Time `json:"at"`
}

type trackBatch struct {
	id     string
	events []trackEvent
}

// New loads the snapshot and starts following the server. When the server
// cannot be reached it starts from Config.CacheFile, if that holds a
// snapshot, as stale; otherwise it fails. A server that refuses the
// request (a bad token, say) fails New whatever the cache holds.
func New(ctx context.Context, cfg Config) (*Client, error) {
	if cfg.URL == "" {
		return nil, errors.New("rollout client: Config.URL is required")
	}
	cfg.URL = strings.TrimRight(cfg.URL, "/")
	cfg.PollInterval = orDefault(cfg.PollInterval, DefaultPollInterval)
	cfg.FlushInterval = orDefault(cfg.FlushInterval, DefaultFlushInterval)
	cfg.StreamTimeout = orDefault(cfg.StreamTimeout, DefaultStreamTimeout)
	cfg.RequestTimeout = orDefault(cfg.RequestTimeout, DefaultRequestTimeout)
	cfg.MaxRetryInterval = max(orDefault(cfg.MaxRetryInterval, DefaultMaxRetry), cfg.PollInterval)
	c := &Client{cfg: cfg, http: cfg.HTTPClient, log: cfg.Logger, watchers: map[int]func(Event){}, random: mathrand.Float64}
	if c.http == nil {
		// A transport of its own, like http.DefaultTransport, whose idle
		// connections Close can close without touching the app's.
		c.http, c.ownHTTP = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}, true
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if _, err := c.refresh(ctx); err != nil {
		var refused *refusedError
		if errors.As(err, &refused) || cfg.CacheFile == "" {
			c.closeIdle()
			return nil, fmt.Errorf("rollout client: %w", err)
		}
		if cerr := c.loadCache(); cerr != nil {
			c.closeIdle()
			return nil, fmt.Errorf("rollout client: %w; and the cache: %w", err, cerr)
		}
		c.stale.Store(true)
		c.log.Warn("rollout: started from the cache file: the server cannot be reached", "err", err)
	}
	loop, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.cancel = cancel
	c.loops.Go(func() { c.run(loop) })
	c.loops.Go(func() { c.flushEvery(loop) })
	return c, nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d <= 0 {
		return def
	}
	return d
}

// Evaluate returns the bucket the feature key serves user, from memory,
// and counts it for the server's exposures. It returns a feature.Error
// with feature.ENotFound for a feature the snapshot lacks and
// feature.EInvalid for a user ID the server would refuse. It does not
// allocate.
func (c *Client) Evaluate(key, user string) (feature.Evaluation, error) {
	if err := feature.ValidateUser(user); err != nil {
		return feature.Evaluation{}, err
	}
	return c.snap.Load().Evaluate(key, user)
}

// EvaluateContext is Evaluate with the attributes of an evaluation's
// context, which the feature's rules and bucket_by read: overrides by user
// ID first, then the first rule whose conditions all hold, then the ring
// (see feature.Snapshot.EvaluateContext). attrs may be a feature.Context or
// a map[string]any: each value a string, a number, a bool or a []string
// (others hold no condition); nil is a context without attributes. It
// answers what the server's GET /evaluate with ctx. parameters, POST
// /evaluate with a context and OFREP answer for the same attributes, and
// refuses (feature.EInvalid) what they refuse: more than
// feature.MaxContextAttrs attributes, a string longer than
// feature.MaxContextValueLen, a list longer than feature.MaxContextList,
// more than feature.MaxContextBytes of names, strings and list entries, a
// value of another type. It reads attrs and
// does not keep it, and does not allocate.
func (c *Client) EvaluateContext(key, user string, attrs feature.Context) (feature.Evaluation, error) {
	if err := feature.ValidateUser(user); err != nil {
		return feature.Evaluation{}, err
	}
	if err := feature.ValidateContext(attrs); err != nil {
		return feature.Evaluation{}, err
	}
	return c.snap.Load().EvaluateContext(key, user, attrs)
}

// Snapshot returns the current snapshot, for reading features.
func (c *Client) Snapshot() *feature.Snapshot { return c.snap.Load() }

// Stale reports whether the client cannot reach the server and answers
// from its last snapshot.
func (c *Client) Stale() bool { return c.stale.Load() }

// Watch calls fn with every event from now until stop is called. Calls
// come one at a time from the client's sync loop: fn must return quickly.
func (c *Client) Watch(fn func(Event)) (stop func()) {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	id := c.nextW
	c.nextW++
	c.watchers[id] = fn
	return func() {
		c.watchMu.Lock()
		defer c.watchMu.Unlock()
		delete(c.watchers, id)
	}
}

func (c *Client) notify(ev Event) {
	c.watchMu.Lock()
	fns := make([]func(Event), 0, len(c.watchers))
	for _, fn := range c.watchers {
		fns = append(fns, fn)
	}
	c.watchMu.Unlock()
	for _, fn := range fns {
		fn(ev)
	}
}

// Close stops following the server, waiting for the client's goroutines
// to return, and sends the counts not sent yet, waiting at most
// RequestTimeout. It returns the error of that last send. Unless
// Config.HTTPClient was given, it then closes the client's idle
// connections.
func (c *Client) Close() error {
	var err error
	c.closing.Do(func() {
		c.cancel()
		c.loops.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.RequestTimeout)
		defer cancel()
		err = c.Flush(ctx)
		c.closeIdle()
	})
	return err
}

// closeIdle closes the idle connections of the http.Client the client
// made, if it made it.
func (c *Client) closeIdle() {
	if c.ownHTTP {
		c.http.CloseIdleConnections()
	}
}

// run follows the stream, and polls while it is down, until ctx is done.
// After the stream ends it waits a random delay (see retryDelay) before it
// polls and tries again, longer after each failure in a row.
func (c *Client) run(ctx context.Context) {
	failures := 0
	for {
		connected, err := c.follow(ctx)
		if ctx.Err() != nil {
			return
		}
		if connected {
			failures = 0
		}
		if !c.sleep(ctx, retryDelay(failures, c.cfg.PollInterval, c.cfg.MaxRetryInterval, c.random)) {
			return
		}
		failures++
		if _, perr := c.refresh(ctx); perr != nil {
			c.setStale(errors.Join(err, perr))
		} else {
			c.setReady()
		}
	}
}

// sleep waits d, or until ctx is done: it reports whether it waited d.
func (c *Client) sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// retryDelay is the delay before a try that follows failures failed ones
// in a row: a random point (random returns [0, 1)) of the upper half of
// base doubled failures times, capped at ceiling. The halves spread the
// apps a restart disconnected; the doubling eases a server that is
// struggling.
func retryDelay(failures int, base, ceiling time.Duration, random func() float64) time.Duration {
	d := ceiling
	if failures < 63 && base <= ceiling>>failures { // base<<failures ≤ ceiling: no overflow
		d = base << failures
	}
	return d/2 + time.Duration(random()*float64(d/2))
}

func (c *Client) setStale(err error) {
	c.log.Warn("rollout: cannot reach the server; answering from the last snapshot", "err", err)
	if !c.stale.Swap(true) {
		c.notify(Event{Kind: EventStale, Revision: c.snap.Load().Revision(), Err: err})
	}
}

func (c *Client) setReady() {
	if c.stale.Swap(false) {
		c.notify(Event{Kind: EventReady, Revision: c.snap.Load().Revision()})
	}
}

// refusedError is a 4xx answer: asking again will not help.
type refusedError struct {
	status int
	body   string
}

func (e *refusedError) Error() string {
	return fmt.Sprintf("the server refused the request: %d %s", e.status, e.body)
}

func (c *Client) request(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.cfg.URL+path, body)
	if err != nil {
		return nil, err
	}
	if c.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.cfg.Token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return req, nil
}

func statusError(res *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(res.Body, 4<<10))
	if res.StatusCode >= 400 && res.StatusCode < 500 && res.StatusCode != http.StatusRequestTimeout && res.StatusCode != http.StatusTooManyRequests {
		return &refusedError{status: res.StatusCode, body: strings.TrimSpace(string(data))}
	}
	return fmt.Errorf("%s: %s", res.Status, strings.TrimSpace(string(data)))
}

// refresh reads the snapshot, unless it has not changed since the last
// read, and installs it. It reports whether it installed a new one.
func (c *Client) refresh(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	req, err := c.request(ctx, "GET", "/sync/v1/snapshot", nil)
	if err != nil {
		return false, err
	}
	if c.etag != "" {
		req.Header.Set("If-None-Match", c.etag)
	}
	// Asked for explicitly, the body comes gzipped whatever transport
	// HTTPClient has, and is gunzipped here.
	req.Header.Set("Accept-Encoding", "gzip")
	res, err := c.http.Do(req)
	if err != nil {
		return false, fmt.Errorf("read the snapshot: %w", err)
	}
	defer res.Body.Close()
	switch res.StatusCode {
	case http.StatusNotModified:
		return false, nil
	case http.StatusOK:
	default:
		return false, fmt.Errorf("read the snapshot: %w", statusError(res))
	}
	var r io.Reader = res.Body
	if strings.EqualFold(res.Header.Get("Content-Encoding"), "gzip") {
		zr, err := gzip.NewReader(res.Body)
		if err != nil {
			return false, fmt.Errorf("read the snapshot: %w", err)
		}
		r = zr
	}
	body, err := io.ReadAll(r)
	if err != nil {
		return false, fmt.Errorf("read the snapshot: %w", err)
	}
	if err := c.install(body); err != nil {
		return false, fmt.Errorf("read the snapshot: %w", err)
	}
	if etag := res.Header.Get("ETag"); etag != "" {
		// The server's own tag: the same as the one computed for a
		// server of this version, and what an older one matches.
		c.etag = etag
	}
	if c.cfg.CacheFile != "" {
		if err := writeFile(c.cfg.CacheFile, [][]byte{body}); err != nil {
			c.log.Error("rollout: write the cache file", "err", err)
		}
	}
	return true, nil
}

// install decodes a sync document and swaps it in.
func (c *Client) install(body []byte) error {
	next, err := feature.DecodeSync(body)
	if next == nil {
		return err
	}
	if err != nil {
		c.log.Error("rollout: features left out of the snapshot", "err", err)
	}
	c.swap(next)
	return nil
}

// swap makes next the snapshot evaluations read, and tells the watchers
// what changed.
func (c *Client) swap(next *feature.Snapshot) {
	if h := next.ServedHook(); h != nil {
		h.Set(c.served)
	}
	c.etag = next.SyncTag()
	old := c.snap.Swap(next)
	if old == nil {
		return
	}
	c.retMu.Lock()
	c.retired = append(c.retired, retired{snap: old})
	c.retMu.Unlock()
	if changed := old.Changed(next); len(changed) > 0 {
		c.notify(Event{Kind: EventChanged, Features: changed, Revision: next.Revision()})
	}
}

// changeEvent is the data of the stream's change events.
type changeEvent struct {
	Revision int64             `json:"revision"`
	Set      []json.RawMessage `json:"set"`
	Deleted  []string          `json:"deleted"`
	Refetch  bool              `json:"refetch"`
}

// apply applies a change event, which carries the changed features unless
// it says to refetch; an event the snapshot is past already is skipped.
// It reports whether the snapshot must be fetched instead: the event
// carried no features, or some would not decode.
func (c *Client) apply(data []byte) (refetch bool) {
	var ev changeEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		c.log.Warn("rollout: a change event that does not decode; fetching the snapshot", "err", err)
		return true
	}
	if ev.Refetch || ev.Set == nil && ev.Deleted == nil {
		return true
	}
	cur := c.snap.Load()
	if ev.Revision <= cur.Revision() {
		return false // the snapshot fetched on connecting holds it
	}
	next, err := cur.ApplySync(ev.Revision, ev.Set, ev.Deleted)
	if err != nil {
		c.log.Warn("rollout: a change event that does not apply; fetching the snapshot", "err", err)
		return true
	}
	c.swap(next)
	if c.cfg.CacheFile != "" {
		if err := writeFile(c.cfg.CacheFile, next.SyncParts()); err != nil {
			c.log.Error("rollout: write the cache file", "err", err)
		}
	}
	return false
}

func (c *Client) loadCache() error {
	body, err := os.ReadFile(c.cfg.CacheFile)
	if err != nil {
		return err
	}
	if err := c.install(body); err != nil {
		return fmt.Errorf("cache file %s: %w", c.cfg.CacheFile, err)
	}
	return nil
}

// writeFile replaces path's content with the concatenation of parts at
// once, through a temporary file renamed over it.
func writeFile(path string, parts [][]byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	bufs := net.Buffers(parts)
	if _, err := bufs.WriteTo(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// follow reads the stream until it ends, reloading the snapshot when it
// connects and applying each change event. It returns whether it
// connected (the server said hello) and why the stream ended.
func (c *Client) follow(ctx context.Context) (connected bool, _ error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	req, err := c.request(ctx, "GET", "/sync/v1/stream", nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	// A silent stream is a dead one: cancel the request.
	watchdog := time.AfterFunc(c.cfg.RequestTimeout, cancel)
	defer watchdog.Stop()
	res, err := c.http.Do(req)
	if err != nil {
		return false, fmt.Errorf("open the stream: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return false, fmt.Errorf("open the stream: %w", statusError(res))
	}
	watchdog.Reset(c.cfg.StreamTimeout)
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 0, 4<<10), maxEventBytes)
	var (
		event string
		data  []byte
	)
	for sc.Scan() {
		watchdog.Reset(c.cfg.StreamTimeout)
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			refetch := false
			switch event {
			case "hello": // events may have been missed: catch up
				connected, refetch = true, true
			case "change":
				// An event too large to carry its features reaches
				// every app at once: their fetches are spread.
				if refetch = c.apply(data); refetch && !c.sleep(ctx, time.Duration(c.random()*float64(c.cfg.PollInterval/2))) {
					return connected, ctx.Err()
				}
			}
			if refetch {
				if _, err := c.refresh(ctx); err != nil {
					return connected, err
				}
			}
			if event != "" {
				c.setReady()
			}
			event, data = "", data[:0]
		case bytes.HasPrefix(line, []byte("event:")):
			event = strings.TrimSpace(string(line[len("event:"):]))
		case bytes.HasPrefix(line, []byte("data:")):
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(line[len("data:"):], []byte(" "))...)
		}
	}
	if err := sc.Err(); err != nil {
		return connected, fmt.Errorf("read the stream: %w", err)
	}
	return connected, errors.New("the stream ended")
}

// flushEvery sends the counts every FlushInterval until ctx is done.
func (c *Client) flushEvery(ctx context.Context) {
	t := time.NewTicker(c.cfg.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := c.Flush(ctx); err != nil {
				c.log.Warn("rollout: send evaluation counts", "err", err)
			}
		}
	}
}

// Flush sends the evaluation counts gathered since the last flush, and the
// batches earlier flushes could not send, oldest first. A batch the server
// did not answer stays, under its ID, for the next flush; at most 100
// batches wait, the oldest dropped first.
func (c *Client) Flush(ctx context.Context) error {
	c.flushMu.Lock()
	defer c.flushMu.Unlock()
	counts := c.take()
	users := c.takeUsers()
	for len(counts) > 0 {
		n := batchSize(counts)
		c.pending = append(c.pending, batch{id: newBatchID(), counts: counts[:n], users: users})
		counts, users = counts[n:], nil
	}
	trackErr := c.flushTrack(ctx)
	if over := len(c.pending) - maxPendingBatches; over > 0 {
		c.pending = c.pending[over:]
	}
	for len(c.pending) > 0 {
		b := c.pending[0]
		err := c.send(ctx, b)
		var refused *refusedError
		if err != nil && !errors.As(err, &refused) {
			return errors.Join(err, trackErr) // kept for the next flush
		}
		c.pending = c.pending[1:]
		if err != nil {
			return errors.Join(fmt.Errorf("batch %s dropped: %w", b.id, err), trackErr)
		}
	}
	return trackErr
}

// maxBatchSketchBytes bounds the bytes of the users' sketches one batch
// carries, so that a batch stays well under the server's 1 MiB body
// (sketches travel in base64, 4/3 their size).
const maxBatchSketchBytes = 512 << 10

// batchSize is how many of counts the next batch holds: at most
// feature.MaxExposureBatch, and sketches of at most maxBatchSketchBytes
// (always at least one count).
func batchSize(counts []feature.Exposure) int {
	bytes := 0
	for i, e := range counts {
		if bytes += len(e.Users); i == feature.MaxExposureBatch || i > 0 && bytes > maxBatchSketchBytes {
			return i
		}
	}
	return len(counts)
}

// served is the snapshots' hook: it notes user for the next batch when an
// experiment runs on c's feature (or before the server has said which
// do).
func (c *Client) served(comp *feature.Compiled, user string, o *feature.Outcome) {
	if o.Bucket == "" {
		return
	}
	f := comp.Feature()
	c.usersMu.Lock()
	defer c.usersMu.Unlock()
	if c.experiments != nil && !c.experiments[f.ID] || len(c.users) >= maxBatchUsers {
		return
	}
	if c.users == nil {
		c.users = map[exposedUser]time.Time{}
	}
	k := exposedUser{FeatureID: f.ID, Version: o.Version, Bucket: o.Bucket, User: user}
	if _, ok := c.users[k]; !ok {
		c.users[k] = time.Now().UTC()
	}
}

// takeUsers returns the users noted since the last flush.
func (c *Client) takeUsers() []exposedUser {
	c.usersMu.Lock()
	defer c.usersMu.Unlock()
	if len(c.users) == 0 {
		return nil
	}
	out := make([]exposedUser, 0, len(c.users))
	for u, at := range c.users {
		u.At = at
		out = append(out, u)
	}
	clear(c.users)
	return out
}

// Track reports an event of metric (a metric created on the server, POST
// /api/metrics) for user, with value (a conversion counts the user
// whatever the value; a mean metric sums them), at the time of the call.
// Events are sent with the next flush, in batches whose IDs a retry
// repeats, so each counts once; at most 100,000 wait, the oldest dropped
// first. It refuses, at once, what the server would refuse a whole batch
// for: an empty metric or user, a user ID over 256 bytes, a value that is
// not a number from -1e9 to 1e9. A batch naming a metric the server does
// not know is refused whole, and dropped (logged).
func (c *Client) Track(metric, user string, value float64) error {
	switch {
	case metric == "":
		return errors.New("rollout: Track: give the metric's key")
	case user == "" || len(user) > maxTrackUser:
		return fmt.Errorf("rollout: Track: the user ID must be 1 to %d bytes", maxTrackUser)
	case math.IsNaN(value) || math.Abs(value) > maxTrackValue:
		return fmt.Errorf("rollout: Track: value %g is not a number from %g to %g", value, -maxTrackValue, maxTrackValue)
	}
	c.eventsMu.Lock()
	defer c.eventsMu.Unlock()
	if len(c.events) >= maxPendingEvents {
		c.events = c.events[1:]
	}
	c.events = append(c.events, trackEvent{Metric: metric, User: user, Value: value, At: time.Now().UTC()})
	return nil
}

// flushTrack sends the events tracked since the last flush, and the
// batches earlier flushes could not send, oldest first. The caller holds
// flushMu.
func (c *Client) flushTrack(ctx context.Context) error {
	c.eventsMu.Lock()
	events := c.events
	c.events = nil
	c.eventsMu.Unlock()
	for len(events) > 0 {
		n := min(len(events), maxTrackBatch)
		c.pendingTrack = append(c.pendingTrack, trackBatch{id: newBatchID(), events: events[:n]})
		events = events[n:]
	}
	if over := len(c.pendingTrack) - maxPendingEvents/maxTrackBatch; over > 0 {
		c.pendingTrack = c.pendingTrack[over:]
	}
	for len(c.pendingTrack) > 0 {
		b := c.pendingTrack[0]
		err := c.post(ctx, "/api/track", struct {
			Batch  string       `json:"batch"`
			Events []trackEvent `json:"events"`
		}{b.id, b.events}, nil)
		var refused *refusedError
		if err != nil && !errors.As(err, &refused) {
			return fmt.Errorf("send events %s: %w", b.id, err) // kept for the next flush
		}
		c.pendingTrack = c.pendingTrack[1:]
		if err != nil {
			return fmt.Errorf("events %s dropped: %w", b.id, err)
		}
	}
	return nil
}

// take collects the counts of the current snapshot and of retired ones.
func (c *Client) take() []feature.Exposure {
	counts := c.snap.Load().TakeExposures(nil)
	c.retMu.Lock()
	defer c.retMu.Unlock()
	kept := c.retired[:0]
	for _, r := range c.retired {
		counts = r.snap.TakeExposures(counts)
		if r.flushes++; r.flushes < 2 {
			kept = append(kept, r)
		}
	}
	clear(c.retired[len(kept):])
	c.retired = kept
	return counts
}

type exposureCount struct {
	Feature   string  `json:"feature"`
	FeatureID string  `json:"feature_id"`
	Version   int     `json:"version"`
	Bucket    string  `json:"bucket"`
	Count     int64   `json:"count"`
	Rule      *string `json:"rule,omitempty"` // the rule that served; "": the ring, an override or the default
	// UsersSketch is the distinct users of the count, a sketch in
	// package hll's binary form: at most 4,099 bytes, whatever the users.
	UsersSketch []byte `json:"users_sketch,omitempty"`
}

func (c *Client) send(ctx context.Context, b batch) error {
	body := struct {
		Batch     string          `json:"batch"`
		Exposures []exposureCount `json:"exposures"`
		Users     []exposedUser   `json:"users,omitempty"`
	}{Batch: b.id, Exposures: make([]exposureCount, len(b.counts)), Users: b.users}
	for i, e := range b.counts {
		body.Exposures[i] = exposureCount{Feature: e.Feature, FeatureID: e.FeatureID, Version: e.Version, Bucket: e.Bucket, Count: e.Count, Rule: e.Rule, UsersSketch: e.Users}
	}
	var ans struct {
		Experiments []string `json:"experiments"`
	}
	if err := c.post(ctx, "/api/exposures", body, &ans); err != nil {
		return fmt.Errorf("send batch %s: %w", b.id, err)
	}
	running := make(map[string]bool, len(ans.Experiments))
	for _, id := range ans.Experiments {
		running[id] = true
	}
	c.usersMu.Lock()
	c.experiments = running
	c.usersMu.Unlock()
	return nil
}

// post sends body as JSON to path and reads a 200's answer into ans (nil:
// discarded).
func (c *Client) post(ctx context.Context, path string, body, ans any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	req, err := c.request(ctx, "POST", path, bytes.NewReader(data))
	if err != nil {
		return err
	}
	res, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return statusError(res)
	}
	if ans == nil {
		_, err = io.Copy(io.Discard, io.LimitReader(res.Body, 1<<20))
		return err
	}
	return json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(ans)
}

func newBatchID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
