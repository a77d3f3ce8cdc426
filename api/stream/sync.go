package stream

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
)

// GET /sync/v1/stream is the sync API's stream (package client; the
// snapshot it follows is package evaluation's GET /sync/v1/snapshot): a
// stream of Server-Sent Events, one per batch of commits the service takes
// in, holding the sync forms of the features the batch changed, so that a
// connected client applies them without fetching the snapshot again. It has
// the budget, timing and writer of every stream (budget.go), as the
// dashboard's (events.go).

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

// Sync answers GET /sync/v1/stream, following svc: first a "hello" event with the
// current revision, then a "change" event for each batch of commits that
// changed features, and a comment every heartbeatInterval so that clients
// and proxies see the connection alive. The stream ends when the client
// goes, or when it fell so far behind that the service dropped its
// subscription: the client reconnects and reads the snapshot again.
func (st *Server) Sync(c echo.Context, svc Service) error {
	return st.follow(c, svc, "stream", func(batch []rollout.Commit) []byte {
		return st.events.encode(batch, svc.Snapshot) // nil: tokens only
	})
}

// follow answers a stream of svc's commits: the event-stream headers, a
// "hello" event with the current revision, then eventOf of each batch of
// commits (none when it is nil) and a comment every heartbeatInterval, until
// the client goes, the server shuts down, or the client fell so far behind
// that the service dropped its subscription: the client reconnects then.
// what names the stream in errors.
func (st *Server) follow(c echo.Context, svc Service, what string, eventOf func([]rollout.Commit) []byte) error {
	commits, stop := svc.Subscribe()
	defer stop()

	w := c.Response()
	h := w.Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no") // nginx: do not buffer
	// A stream reads nothing after its request: no read deadline of the
	// server's may end it.
	if err := http.NewResponseController(w).SetReadDeadline(time.Time{}); err != nil {
		return fmt.Errorf("%s: clear the read deadline: %w", what, err)
	}
	w.WriteHeader(http.StatusOK)
	out := st.writer(c) // writes what send queues; drops a client that does not read (budget.go)
	defer out.stop()

	rev := svc.Snapshot().Revision()
	if out.send(fmt.Appendf(nil, "retry: %d\nid: %d\nevent: hello\ndata: {\"revision\":%d}\n\n", streamRetry, rev, rev)) != nil {
		return nil // the client is gone
	}
	heartbeat := time.NewTicker(heartbeatInterval)
	defer heartbeat.Stop()
	ctx := c.Request().Context()
	for {
		var ev []byte
		select {
		case <-ctx.Done():
			return nil
		case <-st.closing:
			return nil // the server shuts down: the client reconnects elsewhere
		case <-out.ended():
			return nil // dropped, or gone: the client reconnects
		case batch, ok := <-commits:
			if !ok {
				return nil // too slow: the client reconnects
			}
			if ev = eventOf(batch); ev == nil {
				continue
			}
		case <-heartbeat.C:
			ev = []byte(": heartbeat\n\n")
		}
		if out.send(ev) != nil {
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
