package api

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/rollout"
)

// The sync API lets apps evaluate in their own process (package client):
// GET /sync/v1/snapshot is every feature's configuration and the store
// revision, as a rollout.SyncDocument with a strong ETag; GET
// /sync/v1/stream is a stream of Server-Sent Events, one per batch of
// commits the service takes in, after which a client fetches the snapshot
// again with If-None-Match.

// Stream timing. heartbeatInterval is a variable for tests.
var heartbeatInterval = 15 * time.Second

// streamRetry is the reconnection delay the stream suggests to EventSource
// clients, in milliseconds.
const streamRetry = 1000

// syncBody is the encoded snapshot document of one service snapshot.
type syncBody struct {
	snap *rollout.Snapshot
	body []byte
	etag string // strong, quoted
}

// syncCache holds the last encoded document, so that the many apps that
// poll one snapshot cost one encoding.
type syncCache struct{ cur atomic.Pointer[syncBody] }

func (sc *syncCache) get(snap *rollout.Snapshot) (*syncBody, error) {
	if cur := sc.cur.Load(); cur != nil && cur.snap == snap {
		return cur, nil
	}
	body, err := json.Marshal(snap.Document())
	if err != nil {
		return nil, fmt.Errorf("encode the snapshot: %w", err)
	}
	body = append(body, '\n')
	sum := sha256.Sum256(body)
	next := &syncBody{snap: snap, body: body, etag: `"` + hex.EncodeToString(sum[:16]) + `"`}
	sc.cur.Store(next)
	return next, nil
}

// syncSnapshot is GET /sync/v1/snapshot. Its ETag is a hash of the body:
// equal tags, equal bytes.
func (s *Server) syncSnapshot(c echo.Context) error {
	b, err := s.sync.get(s.svc.Snapshot())
	if err != nil {
		return err
	}
	h := c.Response().Header()
	h.Set("ETag", b.etag)
	h.Set("Cache-Control", "no-cache")
	if noneMatch(c.Request().Header.Get("If-None-Match"), b.etag) {
		return c.NoContent(http.StatusNotModified)
	}
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, b.body)
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
// server's snapshot caught up with and the features those commits changed.
type changeEvent struct {
	Revision int64    `json:"revision"`
	Features []string `json:"features"`
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
			ev := changeEventOf(batch)
			if len(ev.Features) == 0 {
				continue // tokens only
			}
			data, _ := json.Marshal(ev)
			buf.WriteString("id: " + strconv.FormatInt(ev.Revision, 10) + "\nevent: change\ndata: ")
			buf.Write(data)
			buf.WriteString("\n\n")
		case <-heartbeat.C:
			buf.WriteString(": heartbeat\n\n")
		}
		if err := send(); err != nil {
			return nil
		}
	}
}

func changeEventOf(batch []rollout.Commit) changeEvent {
	ev := changeEvent{Features: []string{}}
	for _, cm := range batch {
		ev.Revision = max(ev.Revision, cm.Revision)
		if cm.Kind == rollout.CommitFeature {
			ev.Features = append(ev.Features, cm.Key)
		}
	}
	slices.Sort(ev.Features)
	ev.Features = slices.Compact(ev.Features)
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
	if len(req.Exposures) > rollout.MaxExposureBatch { // before copying them
		return rollout.Errorf(rollout.EInvalid, "a batch holds at most %d counts, got %d: split it", rollout.MaxExposureBatch, len(req.Exposures))
	}
	counts := make([]rollout.Exposure, len(req.Exposures))
	for i, e := range req.Exposures {
		counts[i] = rollout.Exposure{Feature: e.Feature, FeatureID: e.FeatureID, Version: e.Version, Bucket: e.Bucket, Count: e.Count}
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
