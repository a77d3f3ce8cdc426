package auth_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/store/sqlite"
)

// sweepCounter is a token store that records its sweeps instead of
// running them.
type sweepCounter struct {
	auth.Store
	mu     sync.Mutex
	sweeps []time.Time
}

func (s *sweepCounter) SweepEndedSessions(_ context.Context, now time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sweeps = append(s.sweeps, now)
	return 0, nil
}

// TestSweepSessionsEvery: the ended sessions are swept once per interval,
// without a sign-out to trigger it, until the context ends.
func TestSweepSessionsEvery(t *testing.T) {
	db, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "rollout.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	synctest.Test(t, func(t *testing.T) {
		st := &sweepCounter{Store: db}
		tokens, err := auth.NewTokens(context.Background(), st, nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			tokens.SweepSessionsEvery(ctx, 0, func(err error) { t.Errorf("sweep: %v", err) })
		}()
		time.Sleep(3*auth.DefaultSessionSweep + time.Minute)
		synctest.Wait()
		cancel()
		<-done
		st.mu.Lock()
		defer st.mu.Unlock()
		if len(st.sweeps) != 3 {
			t.Errorf("%d sweeps in 3 intervals, want 3", len(st.sweeps))
		}
	})
}
