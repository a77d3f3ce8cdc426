package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Report is everything one run measured.
type Report struct {
	Machine  Machine    `json:"machine"`
	Settings Settings   `json:"settings"`
	HTTP     []HTTPLoad `json:"http"`
	Writes   Writes     `json:"writes"`
	Startup  Startup    `json:"startup"`
	Mixed    []Mixed    `json:"eval_under_writes"`
	Targets  []Target   `json:"targets"`
}

// Machine is where the run ran.
type Machine struct {
	CPUs       int    `json:"cpus"`
	GOMAXPROCS int    `json:"gomaxprocs"`
	Go         string `json:"go"`
	OS         string `json:"os"`
	Arch       string `json:"arch"`
}

// Settings are the run's flags.
type Settings struct {
	Duration        string `json:"duration"`
	Connections     []int  `json:"connections"`
	Features        int    `json:"features"`
	StartupFeatures int    `json:"startup_features"`
}

// HTTPLoad compares an endpoint with the bare baseline at one concurrency.
type HTTPLoad struct {
	Scenario    string  `json:"scenario"`
	Connections int     `json:"connections"`
	BodyBytes   int     `json:"body_bytes"`
	Baseline    Stats   `json:"baseline"`
	Rollout     Stats   `json:"rollout"`
	RPSRatio    float64 `json:"rps_ratio"` // rollout / baseline
	P99Ratio    float64 `json:"p99_ratio"` // rollout / baseline
}

// Writes is the latency of bucket changes made one after another through
// the API: transaction, churn report and snapshot swap.
type Writes struct {
	Buckets  int     `json:"buckets"`
	Replicas int     `json:"replicas"`
	Changes  int     `json:"changes"`
	P50      float64 `json:"p50_ms"`
	P90      float64 `json:"p90_ms"`
	P99      float64 `json:"p99_ms"`
	Mean     float64 `json:"mean_ms"`
	// CPU is the process's CPU time (user and system) per change, the
	// admin client's share included: what a change takes from evaluation.
	CPU float64 `json:"cpu_ms_per_change"`
}

// Startup is a new process opening a database of many features and loading
// them: time, and memory as the kernel and as the Go heap count it.
type Startup struct {
	Features     int     `json:"features"`
	CreateSecs   float64 `json:"create_s"` // to create them, before: not a target
	OpenMS       float64 `json:"open_ms"`  // sqlite.Open: connect, check, migrate
	LoadMS       float64 `json:"load_ms"`  // rollout.NewService: read and compile
	HeapAllocMB  float64 `json:"heap_alloc_mb"`
	RSSMB        float64 `json:"rss_mb"`
	PeakRSSMB    float64 `json:"peak_rss_mb"`
	MemoryMethod string  `json:"memory_method"`
}

// Mixed is evaluation with and without an admin changing features, one
// change after another, at most WriteRate changes per second (0: as fast as
// they go).
type Mixed struct {
	Scenario    string  `json:"scenario"`
	Connections int     `json:"connections"`
	WriteRate   float64 `json:"write_rate"`
	Idle        Stats   `json:"idle"`
	Writing     Stats   `json:"writing"`
	Writes      int64   `json:"writes"`
	WritesPerS  float64 `json:"writes_per_s"`
	RPSRatio    float64 `json:"rps_ratio"` // writing / idle
	P99Ratio    float64 `json:"p99_ratio"` // writing / idle
}

// Target is one of issue #7's targets and how the run fared.
type Target struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
	Limit string  `json:"limit"`
	Met   bool    `json:"met"`
}

