package api

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
)

// The sync API lets apps evaluate in their own process (package client):
// GET /sync/v1/snapshot is the snapshot's sync document (see
// feature.Snapshot.AppendSync: every feature's sync form, overrides keyed
// by a hash of their user, and the store revision), encoded once per
// snapshot and gzipped once for the clients that accept it, under a strong
// ETag per representation; GET /sync/v1/stream is a stream of Server-Sent
// Events, one per batch of commits the service takes in, holding the sync
// forms of the features the batch changed, so that a connected client
// applies them without fetching the snapshot again.

// Stream timing. heartbeatInterval is a variable for tests.
var heartbeatInterval = 15 * time.Second

// streamRetry is the reconnection delay the stream suggests to EventSource
// clients, in milliseconds.
const streamRetry = 1000

// maxChangeEvent bounds the sync forms a change event carries, in bytes:
// a batch that changed more sends only the keys, and clients fetch the
// snapshot instead. It holds one feature of the largest size (10,000
// overrides, 100 buckets of 8 KB values: about 1.2 MB). A variable for
// tests.
var maxChangeEvent = 2 << 20

// syncEncodings counts the sync documents encoded, for tests.
var syncEncodings atomic.Int64

// syncEncodeHook, set by tests, runs before each encoding with a function
// returning how many requests have found the document stale so far.
var syncEncodeHook func(stale func() int64)

// syncBody is the encoded sync document of one service snapshot, in the
// parts feature.Snapshot.SyncParts gives: the features' own encodings,
// written one after the other rather than copied into one body.
type syncBody struct {
	snap  *feature.Snapshot
	parts [][]byte
	size  int
	etag  string // strong, quoted

	gzipOnce sync.Once
	gz       []byte // the document gzipped, made by the first request that accepts it
	gzipErr  error
}

// gzipTag is the ETag of the gzipped representation of a body tagged etag.
func gzipTag(etag string) string { return strings.TrimSuffix(etag, `"`) + `-gzip"` }

// gzipped returns b's document gzipped, compressing it on the first call
// only: concurrent callers wait for that one.
func (b *syncBody) gzipped() ([]byte, error) {
	b.gzipOnce.Do(func() {
		var buf bytes.Buffer
		buf.Grow(b.size / 2)
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed) // a valid level: no error
		for _, p := range b.parts {
			if _, err := zw.Write(p); err != nil {
				b.gzipErr = fmt.Errorf("gzip the snapshot: %w", err)
				return
			}
		}
		if err := zw.Close(); err != nil {
			b.gzipErr = fmt.Errorf("gzip the snapshot: %w", err)
			return
		}
		b.gz = buf.Bytes()
		if cap(b.gz) > len(b.gz)+len(b.gz)/4 {
			// The buffer grew by doubling: keep only what it holds, for
			// as long as the snapshot is served.
			b.gz = bytes.Clone(b.gz)
		}
	})
	return b.gz, b.gzipErr
}

// syncCache holds the encoded document of the service's latest snapshot,
// so that the many apps that fetch one snapshot cost one encoding. Requests
// that find it stale wait for one of them to encode the new one (a single
// flight) rather than each encoding its own copy.
type syncCache struct {
	mu    sync.Mutex // held while encoding
	cur   atomic.Pointer[syncBody]
	stale atomic.Int64 // requests that found cur stale, for syncEncodeHook
}

// get returns the encoded document of the snapshot current returns,
// encoding it if no request did before.
func (sc *syncCache) get(current func() *feature.Snapshot) *syncBody {
	if cur := sc.cur.Load(); cur != nil && cur.snap == current() {
		return cur
	}
	sc.stale.Add(1)
	sc.mu.Lock()
	defer sc.mu.Unlock()
	snap := current() // the newest, which whoever held the lock may have encoded
	if cur := sc.cur.Load(); cur != nil && cur.snap == snap {
		return cur
	}
	if syncEncodeHook != nil {
		syncEncodeHook(sc.stale.Load)
	}
	syncEncodings.Add(1)
	next := &syncBody{snap: snap, parts: snap.SyncParts(), etag: snap.SyncTag()}
	for _, p := range next.parts {
		next.size += len(p)
	}
	sc.cur.Store(next)
	return next
}

// syncSnapshot is GET /sync/v1/snapshot. Its ETag names the bytes of the
// representation served: the document's tag, with "-gzip" for the gzipped
// one. If-None-Match may name either, since both are the same document.
func (s *Server) syncSnapshot(c echo.Context) error {
	b := s.sync.get(s.svc.Snapshot)
	r := c.Request()
	h := c.Response().Header()
	h.Set("Vary", "Accept-Encoding")
	h.Set("Cache-Control", "no-cache")
	etag := b.etag
	gz := acceptsGzip(r.Header.Values("Accept-Encoding"))
	if gz {
		etag = gzipTag(b.etag)
	}
	h.Set("ETag", etag)
	if inm := r.Header.Get("If-None-Match"); inm != "" && (noneMatch(inm, b.etag) || noneMatch(inm, gzipTag(b.etag))) {
		return c.NoContent(http.StatusNotModified)
	}
	parts, size := b.parts, b.size
	if gz {
		body, err := b.gzipped()
		if err != nil {
			return err
		}
		h.Set("Content-Encoding", "gzip")
		parts, size = [][]byte{body}, len(body)
	}
	h.Set(echo.HeaderContentType, echo.MIMEApplicationJSON)
	h.Set(echo.HeaderContentLength, strconv.Itoa(size))
	w := c.Response()
	w.WriteHeader(http.StatusOK)
	writeParts(w, parts)
	return nil
}

