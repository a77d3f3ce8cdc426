package logwriter_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/rollout/rollout/internal/logwriter"
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

// TestWriterKeepsLines: lines reach the destination whole and in order
// once the writer is closed; a line written after Close is dropped and
// counted.
func TestWriterKeepsLines(t *testing.T) {
	dst := &blockingWriter{release: make(chan struct{})}
	close(dst.release)
	w := logwriter.New(dst, 1000)
	var want strings.Builder
	for i := range 1000 {
		line := fmt.Sprintf("line %d %s\n", i, strings.Repeat("x", i%100))
		want.WriteString(line)
		if n, err := w.Write([]byte(line)); n != len(line) || err != nil {
			t.Fatalf("Write = %d, %v, want %d, nil", n, err, len(line))
		}
	}
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := dst.String(); got != want.String() {
		t.Errorf("destination holds %d bytes, want the %d bytes written, in order", len(got), want.Len())
	}
	if got := w.Dropped(); got != 0 {
		t.Errorf("Dropped() = %d, want 0", got)
	}
	w.Write([]byte("late\n"))
	if got := w.Dropped(); got != 1 {
		t.Errorf("Dropped() after a write past Close = %d, want 1", got)
	}
}

// TestWriterDropsWhenBlocked: with the destination blocked, every Write
// returns (a blocking one would hang the test), the lines beyond the queue
// and the batch being written are dropped and counted, and once the
// destination unblocks every line is either written whole or counted.
func TestWriterDropsWhenBlocked(t *testing.T) {
	dst := &blockingWriter{release: make(chan struct{})}
	const queue, lines = 4, 100
	w := logwriter.New(dst, queue)
	for i := range lines {
		w.Write(fmt.Appendf(nil, "line %d\n", i))
	}
	if least := uint64(lines - 2*queue - 1); w.Dropped() < least {
		t.Errorf("Dropped() = %d with the destination blocked, want at least %d", w.Dropped(), least)
	}
	close(dst.release)
	if err := w.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	written := 0
	for line := range strings.Lines(dst.String()) {
		if !strings.HasPrefix(line, "line ") || !strings.HasSuffix(line, "\n") {
			t.Errorf("line not whole: %q", line)
		}
		written++
	}
	if total := uint64(written) + w.Dropped(); total != lines {
		t.Errorf("%d lines written + %d dropped = %d, want the %d written", written, w.Dropped(), total, lines)
	}
}

// TestWriterCloseWaitsForCtx: Close of a writer whose destination never
// returns gives up when its context is done.
func TestWriterCloseWaitsForCtx(t *testing.T) {
	dst := &blockingWriter{release: make(chan struct{})}
	defer close(dst.release)
	w := logwriter.New(dst, 0)
	w.Write([]byte("stuck\n"))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := w.Close(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Close with a blocked destination and a done context = %v, want %v", err, context.Canceled)
	}
}
