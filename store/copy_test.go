package store_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, for the test's own queries

	"github.com/rollout/rollout/store"
	"github.com/rollout/rollout/store/postgres"
	"github.com/rollout/rollout/store/sqlite"
	"github.com/rollout/rollout/store/storetest"
)

// schemaTables lists the tables of a database as its own catalog names
// them, with a query of the test's own.
func schemaTables(t *testing.T, db *sql.DB, query string) []string {
	t.Helper()
	rows, err := db.QueryContext(context.Background(), query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		out = append(out, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCopyCoversSchema walks the tables the migrations make, on SQLite
// (sqlite_master) and PostgreSQL (information_schema): each must be copied
// by store.Copy or skipped with a reason, so that a new table cannot be
// forgotten by rollout migrate.
func TestCopyCoversSchema(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "schema.db")
	sq, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer sq.Close()
	raw, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	dbs := map[string]*store.DB{"sqlite": sq}
	tables := map[string][]string{"sqlite": schemaTables(t, raw, `SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)}

	dsn := storetest.PostgresDSN(t)
	pg, err := postgres.Open(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pg.Close()
	dbs["postgres"] = pg
	pgRaw, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pgRaw.Close()
	tables["postgres"] = schemaTables(t, pgRaw, `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name`)

	copied := store.CopiedTables()
	for dialect, names := range tables {
		if len(names) < len(copied) {
			t.Errorf("%s: the schema lists %d tables %q, fewer than the %d copied", dialect, len(names), names, len(copied))
		}
		for _, name := range names {
			reason, skipped := store.SkippedTables[name]
			switch {
			case slices.Contains(copied, name) && skipped:
				t.Errorf("%s: table %s is both copied and skipped", dialect, name)
			case skipped && len(reason) < 20:
				t.Errorf("%s: table %s is skipped with reason %q: say why", dialect, name, reason)
			case !skipped && !slices.Contains(copied, name):
				t.Errorf("%s: table %s is neither copied by rollout migrate nor skipped with a reason (store/copy.go)", dialect, name)
			}
		}
		for _, name := range copied {
			if !slices.Contains(names, name) {
				t.Errorf("%s: table %s is copied but the schema has none", dialect, name)
			}
		}
		if err := store.CheckSchema(ctx, dbs[dialect]); err != nil {
			t.Errorf("%s: CheckSchema = %v", dialect, err)
		}
	}
}

// TestCopyRefusesUnknownTable: a table a migration adds without saying
// whether Copy copies it fails CheckSchema and Copy, which writes nothing.
func TestCopyRefusesUnknownTable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	src, err := sqlite.Open(ctx, filepath.Join(dir, "src.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	raw, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, "src.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(`CREATE TABLE flags_new (id TEXT PRIMARY KEY)`); err != nil {
		t.Fatal(err)
	}
	if err := store.CheckSchema(ctx, src); err == nil || !strings.Contains(err.Error(), "table flags_new is neither copied nor skipped") {
		t.Errorf("CheckSchema = %v, want it to name flags_new", err)
	}
	dst, err := sqlite.Open(ctx, filepath.Join(dir, "dst.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer dst.Close()
	if _, err := store.Copy(ctx, src, dst); err == nil || !strings.Contains(err.Error(), "flags_new") {
		t.Errorf("Copy = %v, want it to refuse flags_new", err)
	}
}
