package sqlite_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/pressly/goose/v3"

	"github.com/rollout/rollout/migrations"
	"github.com/rollout/rollout/store/sqlite"
	"github.com/rollout/rollout/store/storetest"
)

// TestMigrationKeepsHistory: a database at migration 00008, whose versions
// hold whole configurations, reads the same once Open has migrated it, and
// takes new versions on top.
func TestMigrationKeepsHistory(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "rollout.db")
	raw, err := sql.Open("sqlite3", "file:"+path+"?_foreign_keys=on")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, raw, migrations.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 8); err != nil {
		t.Fatalf("UpTo(8) = %v", err)
	}
	const layout = "2006-01-02T15:04:05.000000000Z07:00" // as the store writes times
	h := storetest.NewLegacyHistory()
	for _, f := range h.Features {
		if _, err := raw.Exec(`INSERT INTO features (id, key, version, config, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)`,
			f.ID, f.Key, f.Version, storetest.LegacyJSON(f), f.CreatedAt.UTC().Format(layout), f.UpdatedAt.UTC().Format(layout)); err != nil {
			t.Fatal(err)
		}
		for _, v := range h.Versions[f.Key] {
			if _, err := raw.Exec(`INSERT INTO versions (feature_id, version, actor, created_at, summary, comment, config) VALUES (?, ?, ?, ?, ?, ?, ?)`,
				f.ID, v.Version, v.Actor, v.Time.UTC().Format(layout), v.Summary, v.Comment, storetest.LegacyJSON(v.Config)); err != nil {
				t.Fatal(err)
			}
			if _, err := raw.Exec(`INSERT INTO churn_reports (feature_id, version, churn, modulo_churn, report) VALUES (?, ?, ?, ?, ?)`,
				f.ID, v.Version, v.Report.Churn, v.Report.ModuloChurn, storetest.LegacyJSON(v.Report)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := raw.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		t.Fatalf("Open(database at 00008) = %v", err)
	}
	defer db.Close()
	storetest.WantLegacyHistory(t, db, h)
}