// snapshotChunk is how much of a snapshot is written under one write
// deadline.
const snapshotChunk = 1 << 20

// writeParts writes parts to w a chunk at a time, each with streamWriteWindow
// to go: a large snapshot takes as long as the client needs to read it, as
// long as it keeps reading, rather than being cut at the server's
// WriteTimeout. It stops when the client goes.
func writeParts(w http.ResponseWriter, parts [][]byte) {
	rc := http.NewResponseController(w)
	for _, p := range parts {
		for len(p) > 0 {
			n := min(len(p), snapshotChunk)
			if err := rc.SetWriteDeadline(time.Now().Add(streamWriteWindow)); err != nil && !errors.Is(err, http.ErrNotSupported) {
				return
			}
			if _, err := w.Write(p[:n]); err != nil {
				return // the client is gone, or read nothing for streamWriteWindow
			}
			p = p[n:]
		}
	}
}

// acceptsGzip reports whether Accept-Encoding headers accept gzip: they name
// it, or "*", with a q-value other than 0.
func acceptsGzip(headers []string) bool {
	for _, header := range headers {
		for item := range strings.SplitSeq(header, ",") {
			name, params, _ := strings.Cut(item, ";")
			name = strings.ToLower(strings.TrimSpace(name))
			if name != "gzip" && name != "x-gzip" && name != "*" {
				continue
			}
			q := 1.0
			for p := range strings.SplitSeq(params, ";") {
				if k, v, ok := strings.Cut(strings.TrimSpace(p), "="); ok && strings.EqualFold(k, "q") {
					if f, err := strconv.ParseFloat(strings.TrimSpace(v), 64); err == nil {
						q = f
					}
				}
			}
			return q > 0
		}
	}
	return false
}

// noneMatch reports whether an If-None-Match header names etag, by the weak
// comparison RFC 9110 asks of If-None-Match.
func noneMatch(header, etag string) bool {
	for tag := range strings.SplitSeq(header, ",") {
		tag = strings.TrimPrefix(strings.TrimSpace(tag), "W/")
		if tag == "*" || tag == etag {
			return true
		}
	}
	return false
}

// changeEvent is the data of a stream's "change" event: the revision the
// server's snapshot caught up with, the keys of the features those commits
// changed, and, unless the event would be too large (Refetch), the sync
// form of each of them still served (Set) and the keys of the deleted ones
// (Deleted). The sync forms are those of the snapshot when the event was
// made, at that revision or later.
type changeEvent struct {
	Revision int64             `json:"revision"`
	Features []string          `json:"features"`
	Set      []json.RawMessage `json:"set,omitempty"`
	Deleted  []string          `json:"deleted,omitempty"`
	Refetch  bool              `json:"refetch,omitempty"`
}

// lastEvent is the last change event encoded, shared by every stream that
// sends the same batch.
type lastEvent struct {
	first *rollout.Commit // the batch's first commit, which identifies it
	data  []byte
}

// changeEvents encodes each batch's change event once for all the streams.
type changeEvents struct {
	mu   sync.Mutex
	last atomic.Pointer[lastEvent]
}

// encode returns the "change" event of batch, complete with its id, event
// and data lines, or nil when the batch changed no feature. Every
// subscriber receives the same batch slice, so its first element names it.
func (ce *changeEvents) encode(batch []rollout.Commit, snap func() *feature.Snapshot) []byte {
	if len(batch) == 0 {
		return nil
	}
	if last := ce.last.Load(); last != nil && last.first == &batch[0] {
		return last.data
	}
	ce.mu.Lock()
	defer ce.mu.Unlock()
	if last := ce.last.Load(); last != nil && last.first == &batch[0] {
		return last.data
	}
	var data []byte
	if ev := changeEventOf(batch, snap()); len(ev.Features) > 0 {
		var buf bytes.Buffer
		buf.WriteString("id: " + strconv.FormatInt(ev.Revision, 10) + "\nevent: change\ndata: ")
		enc := json.NewEncoder(&buf)
		// The sync forms as they are, byte for byte: clients hash them
		// (see feature.Snapshot.SyncTag).
		enc.SetEscapeHTML(false)
		enc.Encode(ev) // plain data: cannot fail; ends the line
		buf.WriteString("\n")
		data = buf.Bytes()
	}
	ce.last.Store(&lastEvent{first: &batch[0], data: data})
	return data
}

