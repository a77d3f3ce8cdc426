package migrations_test

import (
	"context"
	"database/sql"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pressly/goose/v3"

	"github.com/rollout/rollout/migrations"
	"github.com/rollout/rollout/store/storetest"
)

// beforeHours is the last migration before exposures were kept by hour.
const beforeHours = 10

type exposureRow struct {
	Feature, Bucket string
	Version, Hour   int64
	Count           int64
	Type            string
}

// TestSQLiteExposureHours: migration 00011 keeps the totals stored before
// it at hour 0, and turns a total that an overflowing sum left as a float
// into the largest integer, so that reading it no longer fails; after it,
// the table refuses a float.
func TestSQLiteExposureHours(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(t.TempDir(), "m.db")+"?_foreign_keys=on")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectSQLite3, db, migrations.SQLite)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, beforeHours); err != nil {
		t.Fatalf("UpTo(%d) = %v", beforeHours, err)
	}
	exec(t, db, `INSERT INTO features (id, key, version, config, created_at, updated_at) VALUES ('id-f', 'f', 3, '{}', '', '')`)
	exec(t, db, `INSERT INTO exposures (feature_id, version, bucket, count) VALUES
		('id-f', 1, 'A', 5), ('id-f', 2, '', 7), ('id-f', 3, 'A', 9223372036854775807)`)
	// What 2^63-1 + 1 left before totals saturated: a float.
	exec(t, db, `UPDATE exposures SET count = count + 1 WHERE version = 3`)
	if got := exposureRows(t, db, `SELECT f.key, e.bucket, e.version, 0, 0, typeof(e.count) FROM exposures e JOIN features f ON f.id = e.feature_id WHERE e.version = 3`); len(got) != 1 || got[0].Type != "real" {
		t.Fatalf("test setup: the overflowed total is %+v, want a real", got)
	}
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("Up() = %v", err)
	}
	got := exposureRows(t, db, `SELECT f.key, e.bucket, e.version, e.hour, e.count, typeof(e.count) FROM exposures e JOIN features f ON f.id = e.feature_id ORDER BY e.version`)
	want := []exposureRow{
		{Feature: "f", Bucket: "A", Version: 1, Count: 5, Type: "integer"},
		{Feature: "f", Bucket: "", Version: 2, Count: 7, Type: "integer"},
		{Feature: "f", Bucket: "A", Version: 3, Count: 9223372036854775807, Type: "integer"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("exposures after 00011 mismatch (-want +got):\n%s", diff)
	}
	if _, err := db.Exec(`INSERT INTO exposures (feature_id, version, bucket, hour, count) VALUES ('id-f', 1, 'B', 3600, 1.5e19)`); err == nil {
		t.Error("inserting a float count after 00011 succeeded, want the CHECK to refuse it")
	}
	if _, err := db.Exec(`INSERT INTO exposures (feature_id, version, bucket, hour, count) VALUES ('id-f', 4294967297, 'B', 3600, 1)`); err == nil {
		t.Error("inserting version 2^32+1 after 00011 succeeded, want the CHECK to refuse it")
	}
	if _, err := p.DownTo(ctx, beforeHours); err != nil {
		t.Fatalf("DownTo(%d) = %v", beforeHours, err)
	}
}

// TestPostgresExposureHours: migration 00011 keeps the totals stored before
// it at hour 0.
func TestPostgresExposureHours(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("pgx", storetest.PostgresDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, db, migrations.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, beforeHours); err != nil {
		t.Fatalf("UpTo(%d) = %v", beforeHours, err)
	}
	exec(t, db, `INSERT INTO features (id, key, version, config, created_at, updated_at) VALUES ('id-f', 'f', 3, '{}', now(), now())`)
	exec(t, db, `INSERT INTO exposures (feature_id, version, bucket, count) VALUES
		('id-f', 1, 'A', 5), ('id-f', 2, '', 7), ('id-f', 3, 'A', 9223372036854775807)`)
	if _, err := p.Up(ctx); err != nil {
		t.Fatalf("Up() = %v", err)
	}
	got := exposureRows(t, db, `SELECT f.key, e.bucket, e.version, e.hour, e.count, pg_typeof(e.count)::text FROM exposures e JOIN features f ON f.id = e.feature_id ORDER BY e.version`)
	want := []exposureRow{
		{Feature: "f", Bucket: "A", Version: 1, Count: 5, Type: "bigint"},
		{Feature: "f", Bucket: "", Version: 2, Count: 7, Type: "bigint"},
		{Feature: "f", Bucket: "A", Version: 3, Count: 9223372036854775807, Type: "bigint"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("exposures after 00011 mismatch (-want +got):\n%s", diff)
	}
	exec(t, db, `INSERT INTO exposures (feature_id, version, bucket, hour, count) VALUES ('id-f', 1, 'A', 3600, 1)`)
	if _, err := p.DownTo(ctx, beforeHours); err != nil {
		t.Fatalf("DownTo(%d) = %v", beforeHours, err)
	}
	var n int64
	if err := db.QueryRow(`SELECT count FROM exposures WHERE version = 1`).Scan(&n); err != nil || n != 6 {
		t.Errorf("version 1's total after reverting 00011 = %d, %v; want 5+1", n, err)
	}
}

func exec(t *testing.T, db *sql.DB, query string) {
	t.Helper()
	if _, err := db.Exec(query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func exposureRows(t *testing.T, db *sql.DB, query string) []exposureRow {
	t.Helper()
	rows, err := db.Query(query)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []exposureRow
	for rows.Next() {
		var r exposureRow
		if err := rows.Scan(&r.Feature, &r.Bucket, &r.Version, &r.Hour, &r.Count, &r.Type); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
