package migrations_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	_ "github.com/mattn/go-sqlite3"
	"github.com/pressly/goose/v3"

	"github.com/rollout/rollout/migrations"
)

// TestUpDownUp checks that every migration applies, reverts and applies
// again on an empty SQLite database.
func TestUpDownUp(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(t.TempDir(), "m.db")+"?_foreign_keys=on")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrations.FS)
	if err != nil {
		t.Fatalf("NewProvider() = %v", err)
	}
	if len(p.ListSources()) == 0 {
		t.Fatal("ListSources() is empty: no migrations embedded")
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("Up() = %v", err)
	}
	if _, err := p.DownTo(ctx, 0); err != nil {
		t.Fatalf("DownTo(0) = %v", err)
	}
	var n int
	if err := db.QueryRow(`SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('features', 'versions', 'churn_reports')`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Errorf("tables left after DownTo(0) = %d, want 0", n)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("Up() after DownTo(0) = %v", err)
	}
}
