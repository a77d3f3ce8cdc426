package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/rollout/rollout/internal/leaktest"
	"github.com/rollout/rollout/store/postgres"
	"github.com/rollout/rollout/store/storetest"
)

// TestCloseEndsNotifications: Close ends a listener whose context is never
// done, closing its channel, and waits for it: no goroutine is left.
func TestCloseEndsNotifications(t *testing.T) {
	dsn := storetest.PostgresDSN(t)
	defer leaktest.Check(t)()
	db, err := postgres.Open(context.Background(), dsn)
	if err != nil {
		t.Fatalf("Open() = %v", err)
	}
	ch := db.Notifications(context.Background())
	receive(t, ch, "first value")
	db.Close()
	select {
	case rev, ok := <-ch:
		if ok {
			t.Fatalf("after Close: received %d, want the channel closed", rev)
		}
	case <-time.After(10 * time.Second): // a hang guard
		t.Fatal("the channel is still open 10s after Close")
	}
}
