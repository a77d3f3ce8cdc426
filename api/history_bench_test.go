package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
)

// heavyHistory is a feature of the most ring points a feature may have
// (10 buckets × 1,000 replicas) with historyVersions versions, each of a
// ring of its own: the worst case for user look-ups.
const historyVersions = 150

func addHeavyHistory(b *testing.B, svc *rollout.Service) {
	b.Helper()
	ctx := context.Background()
	f := feature.Feature{Key: "heavy", Enabled: true, Salt: "heavy"}
	for i := range 10 {
		f.Buckets = append(f.Buckets, feature.Bucket{Name: fmt.Sprintf("b%d", i), Replicas: 1000})
	}
	if _, err := svc.Create(ctx, f, rollout.ChangeOptions{}); err != nil {
		b.Fatal(err)
	}
	for i := 2; i <= historyVersions; i++ {
		replicas := 999 - (i/10)%2 // every version's ring differs from the one before
		if _, err := svc.Change(ctx, "heavy", change.UpdateBucket(fmt.Sprintf("b%d", i%10), &replicas, nil), rollout.ChangeOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkUserHistory is one look-up of a user over all 150 versions of
// the heavy feature (?limit=500: one page).
func BenchmarkUserHistory(b *testing.B) {
	h, svc, _ := benchAPI(b, false)
	addHeavyHistory(b, svc)
	br := newBenchRequest(http.MethodGet, "/api/features/heavy/users/user-4711?limit=500", "", "")
	b.ReportAllocs()
	for b.Loop() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, br.next())
		if rec.Code != http.StatusOK {
			b.Fatalf("look-up answered %d %s", rec.Code, rec.Body)
		}
	}
}

// BenchmarkEvaluateDuringLookups measures GET /evaluate alone and while
// four clients look users up in the heavy feature's history without pause,
// and reports the evaluations' 50th and 99th percentile latencies and the
// look-ups completed. It asserts nothing about time: it is a measurement.
func BenchmarkEvaluateDuringLookups(b *testing.B) {
	h, svc, _ := benchAPI(b, false)
	addHeavyHistory(b, svc)
	for _, lookups := range []int{0, 4} {
		b.Run(fmt.Sprintf("lookups=%d", lookups), func(b *testing.B) {
			var (
				stop = make(chan struct{})
				wg   sync.WaitGroup
				done atomic.Int64
			)
			for i := range lookups {
				wg.Go(func() {
					br := newBenchRequest(http.MethodGet, fmt.Sprintf("/api/features/heavy/users/user-%d", i), "", "")
					for {
						select {
						case <-stop:
							return
						default:
						}
						rec := httptest.NewRecorder()
						h.ServeHTTP(rec, br.next())
						if rec.Code != http.StatusOK {
							b.Errorf("look-up answered %d %s", rec.Code, rec.Body)
							return
						}
						done.Add(1)
					}
				})
			}
			br := newBenchRequest(http.MethodGet, "/evaluate?feature=feature-07&user=user-4711@example.com", "", "")
			w := &benchWriter{header: http.Header{}}
			latencies := make([]time.Duration, 0, 1<<20)
			for b.Loop() {
				w.reset()
				start := time.Now()
				h.ServeHTTP(w, br.next())
				latencies = append(latencies, time.Since(start))
				if w.status != http.StatusOK {
					b.Fatalf("evaluation answered %d", w.status)
				}
			}
			close(stop)
			wg.Wait()
			slices.Sort(latencies)
			b.ReportMetric(float64(latencies[len(latencies)/2]), "p50-ns")
			b.ReportMetric(float64(latencies[len(latencies)*99/100]), "p99-ns")
			b.ReportMetric(float64(done.Load()), "lookups")
		})
	}
}
