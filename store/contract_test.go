package store_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rollout/rollout/store"
	"github.com/rollout/rollout/store/storetest"
)

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Opened {
		path := filepath.Join(t.TempDir(), "rollout.db")
		open := func(t *testing.T) storetest.Store {
			t.Helper()
			db, err := store.Open(context.Background(), path)
			if err != nil {
				t.Fatalf("Open(%q) = %v", path, err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		}
		return storetest.Opened{Store: open(t), Open: open}
	})
}
