package postgres_test

import (
	"context"
	"database/sql"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"

	"github.com/rollout/rollout/migrations"
	"github.com/rollout/rollout/store/storetest"
)

// TestMigrationKeepsHistory: a database at migration 00008, whose versions
// hold whole configurations, reads the same once Open has migrated it, and
// takes new versions on top.
func TestMigrationKeepsHistory(t *testing.T) {
	ctx := context.Background()
	dsn := storetest.PostgresDSN(t)
	raw, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	p, err := goose.NewProvider(goose.DialectPostgres, raw, migrations.Postgres)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 8); err != nil {
		t.Fatalf("UpTo(8) = %v", err)
	}
	h := storetest.NewLegacyHistory()
	for _, f := range h.Features {
		if _, err := raw.Exec(`INSERT INTO features (id, key, version, config, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6)`,
			f.ID, f.Key, f.Version, storetest.LegacyJSON(f), f.CreatedAt.UTC(), f.UpdatedAt.UTC()); err != nil {
			t.Fatal(err)
		}
		for _, v := range h.Versions[f.Key] {
			if _, err := raw.Exec(`INSERT INTO versions (feature_id, version, actor, created_at, summary, comment, config) VALUES ($1, $2, $3, $4, $5, $6, $7)`,
				f.ID, v.Version, v.Actor, v.Time.UTC(), v.Summary, v.Comment, storetest.LegacyJSON(v.Config)); err != nil {
				t.Fatal(err)
			}
			if _, err := raw.Exec(`INSERT INTO churn_reports (feature_id, version, churn, modulo_churn, report) VALUES ($1, $2, $3, $4, $5)`,
				f.ID, v.Version, v.Report.Churn, v.Report.ModuloChurn, storetest.LegacyJSON(v.Report)); err != nil {
				t.Fatal(err)
			}
		}
	}
	storetest.WantLegacyHistory(t, open(t, dsn), h)
}
