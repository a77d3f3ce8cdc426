// Command rollout-bench measures rollout against what this machine can do
// (issue #7). It starts the rollout service in process, over a temporary
// SQLite database holding N features and with token authentication on, and a
// bare net/http server answering a constant JSON body of the same size as
// rollout's answer, both on 127.0.0.1 and nowhere else. It drives both with
// the same closed-loop keep-alive client at each concurrency, and prints
// requests/s, p50/p90/p99 latency and the ratios to the baseline. It also
// measures the latency of a bucket change, the time and memory to load
// 10,000 features at start, and evaluation while an admin changes features.
//
// Client and servers share the machine's cores: the figures are what one
// machine does when it is both the load and the server, which is why only
// ratios to a baseline measured in the same run mean much. Every phase is
// bounded in time and in count.
//
//	go run ./cmd/rollout-bench [--duration 10s] [--connections 16,64] [--features N] [--json]
//
// With --wrk it measures instead, with wrk (a C load generator, installed
// apart: apt-get install -y wrk), GET /evaluate, OFREP of one flag, POST
// /evaluate of 20 features and OFREP bulk of 20 flags against the bare
// baseline, --rounds rounds of --duration per side, baseline then rollout:
//
//	go run ./cmd/rollout-bench --wrk [--duration 10s] [--rounds 3] [--connections 16,64]
//
// With --separate as well, each server runs in a process of its own (this
// program started again), as deployments run them, and each one's CPU time
// per request is read from /proc; the Go client's comparison is left out.
// --scenarios get,ofrep-rules measures only the scenarios named (of get,
// ofrep, post, ofrep-bulk and ofrep-rules), and --pprof FILE (or
// --cpuprofile FILE) writes a CPU profile of rollout's process while wrk
// drives it, which `go tool pprof -top FILE` reads. The profile is taken
// by the server process itself, this program started again, from its start
// to its stop: rollout serves no profiling endpoint.
//
//	go run ./cmd/rollout-bench --wrk --separate --scenarios get,ofrep-rules --pprof cpu.out
//
// With --fanout N it measures instead how long a change takes to reach N
// clients following GET /sync/v1/stream on one instance, over --rounds
// changes:
//
//	go run ./cmd/rollout-bench --fanout 1000 [--rounds 3]
//
// With --footprint it measures instead the start time and memory of the
// real binary (rollout serve) on a SQLite file of --features features, and
// of an in-app client of it (issue #21); with --fine, with --footprint or
// --wrk, the features are of two buckets planned 50/50 within 0.05
// percentage points:
//
//	go run ./cmd/rollout-bench --footprint --features 1000 --fine
//
// With --attack it measures instead GET /evaluate's p99 while 4 clients
// send POST /evaluate of the costliest rules the limits of targeting allow
// with the costliest context, against its p99 alone and beside 4 clients
// of ordinary evaluations, in turns:
//
//	go run ./cmd/rollout-bench --attack [--duration 10s] [--rounds 3]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	if db := os.Getenv(probeEnv); db != "" {
		os.Exit(probeMain(db, os.Stdout, os.Stderr))
	}
	if spec := os.Getenv(serverEnv); spec != "" {
		os.Exit(serverMain(spec, os.Stdin, os.Stdout, os.Stderr))
	}
	if spec := os.Getenv(clientEnv); spec != "" {
		os.Exit(clientMain(spec, os.Stdin, os.Stdout, os.Stderr))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "rollout-bench:", err)
		}
		os.Exit(1)
	}
}

// config is what one run measures.
type config struct {
	duration        time.Duration // per side of each comparison
	connections     []int
	features        int
	startupFeatures int
	writes          int     // bucket changes timed, at most
	writeRate       float64 // changes/s of the paced admin, beside the unpaced one
	json            bool
	cpuProfile      string   // file for a CPU profile of the HTTP scenarios (--pprof, --cpuprofile)
	scenarios       []string // ids of the --wrk scenarios to measure; nil: all
	wrk             bool     // measure issue #15's scenarios with wrk instead
	rounds          int      // rounds of the wrk measurement
	separate        bool     // the wrk measurement with each server in a process of its own
	fanout          int      // streams of the fan-out measurement; 0: none
	fine            bool     // features planned 50/50 at the fine tolerance
	footprint       bool     // measure start time and memory of a server and a client
	attack          bool     // measure evaluation beside the costliest evaluations targeting allows
	rolloutBinary   string   // the binary --footprint starts; "": built
}

