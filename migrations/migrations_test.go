package migrations_test

import (
	"context"
	"database/sql"
	"io/fs"
	"path/filepath"
	"slices"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/mattn/go-sqlite3"
	"github.com/pressly/goose/v3"

	"github.com/rollout/rollout/migrations"
	"github.com/rollout/rollout/store/storetest"
)

// tables are the tables the migrations make, goose's own excepted.
var tables = []string{"churn_reports", "commits", "ended_sessions", "exposure_batches", "exposures", "features", "idempotency_keys", "override_spans", "ramps", "revision", "settings", "tokens", "versions", "write_probe"}

func TestSQLite(t *testing.T) {
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(t.TempDir(), "m.db")+"?_foreign_keys=on")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	upDownUp(t, goose.DialectSQLite3, db, migrations.SQLite,
		`SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'goose%' AND name NOT LIKE 'sqlite%' ORDER BY name`)
}

func TestPostgres(t *testing.T) {
	db, err := sql.Open("pgx", storetest.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	upDownUp(t, goose.DialectPostgres, db, migrations.Postgres,
		`SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename NOT LIKE 'goose%' ORDER BY tablename`)
}

// TestSameMigrations: both dialects have the same migration files, so a
// database of either goes through the same versions.
func TestSameMigrations(t *testing.T) {
	lite, err := fs.Glob(migrations.SQLite, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	pg, err := fs.Glob(migrations.Postgres, "*.sql")
	if err != nil {
		t.Fatal(err)
	}
	if len(lite) == 0 || !slices.Equal(lite, pg) {
		t.Errorf("SQLite migrations %v, PostgreSQL migrations %v: want the same, not empty", lite, pg)
	}
	// Existing SQLite databases know the first three under these names.
	for _, name := range []string{"00001_init.sql", "00002_exposures.sql", "00003_tokens.sql"} {
		if !slices.Contains(lite, name) {
			t.Errorf("SQLite migrations %v lack %s", lite, name)
		}
	}
}

// upDownUp checks that every migration of fsys applies, reverts and
// applies again on the empty database db; listTables lists its tables.
func upDownUp(t *testing.T, dialect goose.Dialect, db *sql.DB, fsys fs.FS, listTables string) {
	t.Helper()
	ctx := context.Background()
	p, err := goose.NewProvider(dialect, db, fsys)
	if err != nil {
		t.Fatalf("NewProvider() = %v", err)
	}
	if len(p.ListSources()) == 0 {
		t.Fatal("ListSources() is empty: no migrations embedded")
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("Up() = %v", err)
	}
	if got := list(t, db, listTables); !slices.Equal(got, tables) {
		t.Errorf("tables after Up() = %v, want %v", got, tables)
	}
	if _, err := p.DownTo(ctx, 0); err != nil {
		t.Fatalf("DownTo(0) = %v", err)
	}
	if got := list(t, db, listTables); len(got) != 0 {
		t.Errorf("tables left after DownTo(0) = %v, want none", got)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("Up() after DownTo(0) = %v", err)
	}
	if got := list(t, db, listTables); !slices.Equal(got, tables) {
		t.Errorf("tables after Up() again = %v, want %v", got, tables)
	}
	var rev int64
	if err := db.QueryRowContext(ctx, `SELECT revision FROM revision WHERE id = 1`).Scan(&rev); err != nil || rev != 0 {
		t.Errorf("revision after Up() = %d, %v; want 0", rev, err)
	}
}

func list(t *testing.T, db *sql.DB, query string) []string {
	t.Helper()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
