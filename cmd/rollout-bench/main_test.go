package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// TestMain lets the test binary serve as the startup probe and as the
// servers of --wrk --separate, which the tool starts by running its own
// executable again.
func TestMain(m *testing.M) {
	if db := os.Getenv(probeEnv); db != "" {
		os.Exit(probeMain(db, os.Stdout, os.Stderr))
	}
	if spec := os.Getenv(serverEnv); spec != "" {
		os.Exit(serverMain(spec, os.Stdin, os.Stdout, os.Stderr))
	}
	if spec := os.Getenv(clientEnv); spec != "" {
		os.Exit(clientMain(spec, os.Stdin, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// TestRunJSON runs every scenario briefly: each must measure something and
// fail nothing.
func TestRunJSON(t *testing.T) {
	if testing.Short() {
		t.Skip("runs servers under load for seconds")
	}
	var stdout, stderr bytes.Buffer
	args := []string{"--duration", "300ms", "--connections", "2", "--features", "3", "--startup-features", "50", "--writes", "20", "--json"}
	if err := run(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("run(%q) = %v; stderr:\n%s", args, err, &stderr)
	}
	var rep Report
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("output is not a JSON report: %v\n%s", err, &stdout)
	}

	want := map[string]bool{"GET /evaluate": false, "POST /evaluate ×3": false, "OFREP single": false}
	for _, l := range rep.HTTP {
		if _, ok := want[l.Scenario]; !ok {
			t.Errorf("unexpected scenario %q", l.Scenario)
		}
		want[l.Scenario] = true
		for side, st := range map[string]Stats{"baseline": l.Baseline, "rollout": l.Rollout} {
			if st.RPS <= 0 || st.Errors != 0 || st.P99 <= 0 {
				t.Errorf("%s at %d connections, %s: %+v, want positive rps and p99 and no errors", l.Scenario, l.Connections, side, st)
			}
		}
		if l.Connections != 2 || l.BodyBytes <= 0 || l.RPSRatio <= 0 {
			t.Errorf("%s: %+v, want 2 connections, a body and a ratio", l.Scenario, l)
		}
	}
	for name, seen := range want {
		if !seen {
			t.Errorf("scenario %q is missing", name)
		}
	}
	if len(rep.Mixed) != 2 {
		t.Fatalf("%d evaluation-under-writes scenarios, want 2 (unpaced, paced)", len(rep.Mixed))
	}
	for _, m := range rep.Mixed {
		if m.Idle.RPS <= 0 || m.Writing.RPS <= 0 || m.Writes <= 0 || m.Idle.Errors+m.Writing.Errors != 0 {
			t.Errorf("evaluation under writes at %g/s: %+v, want positive rps and writes and no errors", m.WriteRate, m)
		}
	}
	if w := rep.Writes; w.Changes <= 0 || w.Changes > 20 || w.P50 <= 0 || w.Buckets != 10 || w.Replicas != 100 {
		t.Errorf("writes: %+v, want 1 to 20 changes of 10 buckets × 100 replicas", w)
	}
	if st := rep.Startup; st.Features != 50 || st.LoadMS <= 0 || st.HeapAllocMB <= 0 || st.PeakRSSMB <= 0 {
		t.Errorf("startup: %+v, want 50 features loaded and memory measured", st)
	}
	if len(rep.Targets) == 0 || rep.Machine.CPUs <= 0 {
		t.Errorf("report has %d targets and machine %+v", len(rep.Targets), rep.Machine)
	}
}

func TestParseFlags(t *testing.T) {
	tests := []struct {
		args    []string
		wantErr string
	}{
		{nil, ""},
		{[]string{"--duration", "0s"}, "--duration"},
		{[]string{"--duration", "11m"}, "--duration"},
		{[]string{"--connections", "16,x"}, "--connections"},
		{[]string{"--connections", "0"}, "--connections"},
		{[]string{"--connections", "2000"}, "--connections"},
		{[]string{"--features", "0"}, "--features"},
		{[]string{"--startup-features", "1000000"}, "--startup-features"},
		{[]string{"--write-rate", "0"}, "--write-rate"},
		{[]string{"extra"}, "no arguments"},
		{[]string{"--wrk", "--separate"}, ""},
		{[]string{"--separate"}, "--separate goes with --wrk"},
		{[]string{"--fanout", "100"}, ""},
		{[]string{"--fanout", "-1"}, "--fanout"},
		{[]string{"--fanout", "20000"}, "--fanout"},
		{[]string{"--fanout", "10", "--wrk"}, "--fanout"},
		{[]string{"--wrk", "--separate", "--cpuprofile", "cpu.out"}, ""},
		{[]string{"--wrk", "--separate", "--pprof", "cpu.out"}, ""},
		{[]string{"--wrk", "--scenarios", "get,ofrep-rules"}, ""},
		{[]string{"--wrk", "--scenarios", "get,nope"}, "--scenarios"},
		{[]string{"--wrk", "--scenarios", ","}, "--scenarios"},
		{[]string{"--scenarios", "get"}, "--scenarios goes with --wrk"},
		{[]string{"--footprint", "--fine", "--features", "1000"}, ""},
		{[]string{"--wrk", "--fine"}, ""},
		{[]string{"--fine"}, "--fine goes with"},
		{[]string{"--footprint", "--wrk"}, "separate measurements"},
		{[]string{"--footprint", "--fanout", "10"}, "separate measurements"},
		{[]string{"--rollout-binary", "/bin/true"}, "--rollout-binary goes with --footprint"},
	}
	for _, tt := range tests {
		_, err := parseFlags(tt.args, &bytes.Buffer{})
		switch {
		case tt.wantErr == "" && err != nil:
			t.Errorf("parseFlags(%q) = %v, want no error", tt.args, err)
		case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
			t.Errorf("parseFlags(%q) = %v, want an error about %s", tt.args, err, tt.wantErr)
		}
	}
}

// TestFanout: a change reaches every stream, and the latencies are
// reported.
func TestFanout(t *testing.T) {
	if testing.Short() {
		t.Skip("opens streams and makes changes")
	}
	var stdout, stderr bytes.Buffer
	args := []string{"--fanout", "20", "--rounds", "2", "--features", "2", "--json"}
	if err := run(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("run(%q) = %v; stderr:\n%s", args, err, &stderr)
	}
	var rep Fanout
	if err := json.Unmarshal(stdout.Bytes(), &rep); err != nil {
		t.Fatalf("output is not a JSON report: %v\n%s", err, &stdout)
	}
	if rep.Streams != 20 || rep.Rounds != 2 || rep.Missed != 0 || rep.P99MS <= 0 || rep.EventBytes <= 0 {
		t.Errorf("fanout report %+v, want 20 streams, 2 rounds, none missed, a p99 and an event size", rep)
	}
}

// TestFootprint: the real binary and a client process start on a database
// of fine features, and their times and memory are reported.
func TestFootprint(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the binary")
	}
	var stdout, stderr bytes.Buffer
	args := []string{"--footprint", "--features", "3", "--fine", "--json"}
	if err := run(context.Background(), args, &stdout, &stderr); err != nil {
		t.Fatalf("run(%q) = %v; stderr:\n%s", args, err, &stderr)
	}
	var fp Footprint
	if err := json.Unmarshal(stdout.Bytes(), &fp); err != nil {
		t.Fatalf("output is not a JSON report: %v\n%s", err, &stdout)
	}
	if fp.Features != 3 || !fp.Fine || fp.Points < 2000 || fp.MaxErrorPoints > 0.05 || len(fp.Processes) != 3 {
		t.Fatalf("footprint %+v: want 3 fine features (within 0.05 points) and 3 processes measured", fp)
	}
	for i, p := range fp.Processes {
		if p.RSSMB <= 0 || p.PeakRSSMB < p.RSSMB || (i < 2) != (p.ReadyMS > 0) || p.CPUMS < 0 || i == 2 && p.CPUMS != 0 || p.Features != 3 {
			t.Errorf("process %+v: want its memory, its time to ready (but for the last reading; CPU time in 10 ms ticks may read 0) and 3 features", p)
		}
	}
}