// Bounds on the flags, so that no run is unbounded.
const (
	maxDuration    = 10 * time.Minute
	maxConnections = 1024
	maxFeatures    = 100_000
	maxWrites      = 100_000
	maxRounds      = 100
	maxFanout      = 10_000
)

func parseFlags(args []string, stderr io.Writer) (config, error) {
	fs := flag.NewFlagSet("rollout-bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: rollout-bench [--wrk [--rounds 3] [--separate] [--scenarios get,...] [--pprof FILE] | --fanout N [--rounds 3]] [--duration 10s] [--connections 16,64] [--features N] [--json]")
		fs.PrintDefaults()
	}
	var cfg config
	fs.DurationVar(&cfg.duration, "duration", 10*time.Second, "measuring time of each side (rollout, baseline) of each scenario")
	conns := fs.String("connections", "16,64", "comma-separated concurrencies: keep-alive connections, one closed-loop client each")
	fs.IntVar(&cfg.features, "features", 100, "features the server holds (4 buckets × 100 replicas each)")
	fs.IntVar(&cfg.startupFeatures, "startup-features", 10_000, "features of the startup scenario (4 buckets × 100 replicas each)")
	fs.IntVar(&cfg.writes, "writes", 500, "bucket changes timed by the write scenario, at most (it also stops after --duration)")
	fs.Float64Var(&cfg.writeRate, "write-rate", 20, "changes per second of the paced admin writer (evaluation is also measured under an unpaced one)")
	fs.BoolVar(&cfg.json, "json", false, "print the results as JSON")
	const profileUsage = "write a CPU profile of rollout serving the HTTP scenarios to this file: with --wrk --separate, of rollout's own process, from its start to its end; otherwise of this process (client and servers), over the HTTP scenarios"
	fs.StringVar(&cfg.cpuProfile, "pprof", "", profileUsage)
	fs.StringVar(&cfg.cpuProfile, "cpuprofile", "", "the same as --pprof")
	only := fs.String("scenarios", "", "with --wrk: comma-separated scenarios to measure, of "+strings.Join(wrkScenarioIDs, ", ")+"; empty: all")
	fs.BoolVar(&cfg.wrk, "wrk", false, "measure the evaluation endpoints with wrk (installed apart) against the bare baseline, in alternating rounds")
	fs.IntVar(&cfg.rounds, "rounds", 3, "rounds of the --wrk measurement, each running the baseline then rollout for --duration")
	fs.IntVar(&cfg.fanout, "fanout", 0, "measure instead how long a change takes to reach this many stream clients (GET /sync/v1/stream) on one instance, over --rounds changes")
	fs.BoolVar(&cfg.fine, "fine", false, "with --wrk or --footprint: features of two buckets planned 50/50 within 0.05 percentage points (about 4,000 ring points each), instead of 4 buckets × 100 replicas")
	fs.BoolVar(&cfg.footprint, "footprint", false, "measure instead the start time and memory (VmRSS, VmHWM) of the real binary (rollout serve) on a SQLite file of --features features, and of an in-app client (api/client) of it")
	fs.StringVar(&cfg.rolloutBinary, "rollout-binary", "", "with --footprint: the rollout binary to start; empty builds cmd/rollout (run the tool inside the repository)")
	fs.BoolVar(&cfg.attack, "attack", false, "measure instead GET /evaluate's p99 while 4 clients send POST /evaluate of the costliest rules the limits allow with the costliest context, against its p99 alone and beside 4 clients of ordinary evaluations, in --rounds rounds of --duration")
	fs.BoolVar(&cfg.separate, "separate", false, "with --wrk: run rollout and the baseline each in a process of its own, as deployments do, and report each one's CPU time per request (Linux)")
	if err := fs.Parse(args); err != nil {
		return config{}, err
	}
	if fs.NArg() > 0 {
		return config{}, fmt.Errorf("no arguments expected, got %q", fs.Args())
	}
	if cfg.fanout < 0 || cfg.fanout > maxFanout {
		return config{}, fmt.Errorf("--fanout %d: give a number from 1 to %d streams", cfg.fanout, maxFanout)
	}
	if cfg.fanout > 0 && cfg.wrk {
		return config{}, errors.New("--fanout and --wrk are separate measurements: give one")
	}
	if cfg.footprint && (cfg.wrk || cfg.fanout > 0) {
		return config{}, errors.New("--footprint, --wrk and --fanout are separate measurements: give one")
	}
	if cfg.attack && (cfg.wrk || cfg.fanout > 0 || cfg.footprint) {
		return config{}, errors.New("--attack, --footprint, --wrk and --fanout are separate measurements: give one")
	}
	if cfg.fine && !cfg.wrk && !cfg.footprint {
		return config{}, errors.New("--fine goes with --wrk or --footprint")
	}
	if cfg.rolloutBinary != "" && !cfg.footprint {
		return config{}, errors.New("--rollout-binary goes with --footprint")
	}
	if cfg.separate && !cfg.wrk {
		return config{}, errors.New("--separate goes with --wrk")
	}
	if *only != "" {
		if !cfg.wrk {
			return config{}, errors.New("--scenarios goes with --wrk")
		}
		for _, id := range strings.Split(*only, ",") {
			id = strings.TrimSpace(id)
			if !slices.Contains(wrkScenarioIDs, id) {
				return config{}, fmt.Errorf("--scenarios %q: give some of %s, separated by commas", *only, strings.Join(wrkScenarioIDs, ","))
			}
			if !slices.Contains(cfg.scenarios, id) {
				cfg.scenarios = append(cfg.scenarios, id)
			}
		}
	}
	if cfg.duration <= 0 || cfg.duration > maxDuration {
		return config{}, fmt.Errorf("--duration %v: give a duration from 1ms to %v", cfg.duration, maxDuration)
	}
	if !(cfg.writeRate > 0 && cfg.writeRate <= 10_000) {
		return config{}, fmt.Errorf("--write-rate %g: give a rate from 0 (excluded) to 10000 changes per second", cfg.writeRate)
	}
	for _, s := range strings.Split(*conns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > maxConnections {
			return config{}, fmt.Errorf("--connections %q: give numbers from 1 to %d, such as 16,64", *conns, maxConnections)
		}
		cfg.connections = append(cfg.connections, n)
	}
	for _, f := range []struct {
		name string
		v    int
		max  int
	}{{"--features", cfg.features, maxFeatures}, {"--startup-features", cfg.startupFeatures, maxFeatures}, {"--writes", cfg.writes, maxWrites}, {"--rounds", cfg.rounds, maxRounds}} {
		if f.v < 1 || f.v > f.max {
			return config{}, fmt.Errorf("%s %d: give a number from 1 to %d", f.name, f.v, f.max)
		}
	}
	return cfg, nil
}

// run measures every scenario and prints the results to stdout; progress
// goes to stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	progress := func(format string, args ...any) { fmt.Fprintf(stderr, format+"\n", args...) }
	featureBuckets = benchBuckets
	if cfg.fine {
		if featureBuckets, err = fineBuckets(); err != nil {
			return err
		}
	}
	if cfg.footprint {
		return runFootprint(ctx, cfg, stdout, progress)
	}
	if cfg.attack {
		return runAttack(ctx, cfg, stdout, progress)
	}
	if cfg.wrk {
		return runWrk(ctx, cfg, stdout, progress)
	}
	if cfg.fanout > 0 {
		return runFanout(ctx, cfg, stdout, progress)
	}
	rep, err := measure(ctx, cfg, progress)
	if err != nil {
		return err
	}
	if cfg.json {
		return writeJSON(stdout, rep)
	}
	return writeText(stdout, rep)
}
