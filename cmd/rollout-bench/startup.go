package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/store/sqlite"
)

// The startup scenario runs in a process of its own, this program started
// again with probeEnv naming the database, so that its memory is that of a
// process which has just loaded the features and nothing else.
const probeEnv = "ROLLOUT_BENCH_STARTUP_PROBE"

// probeTimeout bounds the probe process.
const probeTimeout = 2 * time.Minute

// startup creates a database of n features in dir, then times a new
// process opening it and loading them, and reads its memory.
func startup(ctx context.Context, dir string, n int) (Startup, error) {
	path := filepath.Join(dir, "startup.db")
	t0 := time.Now()
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		return Startup{}, err
	}
	svc, err := rollout.NewService(ctx, db, nil)
	if err == nil {
		err = createFeatures(ctx, svc, n)
	}
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return Startup{}, err
	}
	created := time.Since(t0)

	exe, err := os.Executable()
	if err != nil {
		return Startup{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), probeEnv+"="+path)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return Startup{}, fmt.Errorf("startup probe: %w: %s", err, bytes.TrimSpace(stderr.Bytes()))
	}
	var st Startup
	if err := json.Unmarshal(stdout.Bytes(), &st); err != nil {
		return Startup{}, fmt.Errorf("startup probe: %w: %s", err, stdout.Bytes())
	}
	if st.Features != n {
		return Startup{}, fmt.Errorf("startup probe loaded %d features, want %d", st.Features, n)
	}
	st.CreateSecs = created.Seconds()
	return st, nil
}

// probeMain is the startup probe: it opens the database at path, loads its
// features as the binary does at start, and prints the times and memory as
// JSON. It returns the exit code.
func probeMain(path string, stdout, stderr io.Writer) int {
	ctx := context.Background()
	t0 := time.Now()
	db, err := sqlite.Open(ctx, path)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer db.Close()
	t1 := time.Now()
	svc, err := rollout.NewService(ctx, db, nil)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	t2 := time.Now()
	runtime.GC()
	var mem runtime.MemStats
	runtime.ReadMemStats(&mem)
	rss, peak, err := procMemory()
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	st := Startup{
		Features: svc.Snapshot().Len(),
		OpenMS:   ms(t1.Sub(t0)), LoadMS: ms(t2.Sub(t1)),
		HeapAllocMB: mb(mem.HeapAlloc), RSSMB: mb(rss), PeakRSSMB: mb(peak),
		MemoryMethod: "heap: runtime.MemStats.HeapAlloc after runtime.GC; rss, peak: VmRSS, VmHWM of /proc/self/status, of a process that did nothing else",
	}
	runtime.KeepAlive(svc)
	if err := json.NewEncoder(stdout).Encode(st); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

func mb(b uint64) float64 { return float64(b) / (1 << 20) }

// procMemory returns the resident set size of this process and its peak,
// in bytes, from /proc/self/status.
func procMemory() (rss, peak uint64, err error) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/self/status %s: %w", name, err)
		}
		if name == "VmRSS" {
			rss = kb << 10
		} else {
			peak = kb << 10
		}
	}
	return rss, peak, sc.Err()
}
