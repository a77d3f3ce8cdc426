package serve

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/store/storetest"
)

// BenchmarkChange measures one change of a feature's bucket through the
// service — the feature row, its version, churn report and change-feed
// entry in one transaction — on each store, and evaluation beside it,
// which never touches the store. Run with ROLLOUT_TEST_POSTGRES set:
//
//	go test -run '^$' -bench Change -benchmem ./cmd/internal/serve
func BenchmarkChange(b *testing.B) {
	for _, dialect := range []string{"sqlite", "postgres"} {
		b.Run(dialect, func(b *testing.B) {
			where := filepath.Join(b.TempDir(), "bench.db")
			if dialect == "postgres" {
				where = storetest.PostgresDSN(b)
			}
			ctx := context.Background()
			db, closeDB, err := OpenStore(ctx, where)
			if err != nil {
				b.Fatal(err)
			}
			defer closeDB()
			svc, err := rollout.NewService(ctx, db, nil)
			if err != nil {
				b.Fatal(err)
			}
			f := feature.Feature{Key: "f", Enabled: true, Salt: "f", Buckets: []feature.Bucket{
				{Name: "A", Replicas: 100}, {Name: "B", Replicas: 100}, {Name: "C", Replicas: 100}, {Name: "D", Replicas: 100}}}
			if _, err := svc.Create(ctx, f, rollout.ChangeOptions{}); err != nil {
				b.Fatal(err)
			}
			b.Run("change", func(b *testing.B) {
				b.ReportAllocs()
				took := make([]time.Duration, 0, b.N)
				for i := 0; b.Loop(); i++ {
					start := time.Now()
					replicas := 100 + i%2
					if _, err := svc.Change(ctx, "f", change.UpdateBucket("A", &replicas, nil), rollout.ChangeOptions{}); err != nil {
						b.Fatal(err)
					}
					took = append(took, time.Since(start))
				}
				slices.Sort(took)
				b.ReportMetric(float64(took[len(took)/2].Microseconds()), "p50-µs")
				b.ReportMetric(float64(len(took))/b.Elapsed().Seconds(), "changes/s")
			})
			b.Run("evaluate", func(b *testing.B) {
				b.ReportAllocs()
				for b.Loop() {
					if _, err := svc.Evaluate("f", "user-1"); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}
