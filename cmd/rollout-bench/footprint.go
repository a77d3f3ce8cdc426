package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rollout/rollout/api/client"
	"github.com/rollout/rollout/ring"
	"github.com/rollout/rollout/rollout/feature"
)

// With --footprint the tool measures what --features features cost a
// server and an in-app client at start (issue #21: 1,000 fine features in
// at most 150 MB and under 2 s each): it seeds a SQLite file with them,
// builds and starts the real binary (rollout serve) on it, times it from
// its start to its first 200 on /readyz and reads its VmRSS and VmHWM
// from /proc; then it starts a client process (this program started again
// with clientEnv set), which runs client.New against that server, and
// times and reads it the same way, and the server again after it has
// served the client's snapshot.

// clientEnv makes this program an in-app client: "URL TOKEN". It prints
// its figures as a line of JSON once client.New has returned, then waits
// until its standard input closes.
const clientEnv = "ROLLOUT_BENCH_CLIENT"

// footprintStart bounds how long a process may take to be ready.
const footprintStart = time.Minute

// Process is what one process costs at start.
type Process struct {
	Name string `json:"name"`
	// ReadyMS is the time from starting the process to its being ready:
	// the first 200 of GET /readyz for the server, the return of
	// client.New (snapshot loaded) for the client.
	ReadyMS float64 `json:"ready_ms"`
	// CPUMS is the CPU time (user and system, all threads) the process had
	// used when it was ready: what its start costs whatever else the
	// machine is doing, where ReadyMS grows with the machine's load.
	CPUMS float64 `json:"cpu_ms"`
	// RSSMB and PeakRSSMB are VmRSS and VmHWM of /proc/PID/status, in MiB,
	// read once it is ready.
	RSSMB     float64 `json:"rss_mb"`
	PeakRSSMB float64 `json:"peak_rss_mb"`
	Features  int     `json:"features,omitempty"`
}

// Footprint is the --footprint measurement.
type Footprint struct {
	Features int  `json:"features"`
	Fine     bool `json:"fine"`
	// Points and MaxErrorPoints describe each feature's ring: its points
	// and the largest miss of a share from 50 %, in percentage points.
	Points         int       `json:"points"`
	MaxErrorPoints float64   `json:"max_error_points"`
	SeedSecs       float64   `json:"seed_secs"`
	Processes      []Process `json:"processes"`
}

// runFootprint runs the --footprint measurement and prints it.
func runFootprint(ctx context.Context, cfg config, stdout io.Writer, progress func(string, ...any)) error {
	dir, err := os.MkdirTemp("", "rollout-bench-footprint-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	fp := Footprint{Features: cfg.features, Fine: cfg.fine}
	for _, b := range featureBuckets {
		fp.Points += b.Replicas
	}
	fp.MaxErrorPoints = bucketsError(featureBuckets) * 100

	bin := cfg.rolloutBinary
	if bin == "" {
		bin = filepath.Join(dir, "rollout")
		progress("building the rollout binary")
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/rollout/rollout/cmd/rollout")
		if out, err := build.CombinedOutput(); err != nil {
			return fmt.Errorf("go build of cmd/rollout (run the tool inside the repository, or give --rollout-binary): %w: %s", err, out)
		}
	}

	progress("creating %d features of %d points", cfg.features, fp.Points)
	path := filepath.Join(dir, "rollout.db")
	var tokens service
	t0 := time.Now()
	if err := populate(ctx, path, cfg.features, false, &tokens); err != nil {
		return err
	}
	fp.SeedSecs = time.Since(t0).Seconds()

	addr, err := freeAddr()
	if err != nil {
		return err
	}
	progress("starting %s serve", bin)
	srv := exec.Command(bin, "serve", "--db", path, "--addr", addr, "--log-requests", "none")
	srv.Stdout, srv.Stderr = io.Discard, io.Discard
	start := time.Now()
	if err := srv.Start(); err != nil {
		return err
	}
	defer func() {
		srv.Process.Kill()
		srv.Wait()
	}()
	url := "http://" + addr
	if err := waitReady(ctx, url+"/readyz"); err != nil {
		return fmt.Errorf("rollout serve: %w", err)
	}
	server := Process{Name: "server (rollout serve), ready", ReadyMS: ms(time.Since(start)), Features: cfg.features}
	cpu, err := processCPU(srv.Process.Pid)
	if err != nil {
		return err
	}
	server.CPUMS = ms(cpu)
	if server.RSSMB, server.PeakRSSMB, err = pidMemory(srv.Process.Pid); err != nil {
		return err
	}
	fp.Processes = append(fp.Processes, server)

	progress("starting an in-app client")
	cl, err := startClient(ctx, url, strings.TrimPrefix(tokens.evaluate.Get("Authorization"), "Bearer "))
	if err != nil {
		return err
	}
	fp.Processes = append(fp.Processes, cl)
	after := Process{Name: "server, after serving the client", Features: cfg.features}
	if after.RSSMB, after.PeakRSSMB, err = pidMemory(srv.Process.Pid); err != nil {
		return err
	}
	fp.Processes = append(fp.Processes, after)

	if cfg.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(fp)
	}
	return writeFootprintText(stdout, fp)
}

