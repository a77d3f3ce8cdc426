package client_test

import (
	"context"
	"crypto/md5"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rollout/rollout/api/client"
	"github.com/rollout/rollout/rollout/feature"
)

// benchClient is a client over a snapshot of the 20 test features, built
// by the client's own decoding from a cache file (no server needed).
func benchClient(tb testing.TB) *client.Client {
	tb.Helper()
	fs := features()
	for i := range fs {
		fs[i].ID, fs[i].Version = fmt.Sprintf("id-%d", i), 1
	}
	snap, err := feature.NewSnapshot(fs, 1)
	if err != nil {
		tb.Fatal(err)
	}
	data := snap.AppendSync(nil)
	cache := filepath.Join(tb.TempDir(), "cache.json")
	os.WriteFile(cache, data, 0o600)
	c, err := client.New(context.Background(), client.Config{URL: "http://127.0.0.1:1", CacheFile: cache, PollInterval: time.Hour})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

var sink feature.Evaluation

// benchUsers are user IDs of a usual length.
var benchUsers = func() []string {
	out := make([]string, 1024)
	for i := range out {
		out[i] = fmt.Sprintf("user-%08d", i*7919)
	}
	return out
}()

// BenchmarkEvaluate: one evaluation of a salted feature of 3 buckets.
func BenchmarkEvaluate(b *testing.B) {
	c := benchClient(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		sink, _ = c.Evaluate("f01", benchUsers[i&1023])
		i++
	}
}

// BenchmarkEvaluateOverrides: one evaluation of a salted feature that has
// overrides, for users it does not override (the look-up of the user's
// hash costs no second hash: it is the ring position).
func BenchmarkEvaluateOverrides(b *testing.B) {
	c := benchClient(b)
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		sink, _ = c.Evaluate("f02", benchUsers[i&1023])
		i++
	}
}

// BenchmarkEvaluateOverridden: one evaluation of an overridden user.
func BenchmarkEvaluateOverridden(b *testing.B) {
	c := benchClient(b)
	b.ReportAllocs()
	for b.Loop() {
		sink, _ = c.Evaluate("f02", "vip@example.com")
	}
}

var digest [md5.Size]byte

// BenchmarkMD5Baseline: one md5.Sum of the user ID, the floor of an
// evaluation.
func BenchmarkMD5Baseline(b *testing.B) {
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		digest = md5.Sum([]byte(benchUsers[i&1023]))
		i++
	}
}

// TestEvaluateCost: Evaluate does not allocate, and its cost beside one
// md5.Sum is reported (the aim is at most 2×), never asserted: timings
// swing with the machine's load.
func TestEvaluateCost(t *testing.T) {
	c := benchClient(t)
	if n := testing.AllocsPerRun(1000, func() { sink, _ = c.Evaluate("f01", benchUsers[3]) }); n != 0 {
		t.Errorf("Evaluate allocates %v times, want 0", n)
	}
	if n := testing.AllocsPerRun(1000, func() { sink, _ = c.Evaluate("f02", "u1") }); n != 0 { // an override
		t.Errorf("Evaluate of an override allocates %v times, want 0", n)
	}
	if testing.Short() || raceEnabled {
		return
	}
	eval := testing.Benchmark(BenchmarkEvaluate)
	base := testing.Benchmark(BenchmarkMD5Baseline)
	t.Logf("Evaluate %d ns/op, md5.Sum %d ns/op: %.2f×", eval.NsPerOp(), base.NsPerOp(),
		float64(eval.NsPerOp())/float64(base.NsPerOp()))
}
