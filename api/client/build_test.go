package client_test

import (
	"context"
	"crypto/md5"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/api/client"
	"github.com/rollout/rollout/rollout"
)

// TestBuildsWithoutCgo: an app that uses the client imports nothing of the
// server, and builds with CGO_ENABLED=0.
func TestBuildsWithoutCgo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	list := exec.Command("go", "list", "-deps", "./example")
	list.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := list.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/rollout/rollout/api", "github.com/rollout/rollout/store", "github.com/labstack/", "github.com/mattn/go-sqlite3", "github.com/prometheus/", "github.com/jackc/", "github.com/pressly/"} {
			if dep == banned || strings.HasPrefix(dep, banned) && !strings.HasPrefix(dep, "github.com/rollout/rollout/api/client") {
				t.Errorf("the example depends on %s", dep)
			}
		}
	}
	build := exec.Command("go", "build", "-o", filepath.Join(t.TempDir(), "example"), "./example")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build ./example: %v\n%s", err, out)
	}
}

// benchClient is a client over a snapshot of the 20 test features, built
// by the client's own decoding from a cache file (no server needed).
func benchClient(tb testing.TB) *client.Client {
	tb.Helper()
	fs := features()
	for i := range fs {
		fs[i].ID, fs[i].Version = fmt.Sprintf("id-%d", i), 1
	}
	snap, err := rollout.NewSnapshot(fs, 1)
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

var sink rollout.Evaluation

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
// md5.Sum is reported (asserted loosely, outside the race detector).
func TestEvaluateCost(t *testing.T) {
	c := benchClient(t)
	if n := testing.AllocsPerRun(1000, func() { sink, _ = c.Evaluate("f01", benchUsers[3]) }); n != 0 {
		t.Errorf("Evaluate allocates %v times, want 0", n)
	}
	if n := testing.AllocsPerRun(1000, func() { sink, _ = c.Evaluate("f02", "u1") }); n != 0 { // an override
		t.Errorf("Evaluate of an override allocates %v times, want 0", n)
	}
	if testing.Short() {
		return
	}
	eval := testing.Benchmark(BenchmarkEvaluate)
	base := testing.Benchmark(BenchmarkMD5Baseline)
	ratio := float64(eval.NsPerOp()) / float64(base.NsPerOp())
	t.Logf("Evaluate %d ns/op, md5.Sum %d ns/op: %.2f×", eval.NsPerOp(), base.NsPerOp(), ratio)
	if !raceEnabled && ratio > 3 {
		t.Errorf("Evaluate costs %.2f× an md5.Sum; the aim is 1.5×, and 3× means something went wrong", ratio)
	}
}
