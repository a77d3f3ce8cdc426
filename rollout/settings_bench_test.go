package rollout_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store/sqlite"
)

// BenchmarkChangeByRole: one bucket change on SQLite by an admin (not
// bound by the settings: the baseline) and by an editor (the settings read
// from the store and the change checked against them).
func BenchmarkChangeByRole(b *testing.B) {
	for _, role := range []auth.Role{auth.RoleAdmin, auth.RoleEditor} {
		b.Run(string(role), func(b *testing.B) {
			ctx := context.Background()
			db, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "rollout.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			svc, err := rollout.NewService(ctx, db, nil)
			if err != nil {
				b.Fatal(err)
			}
			f := feature.Feature{Key: "writes", Enabled: true, Salt: "writes", Buckets: []feature.Bucket{{Name: "a", Replicas: 100}, {Name: "b", Replicas: 100}}}
			if _, err := svc.Create(ctx, f, rollout.ChangeOptions{}); err != nil {
				b.Fatal(err)
			}
			opts := rollout.ChangeOptions{Actor: "bench", Role: role}
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				replicas := 100 + i%2
				if _, err := svc.Change(ctx, "writes", change.UpdateBucket("b", &replicas, nil), opts); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
