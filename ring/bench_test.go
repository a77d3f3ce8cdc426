package ring

import (
	"crypto/md5"
	"fmt"
	"testing"
)

// benchKeys are hashed in turn by the hash and lookup benchmarks, so that
// building a key is not part of what they measure. They are user IDs of a
// usual length, 13 bytes, as api/client's benchmarks use. A power of two
// lets i&mask cycle.
var benchKeys = func() []string {
	keys := make([]string, 1<<12)
	for i := range keys {
		keys[i] = fmt.Sprintf("user-%08d", i*7919)
	}
	return keys
}()

// benchPrefix is a feature's salt and ":", as evaluation hashes it before
// the user ID.
const benchPrefix = "f01:"

const benchMask = 1<<12 - 1

var benchSizes = []int{2, 10, 100, 1000, 10000}

// benchRing returns a ring of exactly points points spread over up to ten
// buckets.
func benchRing(b *testing.B, points int) *Ring {
	b.Helper()
	n := min(points, 10)
	buckets := make([]Bucket, n)
	for i := range buckets {
		buckets[i] = Bucket{Name: fmt.Sprintf("bucket-%d", i), Replicas: points / n}
	}
	r := mustNew(b, buckets...)
	if r.Len() != points {
		b.Fatalf("ring has %d points, want %d", r.Len(), points)
	}
	return r
}

// tenByThousand is ten buckets of 1000 replicas, the size the service keeps.
func tenByThousand() []Bucket {
	buckets := make([]Bucket, 10)
	for i := range buckets {
		buckets[i] = Bucket{Name: fmt.Sprintf("bucket-%d", i), Replicas: 1000}
	}
	return buckets
}

var (
	sinkDigest [md5.Size]byte
	sinkName   string
	sinkChurn  Churn
	sinkShares map[string]float64
	sinkRing   *Ring
)

// BenchmarkMD5Sum is the baseline for BenchmarkHash, BenchmarkHashPrefixed
// and BenchmarkLookup: crypto/md5 on the same keys and nothing else.
func BenchmarkMD5Sum(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sinkDigest = md5.Sum([]byte(benchKeys[i&benchMask]))
	}
}

func BenchmarkHash(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sinkPosition = Hash(benchKeys[i&benchMask])
	}
}

func BenchmarkHashPrefixed(b *testing.B) {
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		sinkPosition = HashPrefixed(benchPrefix, benchKeys[i&benchMask])
	}
}

func BenchmarkLookup(b *testing.B) {
	for _, n := range benchSizes {
		b.Run(fmt.Sprintf("points=%d", n), func(b *testing.B) {
			r := benchRing(b, n)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				sinkName, _ = r.Lookup(benchKeys[i&benchMask])
			}
		})
	}
}

func BenchmarkNew(b *testing.B) {
	buckets := tenByThousand()
	b.ReportAllocs()
	for b.Loop() {
		sinkRing, _ = New(buckets...)
	}
}

func BenchmarkChurnBetween(b *testing.B) {
	before := mustNew(b, tenByThousand()...)
	after, err := before.With(Bucket{Name: "bucket-0", Replicas: 2000})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		sinkChurn = ChurnBetween(before, after)
	}
}

func BenchmarkShares(b *testing.B) {
	r := mustNew(b, tenByThousand()...)
	b.ReportAllocs()
	for b.Loop() {
		sinkShares = r.Shares()
	}
}
