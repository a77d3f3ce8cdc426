package rollout

import (
	"context"
	"sync"
	"time"

	"github.com/rollout/rollout/rollout/feature"
)

// MaxWriteWait bounds how long a change waits for the changes before it on
// the same instance: when the database hangs, each of those gives up after
// the store's own timeout, and a change queued behind many of them answers
// EUnavailable rather than waiting for all of them.
const MaxWriteWait = 10 * time.Second

// writeLock serializes a service's writes, as a sync.Mutex would, but a
// change can stop waiting for it (lock). The zero value is unlocked.
type writeLock struct {
	once sync.Once
	ch   chan struct{}
}

func (l *writeLock) c() chan struct{} {
	l.once.Do(func() { l.ch = make(chan struct{}, 1) })
	return l.ch
}

// Lock waits for the lock however long it takes.
func (l *writeLock) Lock() { l.c() <- struct{}{} }

// Unlock releases the lock.
func (l *writeLock) Unlock() { <-l.c() }

// lock waits for the lock until ctx ends or MaxWriteWait has passed, and
// then returns EUnavailable.
func (l *writeLock) lock(ctx context.Context) error {
	select {
	case l.c() <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(MaxWriteWait)
	defer t.Stop()
	select {
	case l.c() <- struct{}{}:
		return nil
	case <-ctx.Done():
		return feature.Errorf(feature.EUnavailable, "the change waited for earlier changes until the request ended: the database may be slow or unreachable; try again shortly")
	case <-t.C:
		return feature.Errorf(feature.EUnavailable, "the change waited %s for earlier changes: the database may be slow or unreachable; try again shortly", MaxWriteWait)
	}
}
