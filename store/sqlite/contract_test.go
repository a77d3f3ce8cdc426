package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/rollout/rollout/store"
	"github.com/rollout/rollout/store/sqlite"
	"github.com/rollout/rollout/store/storetest"
)

func TestContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) storetest.Opened {
		path := filepath.Join(t.TempDir(), "rollout.db")
		open := func(t *testing.T) storetest.Store {
			t.Helper()
			db, err := sqlite.Open(context.Background(), path)
			if err != nil {
				t.Fatalf("Open(%q) = %v", path, err)
			}
			t.Cleanup(func() { db.Close() })
			return db
		}
		exec := func(t *testing.T, stmt string) error {
			db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=5000")
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			_, err = db.Exec(stmt)
			return err
		}
		db := open(t)
		return storetest.Opened{Store: db, Open: open, In: func(env string) storetest.Store { return db.(*store.DB).In(env) }, HistoryBytes: func(t *testing.T) int64 { return pagesInUse(t, path) }, Exec: exec,
			// The whole database's pages: it grows only with the table
			// measured.
			TableBytes: func(t *testing.T, _ string) int64 { return pagesInUse(t, path) }}
	})
}

// pagesInUse returns the bytes of the pages the SQLite database at path
// uses (its free pages left out), as of its last commit, WAL included.
func pagesInUse(t *testing.T, path string) int64 {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var pages, free, size int64
	for pragma, n := range map[string]*int64{"page_count": &pages, "freelist_count": &free, "page_size": &size} {
		if err := db.QueryRow("PRAGMA " + pragma).Scan(n); err != nil {
			t.Fatalf("PRAGMA %s: %v", pragma, err)
		}
	}
	return (pages - free) * size
}
