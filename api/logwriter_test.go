package api_test

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rollout/rollout/api"
	"github.com/rollout/rollout/internal/logwriter"
	"github.com/rollout/rollout/internal/storemetrics"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store/sqlite"
)

// blockingWriter blocks every Write until release is closed, then keeps
// what it is given.
type blockingWriter struct {
	release chan struct{}
	mu      sync.Mutex
	buf     bytes.Buffer
}

func (w *blockingWriter) Write(p []byte) (int, error) {
	<-w.release
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *blockingWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// TestBlockedLogNeverStallsRequests: with every request logged to a
// destination that blocks, requests are all answered (a blocking log
// would hang the first one past the queue), the lines that do not fit are
// dropped and counted in the metrics, and once the destination unblocks
// every line is either written whole or counted as dropped.
func TestBlockedLogNeverStallsRequests(t *testing.T) {
	dst := &blockingWriter{release: make(chan struct{})}
	const queue, requests = 8, 200
	w := logwriter.New(dst, queue)
	h, _ := newHandler(t, api.Options{Logger: slog.New(slog.NewTextHandler(w, nil)), RequestLog: api.LogAll}, w)
	for i := range requests {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", "/evaluate?feature=f&user=u"+strconv.Itoa(i), nil))
		if rec.Code != http.StatusOK {
			t.Fatalf("GET /evaluate = %d %s, want 200", rec.Code, rec.Body)
		}
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	var counted float64
	for line := range strings.Lines(rec.Body.String()) {
		if v, ok := strings.CutPrefix(line, "rollout_log_lines_dropped_total "); ok {
			counted, _ = strconv.ParseFloat(strings.TrimSpace(v), 64)
		}
	}
	// At most the queue and the batch the writer holds were kept.
	if least := float64(requests - 2*queue - 1); counted < least {
		t.Errorf("rollout_log_lines_dropped_total = %v with the destination blocked, want at least %v", counted, least)
	}
	close(dst.release)
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	lines := 0
	for line := range strings.Lines(dst.String()) {
		if !strings.HasPrefix(line, "time=") || !strings.HasSuffix(line, "\n") || !strings.Contains(line, "msg=request") {
			t.Errorf("log line not whole: %q", line)
		}
		lines++
	}
	if total := uint64(lines) + w.Dropped(); total != requests+1 {
		t.Errorf("%d lines written + %d dropped = %d, want the %d requests logged", lines, w.Dropped(), total, requests+1)
	}
}

// newHandler returns the API's router over a new database holding feature
// f (3 buckets), with opts; its metrics count w's drops when w is not nil.
func newHandler(t *testing.T, opts api.Options, w *logwriter.Writer) (http.Handler, *rollout.Service) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if opts.Metrics == nil {
		opts.Metrics = api.NewMetrics()
	}
	if w != nil {
		opts.Metrics.CountLogDrops(w)
	}
	svc, err := rollout.NewService(ctx, storemetrics.New(opts.Metrics.Registry(), db), nil)
	if err != nil {
		t.Fatal(err)
	}
	f := feature.Feature{Key: "f", Enabled: true, Salt: "f",
		Buckets: []feature.Bucket{{Name: "A", Replicas: 100}, {Name: "B", Replicas: 100}, {Name: "C", Replicas: 100}}}
	if _, err := svc.Create(ctx, f, rollout.ChangeOptions{}); err != nil {
		t.Fatal(err)
	}
	return api.New(svc, opts), svc
}