// bucketsError returns the largest miss of a bucket's share from an equal
// share.
func bucketsError(buckets []feature.Bucket) float64 {
	var worst float64
	rbs := make([]ring.Bucket, len(buckets))
	for i, b := range buckets {
		rbs[i] = ring.Bucket{Name: b.Name, Replicas: b.Replicas}
	}
	r, err := ring.New(rbs...)
	if err != nil {
		return 1
	}
	for _, share := range r.Shares() {
		worst = max(worst, abs(share-1/float64(len(buckets))))
	}
	return worst
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// freeAddr returns a loopback address with a port no one listens on.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", loopback)
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// waitReady asks url every 5 ms until it answers 200, for footprintStart
// at most.
func waitReady(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, footprintStart)
	defer cancel()
	hc := &http.Client{Timeout: time.Second}
	for {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return err
		}
		if res, err := hc.Do(req); err == nil {
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready after %v", footprintStart)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// startClient starts the client process, waits for its figures and stops
// it.
func startClient(ctx context.Context, url, token string) (Process, error) {
	exe, err := os.Executable()
	if err != nil {
		return Process{}, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), clientEnv+"="+url+" "+token)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return Process{}, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return Process{}, err
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return Process{}, err
	}
	defer func() {
		stdin.Close()
		cmd.Wait()
	}()
	lines := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		lines <- line
		io.Copy(io.Discard, stdout)
	}()
	timer := time.NewTimer(footprintStart)
	defer timer.Stop()
	var line string
	select {
	case line = <-lines:
	case <-timer.C:
		cmd.Process.Kill()
		return Process{}, fmt.Errorf("client not ready after %v", footprintStart)
	case <-ctx.Done():
		cmd.Process.Kill()
		return Process{}, ctx.Err()
	}
	ready := time.Since(start)
	var p Process
	if err := json.Unmarshal([]byte(line), &p); err != nil {
		return Process{}, fmt.Errorf("client process printed %q: %w", line, err)
	}
	p.ReadyMS = ms(ready)
	return p, nil
}

// clientMain is the client process: it starts a client.Client on the
// server "URL TOKEN" names, prints its figures once New has returned and
// waits until stdin closes. It returns the exit code.
func clientMain(spec string, stdin io.Reader, stdout, stderr io.Writer) int {
	url, token, ok := strings.Cut(spec, " ")
	if !ok {
		fmt.Fprintf(stderr, "%s: want \"URL TOKEN\", got %q\n", clientEnv, spec)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), footprintStart)
	defer cancel()
	c, err := client.New(ctx, client.Config{URL: url, Token: token})
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer c.Close()
	p := Process{Name: "in-app client (client.New), ready", Features: c.Snapshot().Len()}
	cpu, err := processCPU(os.Getpid())
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	p.CPUMS = ms(cpu)
	if p.RSSMB, p.PeakRSSMB, err = pidMemory(os.Getpid()); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if err := json.NewEncoder(stdout).Encode(p); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	io.Copy(io.Discard, stdin)
	return 0
}

// pidMemory returns VmRSS and VmHWM of process pid, in MiB.
func pidMemory(pid int) (rss, peak float64, err error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	found := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("/proc/%d/status %s: %w", pid, name, err)
		}
		found++
		if name == "VmRSS" {
			rss = float64(kb) / 1024
		} else {
			peak = float64(kb) / 1024
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	if found != 2 {
		return 0, 0, errors.New("/proc/" + strconv.Itoa(pid) + "/status: no VmRSS and VmHWM")
	}
	return rss, peak, nil
}

func writeFootprintText(w io.Writer, fp Footprint) error {
	kind := "coarse (4 buckets × 100 replicas)"
	if fp.Fine {
		kind = fmt.Sprintf("fine (50/50, %d points, within %.3f points)", fp.Points, fp.MaxErrorPoints)
	}
	fmt.Fprintf(w, "%d features, %s; seeded in %.1f s\n\n", fp.Features, kind, fp.SeedSecs)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "process\tready ms\tCPU ms\tRSS MB\tpeak RSS MB\tgoal")
	for _, p := range fp.Processes {
		ready, cpu := fmt.Sprintf("%.0f", p.ReadyMS), fmt.Sprintf("%.0f", p.CPUMS)
		if p.ReadyMS == 0 {
			ready, cpu = "-", "-"
		}
		met := p.PeakRSSMB <= 150 && (p.ReadyMS == 0 || p.ReadyMS < 2000)
		goal := "met (<= 150 MB, < 2 s)"
		if !met {
			goal = "MISSED (<= 150 MB, < 2 s)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.1f\t%.1f\t%s\n", p.Name, ready, cpu, p.RSSMB, p.PeakRSSMB, goal)
	}
	return tw.Flush()
}
