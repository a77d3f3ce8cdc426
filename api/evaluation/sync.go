package evaluation

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/rollout/experiment"
	"github.com/rollout/rollout/rollout/exposure"
	"github.com/rollout/rollout/rollout/feature"
)

// The sync API lets apps evaluate in their own process (package client):
// GET /sync/v1/snapshot is the snapshot's sync document (see
// feature.Snapshot.AppendSync: every feature's sync form, overrides keyed
// by a hash of their user, and the store revision), encoded once per
// snapshot and gzipped once for the clients that accept it, under a strong
// ETag per representation. Its stream of changes, GET /sync/v1/stream, is
// package stream's, with the budget of the API's other streams.
// POST /api/exposures takes the counts of the evaluations apps made in
// their own process.

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

// SyncSnapshot is GET /sync/v1/snapshot. Its ETag names the bytes of the
// representation served: the document's tag, with "-gzip" for the gzipped
// one. If-None-Match may name either, since both are the same document.
func (s *Server) SyncSnapshot(c echo.Context) error {
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
	writeParts(w, parts, s.writeWindow)
	return nil
}

// snapshotChunk is how much of a snapshot is written under one write
// deadline.
const snapshotChunk = 1 << 20

// writeParts writes parts to w a chunk at a time, each with window to go
// (Options.WriteWindow): a large snapshot takes as long as the client needs to read it, as
// long as it keeps reading, rather than being cut at the server's
// WriteTimeout. It stops when the client goes.
func writeParts(w http.ResponseWriter, parts [][]byte, window time.Duration) {
	rc := http.NewResponseController(w)
	for _, p := range parts {
		for len(p) > 0 {
			n := min(len(p), snapshotChunk)
			if err := rc.SetWriteDeadline(time.Now().Add(window)); err != nil && !errors.Is(err, http.ErrNotSupported) {
				return
			}
			if _, err := w.Write(p[:n]); err != nil {
				return // the client is gone, or read nothing for window
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

// exposureBatchRequest is the body of POST /api/exposures: counts of
// evaluations an app made in its own process, under a batch ID that a
// retry repeats.
type exposureBatchRequest struct {
	Batch     string          `json:"batch"`
	Exposures []exposureCount `json:"exposures"`
	// Users are users the app served features that experiments run on
	// (see experiment.ExposedUser): their first exposures count.
	Users []experiment.ExposedUser `json:"users,omitempty"`
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
	// UsersSketch is the distinct users of these evaluations, a
	// HyperLogLog sketch in package hll's binary form (base64 in JSON,
	// at most hll.MaxEncodedSize bytes); clients from before distinct
	// users leave it out.
	UsersSketch []byte `json:"users_sketch,omitempty"`
}

// exposureBatchAnswer is the answer to POST /api/exposures.
type exposureBatchAnswer struct {
	Batch string `json:"batch"`
	// Added is false for a batch the server had counted already, or
	// whose every count was skipped.
	Added   bool               `json:"added"`
	Counted int                `json:"counted"`
	Skipped []exposure.Skipped `json:"skipped"`
	// Users is how many of the batch's users experiments recorded;
	// Experiments the IDs of the features whose users the app should
	// name in its next batches (none when no experiment runs).
	Users       int      `json:"users,omitempty"`
	Experiments []string `json:"experiments,omitempty"`
}

// AddExposures is POST /api/exposures. A batch with a count the server
// cannot take (see rollout.Service.AddExposureBatch) is refused whole,
// 422 naming the count's index; counts of deleted features are skipped and
// listed in the answer. The route's rate limit (exposureLimit) answers 429
// with Retry-After.
func (s *Server) AddExposures(c echo.Context) error {
	var req exposureBatchRequest
	if err := s.decode(c, &req); err != nil {
		return err
	}
	if len(req.Exposures) > feature.MaxExposureBatch { // before copying them
		return feature.Errorf(feature.EInvalid, "a batch holds at most %d counts, got %d: split it", feature.MaxExposureBatch, len(req.Exposures))
	}
	if len(req.Users) > experiment.MaxExposedUsers {
		return feature.Errorf(feature.EInvalid, "a batch names at most %d users, got %d: split it", experiment.MaxExposedUsers, len(req.Users))
	}
	counts := make([]feature.Exposure, len(req.Exposures))
	for i, e := range req.Exposures {
		counts[i] = feature.Exposure{Feature: e.Feature, FeatureID: e.FeatureID, Version: e.Version, Bucket: e.Bucket, Count: e.Count, Rule: e.Rule, Users: e.UsersSketch}
	}
	// The users first: a batch refused for one of them adds no counts.
	var (
		users   int
		running []string
	)
	if s.experiments != nil {
		if len(req.Users) > 0 {
			if err := feature.ValidateExposureBatch(req.Batch, counts); err != nil {
				return err
			}
		}
		var err error
		if users, running, err = s.experiments.ExposedUsers(c.Request().Context(), req.Users); err != nil {
			return err
		}
	}
	res, err := s.svc.AddExposureBatch(c.Request().Context(), req.Batch, counts)
	if err != nil {
		return err
	}
	ans := exposureBatchAnswer{Batch: req.Batch, Added: res.Added, Counted: res.Counted, Skipped: res.Skipped}
	if ans.Skipped == nil {
		ans.Skipped = []exposure.Skipped{}
	}
	if s.experiments != nil {
		ans.Users, ans.Experiments = users, running
	}
	return c.JSON(http.StatusOK, ans)
}
