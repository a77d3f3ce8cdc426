package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const wrkReport = `Running 1s test @ http://127.0.0.1:8080/
  2 threads and 16 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   412.00us  200.00us   5.00ms   90.00%
    Req/Sec    19.50k     1.20k   21.00k    70.00%
  Latency Distribution
     50%  380.00us
     75%  450.00us
     90%  600.00us
     99%    1.20ms
  38900 requests in 1.00s, 6.00MB read
Requests/sec:  38900.50
Transfer/sec:      6.00MB
`

// TestParseWrk: requests/s and the 50th and 99th percentiles, in ms, from
// wrk --latency's report; a report of failed answers or socket errors, or
// without the distribution, is an error.
func TestParseWrk(t *testing.T) {
	got, err := parseWrk(wrkReport)
	if want := (WrkStats{RPS: 38900.5, P50: 0.38, P99: 1.2, Requests: 38900}); err != nil || got != want {
		t.Errorf("parseWrk = %+v, %v, want %+v", got, err, want)
	}
	for name, report := range map[string]string{
		"non-2xx":         strings.Replace(wrkReport, "Requests/sec", "  Non-2xx or 3xx responses: 12\nRequests/sec", 1),
		"socket errors":   strings.Replace(wrkReport, "Requests/sec", "  Socket errors: connect 0, read 3, write 0, timeout 0\nRequests/sec", 1),
		"no distribution": strings.Replace(wrkReport, "     99%    1.20ms\n", "", 1),
		"no rate":         strings.Replace(wrkReport, "Requests/sec", "Requests", 1),
	} {
		if _, err := parseWrk(report); err == nil {
			t.Errorf("%s: parseWrk succeeded, want an error", name)
		}
	}
}

// TestWrkRatios: requests/s summed over the rounds, p99 by median.
func TestWrkRatios(t *testing.T) {
	rounds := []WrkRound{
		{Baseline: WrkStats{RPS: 100, P99: 1}, Rollout: WrkStats{RPS: 90, P99: 3}},
		{Baseline: WrkStats{RPS: 300, P99: 2}, Rollout: WrkStats{RPS: 210, P99: 2}},
		{Baseline: WrkStats{RPS: 100, P99: 9}, Rollout: WrkStats{RPS: 100, P99: 1}},
	}
	rps, p99 := wrkRatios(rounds)
	if rps != 400.0/500 || p99 != 1 {
		t.Errorf("wrkRatios = %v, %v, want 0.8, 1", rps, p99)
	}
}

// TestLuaString: quoted strings survive quotes, backslashes and bytes
// outside printable ASCII.
func TestLuaString(t *testing.T) {
	if got, want := luaString(`a"b\c`+"\n\xff"), `"a\034b\092c\010\255"`; got != want {
		t.Errorf("luaString = %s, want %s", got, want)
	}
}

// TestRunWrk runs the wrk measurement briefly when wrk is installed: every
// scenario measures something, with wrk and with the Go client; with
// --separate, with wrk and each server's CPU time per request, from servers
// in processes of their own, only the scenarios --scenarios names, and
// with --pprof a CPU profile of rollout's process serving them.
func TestRunWrk(t *testing.T) {
	if testing.Short() {
		t.Skip("runs servers under load for seconds")
	}
	if _, err := exec.LookPath("wrk"); err != nil {
		t.Skip(wrkInstall)
	}
	profile := filepath.Join(t.TempDir(), "cpu.out")
	for _, separate := range []bool{false, true} {
		var stdout, stderr bytes.Buffer
		args := []string{"--wrk", "--duration", "1s", "--rounds", "1", "--connections", "2", "--features", "3", "--json"}
		want := []string{"GET /evaluate", "OFREP single", "POST /evaluate ×3", "OFREP bulk ×3", "OFREP single, 5 rules, 6-attribute context"}
		if separate {
			args = append(args, "--separate", "--scenarios", "ofrep-rules,get", "--pprof", profile)
			want = []string{"GET /evaluate", "OFREP single, 5 rules, 6-attribute context"}
		}
		if err := run(context.Background(), args, &stdout, &stderr); err != nil {
			t.Fatalf("run(%q) = %v; stderr:\n%s", args, err, &stderr)
		}
		var loads []WrkLoad
		if err := json.Unmarshal(stdout.Bytes(), &loads); err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, l := range loads {
			got = append(got, l.Scenario)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("%q: scenarios measured %q, want %q", args, got, want)
		}
		for _, l := range loads {
			if len(l.Rounds) != 1 || l.RPSRatio <= 0 {
				t.Fatalf("%q: %s: %+v, want one round and a ratio", args, l.Scenario, l)
			}
			r := l.Rounds[0]
			if r.Baseline.RPS <= 0 || r.Rollout.RPS <= 0 || r.Baseline.Requests <= 0 || r.Rollout.Requests <= 0 {
				t.Errorf("%q: %s: %+v, want rates and requests from both servers", args, l.Scenario, r)
			}
			switch {
			case !separate && (l.Go == nil || l.Go.RPSRatio <= 0):
				t.Errorf("%q: %s: Go client %+v, want a ratio", args, l.Scenario, l.Go)
			case separate && l.Go != nil:
				t.Errorf("%q: %s: Go client %+v, want none with --separate", args, l.Scenario, l.Go)
			case separate && (r.Baseline.CPU <= 0 || r.Rollout.CPU <= 0):
				t.Errorf("%q: %s: CPU per request %v and %v µs, want both measured", args, l.Scenario, r.Baseline.CPU, r.Rollout.CPU)
			case !separate && (r.Baseline.CPU != 0 || r.Rollout.CPU != 0):
				t.Errorf("%q: %s: CPU per request measured in one process", args, l.Scenario)
			}
		}
	}
	// The profile is rollout's process's: its samples are of rollout's
	// handlers serving HTTP.
	names := profileStrings(t, profile)
	for _, want := range []string{"net/http.(*conn).serve", "github.com/rollout/rollout/api"} {
		if !strings.Contains(names, want) {
			t.Errorf("the CPU profile names no function of %s", want)
		}
	}
}

// profileStrings returns the uncompressed bytes of the pprof profile at
// path (a gzipped protocol buffer, whose function names are strings).
func profileStrings(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("no CPU profile: %v", err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("the CPU profile is not gzipped: %v", err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("read the CPU profile: %v", err)
	}
	return string(b)
}

// TestProcessCPU: the CPU time /proc gives for this process grows as it
// works, and is no more than the time it has run times its CPUs.
func TestProcessCPU(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("no /proc here")
	}
	before, err := processCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// Work until the reading moves: the kernel counts CPU time in ticks,
	// so a busy loop sees it grow; how soon depends on the machine's
	// load, so only a hang is bounded.
	var sink uint64
	for start := time.Now(); ; {
		for i := range 100_000 {
			sink += uint64(i) * sink
		}
		after, err := processCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		if after < before {
			t.Fatalf("CPU time went back from %v to %v", before, after)
		}
		if after > before {
			break
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("a minute of work: CPU time stayed at %v", before)
		}
	}
	if _, err := processCPU(-1); err == nil {
		t.Error("processCPU(-1) succeeded, want an error")
	}
	_ = sink
}
