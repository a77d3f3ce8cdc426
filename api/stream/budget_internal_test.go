package stream

import (
	"net/http"
	"os"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// stuckWriter is a stream's connection whose client stopped reading with
// every buffer full: a write blocks until its write deadline passes.
type stuckWriter struct {
	mu       sync.Mutex
	deadline time.Time
	wrote    int // writes begun
}

func (w *stuckWriter) Header() http.Header { return http.Header{} }
func (w *stuckWriter) WriteHeader(int)     {}
func (w *stuckWriter) FlushError() error   { return nil }

func (w *stuckWriter) SetWriteDeadline(t time.Time) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.deadline = t
	return nil
}

func (w *stuckWriter) Write([]byte) (int, error) {
	w.mu.Lock()
	w.wrote++
	w.mu.Unlock()
	for {
		w.mu.Lock()
		d := w.deadline
		w.mu.Unlock()
		if !d.IsZero() && !time.Now().Before(d) {
			return 0, os.ErrDeadlineExceeded
		}
		time.Sleep(time.Millisecond)
	}
}

func slowDrops(st *Server) float64 {
	var m dto.Metric
	st.ended.WithLabelValues("slow").Write(&m)
	return m.GetCounter().GetValue()
}

// TestStreamWriterWindow: a write the client does not take ends the stream
// when its window passes: streamWriteWindow, plus its size at
// streamMinRate.
func TestStreamWriterWindow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := New(Options{Registerer: prometheus.NewRegistry()})
		w := &stuckWriter{}
		sw := st.newWriter(w)
		defer sw.stop()
		event := make([]byte, streamMinRate) // a second at the slowest rate
		start := time.Now()
		if err := sw.send(event); err != nil {
			t.Fatalf("send: %v", err)
		}
		<-sw.ended()
		if took, want := time.Since(start), streamWriteWindow+time.Second; took != want {
			t.Errorf("the stuck write ended the stream after %v, want %v", took, want)
		}
		if got := slowDrops(st); got != 1 {
			t.Errorf("streams ended as slow: %v, want 1", got)
		}
		if err := sw.send([]byte("more")); err != errStreamEnded {
			t.Errorf("send after the end = %v, want errStreamEnded", err)
		}
	})
}

// TestStreamWriterQueue: behind a write the client does not take,
// streamQueue events wait, and one more drops the client at once, however
// long the write's window; so does one that would take the queue past
// streamQueueBytes.
func TestStreamWriterQueue(t *testing.T) {
	SetStreamWriteWindow(t, time.Hour)
	for _, tt := range []struct {
		name  string
		sizes []int // the event written, then those queued; the last one drops
	}{
		{"events", append([]int{10}, repeat(11, streamQueue+1)...)},
		{"bytes", []int{10, streamQueueBytes / 2, streamQueueBytes / 2, 1}},
		{"a large event alone", []int{10, 4 * streamQueueBytes, 1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				st := New(Options{Registerer: prometheus.NewRegistry()})
				w := &stuckWriter{}
				sw := st.newWriter(w)
				defer sw.stop()
				start := time.Now()
				for i, size := range tt.sizes {
					err := sw.send(make([]byte, size))
					synctest.Wait() // the writer takes what it can
					if last := i == len(tt.sizes)-1; (err != nil) != last {
						t.Fatalf("send %d of %d (%d bytes) = %v", i+1, len(tt.sizes), size, err)
					}
				}
				<-sw.ended()
				// At once, but for the stuck write's polling of its
				// deadline (a millisecond), and not after the hour.
				if took := time.Since(start); took > time.Millisecond {
					t.Errorf("the full queue ended the stream after %v, want at once", took)
				}
				if got := slowDrops(st); got != 1 {
					t.Errorf("streams ended as slow: %v, want 1", got)
				}
				if w.wrote != 1 {
					t.Errorf("%d writes begun, want 1", w.wrote)
				}
			})
		})
	}
}

func repeat(v, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = v
	}
	return out
}
