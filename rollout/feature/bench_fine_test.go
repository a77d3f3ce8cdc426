package feature

import (
	"testing"
	"time"
)

// Fine rings (issue #21): evaluation on a 20,000-point ring beside one on
// a 300-point ring, in the same run (the target: at most 1.1×).

func ringSnapshot(b *testing.B, buckets ...Bucket) *Snapshot {
	b.Helper()
	f := Feature{Key: "f", Enabled: true, Salt: "f", Version: 1, Buckets: buckets}
	if err := f.Validate(); err != nil {
		b.Fatal(err)
	}
	return newSnapshot(map[string]*Compiled{"f": compile(f)}, 0)
}

func benchEvaluateRing(b *testing.B, snap *Snapshot) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := snap.Evaluate("f", benchUsers[i%len(benchUsers)]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEvaluateRing300(b *testing.B) {
	benchEvaluateRing(b, ringSnapshot(b, Bucket{Name: "off", Replicas: 150}, Bucket{Name: "on", Replicas: 150}))
}

func BenchmarkEvaluateRing20000(b *testing.B) {
	benchEvaluateRing(b, ringSnapshot(b, Bucket{Name: "off", Replicas: 10_000}, Bucket{Name: "on", Replicas: 10_000}))
}

// BenchmarkEvaluateRingRatio evaluates on the 300-point and the
// 20,000-point ring in alternating batches of 2,000 users and reports the
// ratio of their fastest batches (ratio-20000/300), and each one's fastest
// batch per evaluation: on a loaded machine, where other work stretches
// whole runs, the fastest of many short batches taken in turns is the
// cost with the least interference, and both sides see the same machine.
//
//	go test -run '^$' -bench EvaluateRingRatio -benchtime 2000x ./rollout/feature
func BenchmarkEvaluateRingRatio(b *testing.B) {
	small := ringSnapshot(b, Bucket{Name: "off", Replicas: 150}, Bucket{Name: "on", Replicas: 150})
	large := ringSnapshot(b, Bucket{Name: "off", Replicas: 10_000}, Bucket{Name: "on", Replicas: 10_000})
	const batch = 2000
	batchTime := func(snap *Snapshot, from int) time.Duration {
		t0 := time.Now()
		for i := range batch {
			if _, err := snap.Evaluate("f", benchUsers[(from+i)%len(benchUsers)]); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(t0)
	}
	fastest := [2]time.Duration{time.Hour, time.Hour}
	for i := 0; b.Loop(); i++ {
		for side, snap := range [2]*Snapshot{small, large} {
			fastest[side] = min(fastest[side], batchTime(snap, i*batch))
		}
	}
	b.ReportMetric(float64(fastest[0].Nanoseconds())/batch, "ns/eval-300")
	b.ReportMetric(float64(fastest[1].Nanoseconds())/batch, "ns/eval-20000")
	b.ReportMetric(float64(fastest[1])/float64(fastest[0]), "ratio-20000/300")
}