// measure runs every scenario.
func measure(ctx context.Context, cfg config, progress func(string, ...any)) (_ *Report, err error) {
	rep := &Report{
		Machine: Machine{CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0), Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH},
		Settings: Settings{Duration: cfg.duration.String(), Connections: cfg.connections, Features: cfg.features,
			StartupFeatures: cfg.startupFeatures},
	}
	dir, err := os.MkdirTemp("", "rollout-bench-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)

	progress("creating %d features", cfg.features)
	s, err := startService(ctx, dir, cfg.features)
	if err != nil {
		return nil, fmt.Errorf("start rollout: %w", err)
	}
	defer func() {
		if cerr := s.close(); err == nil && cerr != nil {
			err = fmt.Errorf("stop rollout: %w", cerr)
		}
	}()

	stopProfile := func() error { return nil }
	if cfg.cpuProfile != "" {
		if stopProfile, err = startCPUProfile(cfg.cpuProfile); err != nil {
			return nil, err
		}
		defer stopProfile()
	}
	for _, sc := range scenarios(cfg.features) {
		for _, conns := range cfg.connections {
			progress("%s at %d connections: %v each for rollout and baseline", sc.name, conns, cfg.duration)
			load, err := compare(ctx, s, sc, conns, cfg.duration)
			if err != nil {
				return nil, err
			}
			rep.HTTP = append(rep.HTTP, load)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := stopProfile(); err != nil {
		return nil, err
	}
	for _, rate := range []float64{0, cfg.writeRate} {
		progress("evaluation while an admin changes features (%s): %v each", rateName(rate), cfg.duration)
		m, err := underWrites(ctx, s, cfg, rate)
		if err != nil {
			return nil, err
		}
		rep.Mixed = append(rep.Mixed, m)
	}
	progress("bucket changes on 10 buckets × 100 replicas: at most %d or %v", cfg.writes, cfg.duration)
	if rep.Writes, err = writeLatency(ctx, s, cfg); err != nil {
		return nil, err
	}
	progress("startup with %d features", cfg.startupFeatures)
	if rep.Startup, err = startup(ctx, dir, cfg.startupFeatures); err != nil {
		return nil, err
	}
	rep.Targets = targets(rep)
	return rep, nil
}

// startCPUProfile starts a CPU profile to path and returns the function
// that stops it, which may be called more than once.
func startCPUProfile(path string) (func() error, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	var once sync.Once
	var closeErr error
	return func() error {
		once.Do(func() {
			pprof.StopCPUProfile()
			closeErr = f.Close()
		})
		return closeErr
	}, nil
}

// scenario is an endpoint under load: its requests, every answer of the
// same size.
type scenario struct {
	id   string // what --scenarios names it by
	name string
	reqs []request
}

// users of the scenarios: IDs of one length.
const scenarioUsers = 1024

func userID(i int) string { return fmt.Sprintf("user-%07d@example.com", i*7919%10_000_000) }

// bulkFeatures is how many features one POST /evaluate asks for.
const bulkFeatures = 20

func scenarios(features int) []scenario {
	get := scenario{id: "get", name: "GET /evaluate"}
	ofrep := scenario{id: "ofrep", name: "OFREP single"}
	n := min(features, bulkFeatures)
	bulk := scenario{id: "post", name: fmt.Sprintf("POST /evaluate ×%d", n)}
	keys := make([]string, n)
	for i := range keys {
		keys[i] = strconv.Quote(featureKey(i))
	}
	for i := range scenarioUsers {
		key, user := featureKey(i%features), userID(i)
		get.reqs = append(get.reqs, request{method: http.MethodGet, target: "/evaluate?feature=" + key + "&user=" + user})
		ofrep.reqs = append(ofrep.reqs, request{method: http.MethodPost, target: "/ofrep/v1/evaluate/flags/" + key,
			body: []byte(`{"context":{"targetingKey":"` + user + `"}}`)})
		bulk.reqs = append(bulk.reqs, request{method: http.MethodPost, target: "/evaluate",
			body: []byte(`{"user":"` + user + `","features":[` + strings.Join(keys, ",") + `]}`)})
	}
	return []scenario{get, bulk, ofrep}
}

// compare drives rollout and a bare server answering a body of the size of
// rollout's answers, with one client, in turns.
func compare(ctx context.Context, s *service, sc scenario, conns int, d time.Duration) (HTTPLoad, error) {
	client := newClient(conns)
	defer client.CloseIdleConnections()
	body, err := answer(ctx, client, s.url, s.evaluate, sc.reqs)
	if err != nil {
		return HTTPLoad{}, fmt.Errorf("%s: %w", sc.name, err)
	}
	base, err := serveBaseline(bare(body))
	if err != nil {
		return HTTPLoad{}, err
	}
	defer base.close()
	a, b := abba(d, func(rollout bool, d time.Duration) sample {
		if rollout {
			return drive(ctx, client, s.url, s.evaluate, sc.reqs, conns, d)
		}
		return drive(ctx, client, base.url, s.evaluate, sc.reqs, conns, d)
	})
	load := HTTPLoad{Scenario: sc.name, Connections: conns, BodyBytes: len(body), Baseline: summarize(a), Rollout: summarize(b)}
	load.RPSRatio = ratio(load.Rollout.RPS, load.Baseline.RPS)
	load.P99Ratio = ratio(load.Rollout.P99, load.Baseline.P99)
	return load, ctx.Err()
}

// answer returns rollout's answer to the first of reqs, having checked
// that a few others answer the same number of bytes.
func answer(ctx context.Context, client *http.Client, base string, header http.Header, reqs []request) ([]byte, error) {
	var first []byte
	for i := 0; i < len(reqs) && i < 16; i++ {
		r := reqs[i]
		req, err := http.NewRequestWithContext(ctx, r.method, base+r.target, bytes.NewReader(r.body))
		if err != nil {
			return nil, err
		}
		req.Header = header.Clone()
		res, err := client.Do(req)
		if err != nil {
			return nil, err
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		switch {
		case err != nil:
			return nil, err
		case res.StatusCode != http.StatusOK:
			return nil, fmt.Errorf("%s %s: %s: %s", r.method, r.target, res.Status, body)
		case first == nil:
			first = body
		case len(body) != len(first):
			return nil, fmt.Errorf("answers of %d and %d bytes: the baseline could not match them", len(first), len(body))
		}
	}
	return first, nil
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

// writer changes features through the API, one change after another, at
// most rate changes per second (0: as fast as they go), until stop is closed
// or max changes were made, and returns each change's latency. next returns
// the i-th change.
func writer(ctx context.Context, client *http.Client, s *service, stop <-chan struct{}, max int, rate float64, next func(i int) request) ([]time.Duration, error) {
	var lat []time.Duration
	start := time.Now()
	due := time.NewTimer(time.Hour)
	defer due.Stop()
	for i := range max {
		if rate > 0 {
			due.Reset(time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))))
			select {
			case <-stop:
				return lat, nil
			case <-ctx.Done():
				return lat, ctx.Err()
			case <-due.C:
			}
		}
		select {
		case <-stop:
			return lat, nil
		case <-ctx.Done():
			return lat, ctx.Err()
		default:
		}
		t0 := time.Now()
		if err := do(ctx, client, s.url, s.edit, next(i)); err != nil {
			return lat, err
		}
		lat = append(lat, time.Since(t0))
	}
	return lat, nil
}

func rateName(rate float64) string {
	if rate == 0 {
		return "as fast as they go"
	}
	return fmt.Sprintf("%g changes/s", rate)
}

// replicaChange sets bucket name of feature key, created with 100
// replicas, to 101 replicas in even rounds and back to 100 in odd ones, so
// that every change moves a few users.
func replicaChange(key, name string, round int) request {
	return request{method: http.MethodPut, target: "/api/features/" + key + "/buckets/" + name,
		body: []byte(`{"replicas":` + strconv.Itoa(101-round%2) + `}`)}
}

// maxMixedWrites bounds the changes of one phase of underWrites.
const maxMixedWrites = 1_000_000

// underWrites measures GET /evaluate at the first concurrency with and
// without an admin changing one feature after another at rate, in turns.
func underWrites(ctx context.Context, s *service, cfg config, rate float64) (Mixed, error) {
	conns := cfg.connections[0]
	get := scenarios(cfg.features)[0]
	client := newClient(conns)
	defer client.CloseIdleConnections()
	admin := newClient(1)
	defer admin.CloseIdleConnections()
	var (
		writes    int64
		writeTime time.Duration
		werr      error
	)
	idle, writing := abba(cfg.duration, func(write bool, d time.Duration) sample {
		if !write {
			return drive(ctx, client, s.url, s.evaluate, get.reqs, conns, d)
		}
		stop := make(chan struct{})
		var wg sync.WaitGroup
		var lat []time.Duration
		var err error
		t0 := time.Now()
		wg.Go(func() {
			done := int(writes) // changes of the phases before
			lat, err = writer(ctx, admin, s, stop, maxMixedWrites, rate, func(i int) request {
				j := done + i
				return replicaChange(featureKey(j%cfg.features), "A", j/cfg.features)
			})
		})
		smp := drive(ctx, client, s.url, s.evaluate, get.reqs, conns, d)
		close(stop)
		wg.Wait()
		writes += int64(len(lat))
		writeTime += time.Since(t0)
		if werr == nil {
			werr = err
		}
		return smp
	})
	if werr != nil {
		return Mixed{}, fmt.Errorf("admin writes: %w", werr)
	}
	m := Mixed{Scenario: get.name, Connections: conns, WriteRate: rate, Idle: summarize(idle), Writing: summarize(writing), Writes: writes}
	m.WritesPerS = ratio(float64(writes), writeTime.Seconds())
	m.RPSRatio = ratio(m.Writing.RPS, m.Idle.RPS)
	m.P99Ratio = ratio(m.Writing.P99, m.Idle.P99)
	return m, ctx.Err()
}

// writeLatency times bucket changes on a feature of 10 buckets × 100
// replicas, one after another, with no other load.
func writeLatency(ctx context.Context, s *service, cfg config) (Writes, error) {
	const key, buckets, replicas = "writes", 10, 100
	admin := newClient(1)
	defer admin.CloseIdleConnections()
	var list []string
	for i := range buckets {
		list = append(list, fmt.Sprintf(`{"name":"b%d","replicas":%d}`, i, replicas))
	}
	create := request{method: http.MethodPost, target: "/api/features",
		body: []byte(`{"key":"` + key + `","buckets":[` + strings.Join(list, ",") + `]}`)}
	if err := doStatus(ctx, admin, s.url, s.edit, create, http.StatusCreated); err != nil {
		return Writes{}, err
	}
	stop := make(chan struct{})
	timer := time.AfterFunc(cfg.duration, func() { close(stop) })
	defer timer.Stop()
	cpu0, err := cpuTime()
	if err != nil {
		return Writes{}, err
	}
	lat, err := writer(ctx, admin, s, stop, cfg.writes, 0, func(i int) request {
		return replicaChange(key, fmt.Sprintf("b%d", i%buckets), i/buckets)
	})
	if err != nil {
		return Writes{}, err
	}
	cpu1, err := cpuTime()
	if err != nil {
		return Writes{}, err
	}
	st := summarize(sample{requests: int64(len(lat)), latency: lat})
	return Writes{Buckets: buckets, Replicas: replicas, Changes: len(lat), P50: st.P50, P90: st.P90, P99: st.P99, Mean: st.Mean,
		CPU: ms(cpu1-cpu0) / float64(max(len(lat), 1))}, nil
}

// cpuTime returns the CPU time, user and system, this process has used.
func cpuTime() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, fmt.Errorf("getrusage: %w", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// doStatus sends one request, which must answer want.
func doStatus(ctx context.Context, client *http.Client, base string, header http.Header, r request, want int) error {
	req, err := http.NewRequestWithContext(ctx, r.method, base+r.target, bytes.NewReader(r.body))
	if err != nil {
		return err
	}
	req.Header = header.Clone()
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 1<<10))
	if res.StatusCode != want {
		return fmt.Errorf("%s %s: %s: %s", r.method, r.target, res.Status, body)
	}
	return nil
}