// syncStream is GET /sync/v1/stream: first a "hello" event with the
// current revision, then a "change" event for each batch of commits that
// changed features, and a comment every heartbeatInterval so that clients
// and proxies see the connection alive. The stream ends when the client
// goes, or when it fell so far behind that the service dropped its
// subscription: the client reconnects and reads the snapshot again.
func (s *Server) syncStream(c echo.Context) error {
	commits, stop := s.svc.Subscribe()
	defer stop()

	w := c.Response()
	h := w.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer
	rc := http.NewResponseController(w)
	// A stream reads nothing after its request: no read deadline of the
	// server's may end it.
	if err := rc.SetReadDeadline(time.Time{}); err != nil {
		return fmt.Errorf("stream: clear the read deadline: %w", err)
	}
	w.WriteHeader(http.StatusOK)
	out := s.streams.writer(c) // writes what send queues; drops a client that does not read (streams.go)
	defer out.stop()

	var buf bytes.Buffer
	send := func() error {
		err := out.send(buf.Bytes())
		buf.Reset()
		return err
	}
	rev := s.svc.Snapshot().Revision()
	fmt.Fprintf(&buf, "retry: %d\nid: %d\nevent: hello\ndata: {\"revision\":%d}\n\n", streamRetry, rev, rev)
	if err := send(); err != nil {
		return nil // the client is gone
	}
	heartbeat := time.NewTicker(heartbeatInterval)
	defer heartbeat.Stop()
	ctx := c.Request().Context()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.closing:
			return nil // the server shuts down: the client reconnects elsewhere
		case <-out.ended():
			return nil // dropped, or gone: the client reconnects
		case batch, ok := <-commits:
			if !ok {
				return nil // too slow: the client reconnects
			}
			ev := s.events.encode(batch, s.svc.Snapshot)
			if ev == nil {
				continue // tokens only
			}
			buf.Write(ev)
		case <-heartbeat.C:
			buf.WriteString(": heartbeat\n\n")
		}
		if err := send(); err != nil {
			return nil
		}
	}
}

// changeEventOf is the change event of batch, with the features' sync
// forms as snap serves them.
func changeEventOf(batch []rollout.Commit, snap *feature.Snapshot) changeEvent {
	ev := changeEvent{Features: []string{}}
	for _, cm := range batch {
		ev.Revision = max(ev.Revision, cm.Revision)
		if cm.Kind == rollout.CommitFeature {
			ev.Features = append(ev.Features, cm.Key)
		}
	}
	slices.Sort(ev.Features)
	ev.Features = slices.Compact(ev.Features)
	size := 0
	for _, key := range ev.Features {
		data, ok := snap.SyncFeature(key)
		if !ok {
			ev.Deleted = append(ev.Deleted, key)
			size += len(key)
			continue
		}
		ev.Set = append(ev.Set, data)
		size += len(data)
	}
	if size > maxChangeEvent {
		ev.Set, ev.Deleted, ev.Refetch = nil, nil, true
	}
	return ev
}

// exposureBatchRequest is the body of POST /api/exposures: counts of
// evaluations an app made in its own process, under a batch ID that a
// retry repeats.
type exposureBatchRequest struct {
	Batch     string          `json:"batch"`
	Exposures []exposureCount `json:"exposures"`
}

type exposureCount struct {
	Feature   string `json:"feature"` // the key: if given, it must be the feature's
	FeatureID string `json:"feature_id"`
	Version   int    `json:"version"`
	Bucket    string `json:"bucket"` // "": no bucket
	Count     int64  `json:"count"`
	// Rule is the rule that served ("" the ring, an override or the
	// default); clients from before rules' counts leave it out.
	Rule *string `json:"rule,omitempty"`
}

// exposureBatchAnswer is the answer to POST /api/exposures.
type exposureBatchAnswer struct {
	Batch string `json:"batch"`
	// Added is false for a batch the server had counted already, or
	// whose every count was skipped.
	Added   bool                      `json:"added"`
	Counted int                       `json:"counted"`
	Skipped []rollout.SkippedExposure `json:"skipped"`
}

// addExposures is POST /api/exposures. A batch with a count the server
// cannot take (see rollout.Service.AddExposureBatch) is refused whole,
// 422 naming the count's index; counts of deleted features are skipped and
// listed in the answer. The route's rate limit (exposureLimit) answers 429
// with Retry-After.
func (s *Server) addExposures(c echo.Context) error {
	var req exposureBatchRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	if len(req.Exposures) > feature.MaxExposureBatch { // before copying them
		return feature.Errorf(feature.EInvalid, "a batch holds at most %d counts, got %d: split it", feature.MaxExposureBatch, len(req.Exposures))
	}
	counts := make([]feature.Exposure, len(req.Exposures))
	for i, e := range req.Exposures {
		counts[i] = feature.Exposure{Feature: e.Feature, FeatureID: e.FeatureID, Version: e.Version, Bucket: e.Bucket, Count: e.Count, Rule: e.Rule}
	}
	res, err := s.svc.AddExposureBatch(c.Request().Context(), req.Batch, counts)
	if err != nil {
		return err
	}
	ans := exposureBatchAnswer{Batch: req.Batch, Added: res.Added, Counted: res.Counted, Skipped: res.Skipped}
	if ans.Skipped == nil {
		ans.Skipped = []rollout.SkippedExposure{}
	}
	return c.JSON(http.StatusOK, ans)
}
