package client_test

import (
	"context"
	"crypto/md5"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rollout/rollout/api/client"
	"github.com/rollout/rollout/rollout/feature"
)

// TestBuildsWithoutCgo: the client and its OpenFeature provider import
// nothing of the server (no echo, SQLite, pgx or Prometheus), and an app
// that uses them builds with CGO_ENABLED=0.
func TestBuildsWithoutCgo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	list := exec.Command("go", "list", "-deps", "./example", ".", "./provider")
	list.Env = append(os.Environ(), "CGO_ENABLED=0")
	out, err := list.CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, dep := range strings.Fields(string(out)) {
		for _, banned := range []string{"github.com/rollout/rollout/api", "github.com/rollout/rollout/store", "github.com/labstack/", "github.com/mattn/go-sqlite3", "github.com/prometheus/", "github.com/jackc/", "github.com/pressly/"} {
			if dep == banned || strings.HasPrefix(dep, banned) && !strings.HasPrefix(dep, "github.com/rollout/rollout/api/client") {
				t.Errorf("the client, its provider or the example depends on %s", dep)
			}
		}
	}
	build := exec.Command("go", "build", "-o", filepath.Join(t.TempDir(), "example"), "./example")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build ./example: %v\n%s", err, out)
	}
}

// TestAppOnOldestGo: an app whose go.mod declares the oldest Go that
// rollout's module declares builds against the client and the provider,
// and go mod tidy leaves its go line alone: importing the client never
// raises an app's go line.
func TestAppOnOldestGo(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a program")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	goLine := regexp.MustCompile(`(?m)^go (\S+)$`)
	m := goLine.FindSubmatch(mod)
	if m == nil {
		t.Fatal("rollout's go.mod has no go line")
	}
	oldest := string(m[1])
	if strings.Count(oldest, ".") != 2 || !strings.HasSuffix(oldest, ".0") {
		t.Errorf("rollout's go.mod says go %s, want the oldest patch release its dependencies allow (1.N.0)", oldest)
	}

	app := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(app, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/app\n\ngo "+oldest+"\n\nrequire github.com/rollout/rollout v0.0.0\n\nreplace github.com/rollout/rollout => "+root+"\n")
	write("main.go", `package main

import (
	"context"
	"fmt"

	"github.com/open-feature/go-sdk/openfeature"

	"github.com/rollout/rollout/api/client"
	"github.com/rollout/rollout/api/client/provider"
)

func main() {
	c, err := client.New(context.Background(), client.Config{URL: "http://127.0.0.1:8080"})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	openfeature.SetProvider(provider.New(c))
	fmt.Println(c.Evaluate("checkout", "user1"))
}
`)
	goCmd := func(args ...string) {
		t.Helper()
		cmd := exec.Command("go", args...)
		cmd.Dir = app
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local", "GOFLAGS=-mod=mod")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	goCmd("mod", "tidy")
	tidied, err := os.ReadFile(filepath.Join(app, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	if m := goLine.FindSubmatch(tidied); m == nil || string(m[1]) != oldest {
		t.Errorf("go mod tidy changed the app's go line to %q, want go %s:\n%s", m, oldest, tidied)
	}
	goCmd("build", "-o", filepath.Join(app, "app"), ".")
}

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
