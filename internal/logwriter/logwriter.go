// Package logwriter is an io.Writer for logs that never blocks its caller:
// lines go into a bounded queue that one goroutine writes out, and lines
// that do not fit are dropped and counted.
package logwriter

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
)

// DefaultQueue is how many log lines a Writer holds before it drops.
const DefaultQueue = 4096

// maxBatch bounds the bytes a Writer gives its destination in one Write.
const maxBatch = 64 << 10

// Writer is an io.Writer for logs written on a request's path: Write
// copies the line into a bounded queue and returns at once, and one
// goroutine writes the queue to the destination, several lines per write.
// When the queue is full, because the destination is slow or blocked, the
// line is dropped and counted (see Dropped, which api.Metrics.CountLogDrops
// exports): logging never stalls a request. slog's handlers write each record with
// one Write, so lines are never split. Safe for concurrent use.
type Writer struct {
	dst     io.Writer
	lines   chan []byte
	stop    chan struct{}
	done    chan struct{}
	stopped atomic.Bool
	dropped atomic.Uint64
	once    sync.Once
}

// New returns a Writer to dst holding at most queue lines (0: DefaultQueue)
// and starts its goroutine; Close stops it.
func New(dst io.Writer, queue int) *Writer {
	if queue <= 0 {
		queue = DefaultQueue
	}
	w := &Writer{dst: dst, lines: make(chan []byte, queue), stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

// Write queues a copy of p, or drops it if the queue is full or the writer
// is closed. It never blocks, and always reports p written.
func (w *Writer) Write(p []byte) (int, error) {
	if w.stopped.Load() {
		w.dropped.Add(1)
		return len(p), nil
	}
	select {
	case w.lines <- append([]byte(nil), p...):
	default:
		w.dropped.Add(1)
	}
	return len(p), nil
}

// Dropped returns how many lines were dropped: the queue was full, the
// writer closed, or the destination failed.
func (w *Writer) Dropped() uint64 { return w.dropped.Load() }

func (w *Writer) run() {
	defer close(w.done)
	batch := make([]byte, 0, maxBatch)
	for {
		select {
		case line := <-w.lines:
			w.flush(append(batch[:0], line...), 1)
		case <-w.stop:
			for {
				select {
				case line := <-w.lines:
					w.flush(append(batch[:0], line...), 1)
				default:
					return
				}
			}
		}
	}
}

// flush writes batch, holding n lines, with whatever lines are queued
// after it, up to maxBatch bytes.
func (w *Writer) flush(batch []byte, n int) {
	for len(batch) < maxBatch {
		select {
		case line := <-w.lines:
			batch, n = append(batch, line...), n+1
			continue
		default:
		}
		break
	}
	if _, err := w.dst.Write(batch); err != nil {
		w.dropped.Add(uint64(n))
	}
}

// Close stops taking lines and writes those queued, waiting until they are
// written or ctx is done: a blocked destination cannot hold up a shutdown
// longer than ctx allows. Lines written after Close are dropped.
func (w *Writer) Close(ctx context.Context) error {
	w.once.Do(func() {
		w.stopped.Store(true)
		close(w.stop)
	})
	select {
	case <-w.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
