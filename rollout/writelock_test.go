package rollout

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rollout/rollout/rollout/feature"
)

// TestWriteLockWait: a change waiting for the write lock held by another
// (one stuck on a hung database) gives up with EUnavailable after
// MaxWriteWait, or when its request ends, and gets the lock once free.
func TestWriteLockWait(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var l writeLock
		l.Lock()
		start := time.Now()
		if err := l.lock(context.Background()); feature.ErrorCode(err) != feature.EUnavailable {
			t.Errorf("lock(held) = %v, want %s", err, feature.EUnavailable)
		}
		if waited := time.Since(start); waited != MaxWriteWait {
			t.Errorf("lock(held) gave up after %v (fake clock), want %v", waited, MaxWriteWait)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if err := l.lock(ctx); feature.ErrorCode(err) != feature.EUnavailable {
			t.Errorf("lock(held, request ends) = %v, want %s", err, feature.EUnavailable)
		}
		go func() {
			time.Sleep(time.Second)
			l.Unlock()
		}()
		if err := l.lock(context.Background()); err != nil {
			t.Errorf("lock() once freed = %v, want nil", err)
		}
		l.Unlock()
	})
}
