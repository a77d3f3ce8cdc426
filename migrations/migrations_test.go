package migrations_test

import (
	"context"
	"database/sql"
	"io/fs"
	"maps"
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
var tables = []string{"audit_events", "change_requests", "churn_reports", "commits", "ended_sessions", "environments", "experiment_snapshots", "experiment_users", "experiments", "exposure_batches", "exposure_users", "exposures", "features", "idempotency_keys", "metrics", "override_spans", "people_sessions", "ramps", "revision", "rule_exposures", "schedules", "segment_users", "segment_versions", "segments", "settings", "tokens", "track_batches", "tracked_events", "versions", "webhook_deliveries", "webhooks", "write_probe"}

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

// TestTokenRoles: migration 12 keeps the tokens it finds and lets the
// client and sdk roles in; going back, sdk tokens become evaluate tokens
// and client tokens, which no older role fits, are revoked.
func TestTokenRoles(t *testing.T) {
	for _, tt := range []struct {
		name    string
		dialect goose.Dialect
		open    func(t *testing.T) (driver, dsn string)
		fsys    fs.FS
		insert  string
	}{
		{"sqlite", goose.DialectSQLite3, func(t *testing.T) (string, string) {
			return "sqlite3", "file:" + filepath.Join(t.TempDir(), "m.db") + "?_foreign_keys=on"
		}, migrations.SQLite,
			`INSERT INTO tokens (id, name, role, hash, created_at) VALUES ($1, $2, $3, $4, '2026-01-01T00:00:00Z')`},
		{"postgres", goose.DialectPostgres, func(t *testing.T) (string, string) { return "pgx", storetest.PostgresDSN(t) },
			migrations.Postgres,
			`INSERT INTO tokens (id, name, role, hash, created_at) VALUES ($1, $2, $3, $4, now())`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			db, err := sql.Open(tt.open(t))
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			ctx := context.Background()
			p, err := goose.NewProvider(tt.dialect, db, tt.fsys)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := p.UpTo(ctx, 11); err != nil {
				t.Fatal(err)
			}
			insert := func(id, role string) error {
				_, err := db.ExecContext(ctx, tt.insert, id, "tok-"+id, role, "hash-"+id)
				return err
			}
			if err := insert("1", "evaluate"); err != nil {
				t.Fatal(err)
			}
			if err := insert("2", "client"); err == nil {
				t.Fatal("a client token went in before migration 12")
			}
			if _, err := p.Up(ctx); err != nil {
				t.Fatal(err)
			}
			for id, role := range map[string]string{"3": "client", "4": "sdk"} {
				if err := insert(id, role); err != nil {
					t.Fatalf("insert a %s token: %v", role, err)
				}
			}
			if err := insert("5", "root"); err == nil {
				t.Error("a root token went in")
			}
			roles := func() map[string]string {
				rows, err := db.QueryContext(ctx, `SELECT id, role, revoked_at IS NOT NULL FROM tokens ORDER BY id`)
				if err != nil {
					t.Fatal(err)
				}
				defer rows.Close()
				out := map[string]string{}
				for rows.Next() {
					var id, role string
					var revoked bool
					if err := rows.Scan(&id, &role, &revoked); err != nil {
						t.Fatal(err)
					}
					if revoked {
						role += " revoked"
					}
					out[id] = role
				}
				return out
			}
			if got, want := roles(), map[string]string{"1": "evaluate", "3": "client", "4": "sdk"}; !maps.Equal(got, want) {
				t.Errorf("tokens after migration 12 = %v, want %v", got, want)
			}
			if _, err := p.DownTo(ctx, 11); err != nil {
				t.Fatal(err)
			}
			if got, want := roles(), map[string]string{"1": "evaluate", "3": "evaluate revoked", "4": "evaluate"}; !maps.Equal(got, want) {
				t.Errorf("tokens after reverting migration 12 = %v, want %v", got, want)
			}
		})
	}
}
