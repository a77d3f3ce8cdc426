package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// The --wrk mode measures issue #15's figures with wrk, a C load generator
// that takes less of the shared cores than the Go client does: rollout's
// evaluation endpoints against a bare net/http handler answering a body of
// the same size, in alternation, round after round, on loopback only.

// wrkInstall says how to get wrk when it is missing.
const wrkInstall = "wrk is not installed: apt-get install -y wrk (Debian, Ubuntu), brew install wrk (macOS), or build https://github.com/wg/wrk"

// wrkThreads is wrk's thread count: two, as in the measurement.
const wrkThreads = 2

// WrkLoad compares one endpoint with the bare baseline at one concurrency,
// round by round.
type WrkLoad struct {
	Scenario    string     `json:"scenario"`
	Connections int        `json:"connections"`
	BodyBytes   int        `json:"body_bytes"`
	Rounds      []WrkRound `json:"rounds"`
	// RPSRatio and P99Ratio are over the rounds' sums (requests) and
	// medians (p99).
	RPSRatio float64 `json:"rps_ratio"`
	P99Ratio float64 `json:"p99_ratio"`
	// Go is the same comparison with the tool's Go client, right after:
	// its ratios are the higher, as its client takes CPU from both sides.
	Go HTTPLoad `json:"go_client"`
}

// WrkRound is one round: the baseline and rollout, one after the other.
type WrkRound struct {
	Baseline WrkStats `json:"baseline"`
	Rollout  WrkStats `json:"rollout"`
}

// WrkStats is what wrk reported for one run. Latencies are in milliseconds.
type WrkStats struct {
	RPS float64 `json:"rps"`
	P50 float64 `json:"p50_ms"`
	P99 float64 `json:"p99_ms"`
}

// wrkScenarios are the four: GET /evaluate and OFREP of one flag,
// POST /evaluate and OFREP bulk of bulkFeatures flags.
func wrkScenarios(features int) []scenario {
	all := scenarios(features) // GET, POST bulk, OFREP single
	n := min(features, bulkFeatures)
	keys := make([]string, n)
	for i := range keys {
		keys[i] = strconv.Quote(featureKey(i))
	}
	bulk := scenario{name: fmt.Sprintf("OFREP bulk ×%d", n)}
	for i := range scenarioUsers {
		bulk.reqs = append(bulk.reqs, request{method: "POST", target: "/ofrep/v1/evaluate/flags",
			body: []byte(`{"context":{"targetingKey":"` + userID(i) + `","flags":[` + strings.Join(keys, ",") + `]}}`)})
	}
	return []scenario{all[0], all[2], all[1], bulk}
}

// runWrk measures the wrk scenarios and prints them.
func runWrk(ctx context.Context, cfg config, stdout io.Writer, progress func(string, ...any)) error {
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		return errors.New(wrkInstall)
	}
	dir, err := os.MkdirTemp("", "rollout-bench-wrk-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	progress("creating %d features", cfg.features)
	s, err := startService(ctx, dir, cfg.features)
	if err != nil {
		return fmt.Errorf("start rollout: %w", err)
	}
	defer s.close()
	stopProfile := func() error { return nil }
	if cfg.cpuProfile != "" {
		if stopProfile, err = startCPUProfile(cfg.cpuProfile); err != nil {
			return err
		}
		defer stopProfile()
	}
	var loads []WrkLoad
	for i, sc := range wrkScenarios(cfg.features) {
		script := filepath.Join(dir, fmt.Sprintf("scenario-%d.lua", i))
		if err := os.WriteFile(script, []byte(wrkScript(sc, s.evaluate.Get("Authorization"))), 0o600); err != nil {
			return err
		}
		client := newClient(1)
		body, err := answer(ctx, client, s.url, s.evaluate, sc.reqs)
		client.CloseIdleConnections()
		if err != nil {
			return fmt.Errorf("%s: %w", sc.name, err)
		}
		base, err := serveBaseline(bare(body))
		if err != nil {
			return err
		}
		for _, conns := range cfg.connections {
			progress("%s at %d connections: %d rounds of %v for the baseline, then rollout", sc.name, conns, cfg.rounds, cfg.duration)
			load := WrkLoad{Scenario: sc.name, Connections: conns, BodyBytes: len(body)}
			// A short warm-up of each, unmeasured.
			for _, url := range []string{base.url, s.url} {
				if _, err := runWrkOnce(ctx, wrk, script, url, conns, min(cfg.duration, time.Second)); err != nil {
					base.close()
					return err
				}
			}
			for range cfg.rounds {
				var r WrkRound
				if r.Baseline, err = runWrkOnce(ctx, wrk, script, base.url, conns, cfg.duration); err == nil {
					r.Rollout, err = runWrkOnce(ctx, wrk, script, s.url, conns, cfg.duration)
				}
				if err != nil {
					base.close()
					return fmt.Errorf("%s: %w", sc.name, err)
				}
				load.Rounds = append(load.Rounds, r)
			}
			load.RPSRatio, load.P99Ratio = wrkRatios(load.Rounds)
			progress("%s at %d connections: the Go client, %v for each side", sc.name, conns, cfg.duration*time.Duration(cfg.rounds))
			if load.Go, err = compare(ctx, s, sc, conns, cfg.duration*time.Duration(cfg.rounds)); err != nil {
				base.close()
				return err
			}
			loads = append(loads, load)
		}
		if err := base.close(); err != nil {
			return err
		}
	}
	if err := stopProfile(); err != nil {
		return err
	}
	if cfg.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(loads)
	}
	return writeWrkText(stdout, loads, cfg)
}

// wrkRatios returns rollout's requests/s over the baseline's, summed over
// the rounds, and the ratio of their median p99s.
func wrkRatios(rounds []WrkRound) (rps, p99 float64) {
	var a, b float64
	var pa, pb []float64
	for _, r := range rounds {
		a += r.Baseline.RPS
		b += r.Rollout.RPS
		pa = append(pa, r.Baseline.P99)
		pb = append(pb, r.Rollout.P99)
	}
	return ratio(b, a), ratio(median(pb), median(pa))
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	for i := 1; i < len(s); i++ { // few values
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// wrkScript is a wrk Lua script sending sc's requests in turn, each with
// the Authorization header auth, formatted once per wrk thread.
func wrkScript(sc scenario, auth string) string {
	var b strings.Builder
	b.WriteString("local specs = {\n")
	for _, r := range sc.reqs {
		fmt.Fprintf(&b, "  {%s, %s, %s},\n", luaString(r.method), luaString(r.target), luaString(string(r.body)))
	}
	b.WriteString("}\n")
	fmt.Fprintf(&b, "local headers = {[\"Authorization\"] = %s}\n", luaString(auth))
	b.WriteString(`local reqs = {}
local i = 0
init = function(args)
  for n, s in ipairs(specs) do
    local h = {}
    for k, v in pairs(headers) do h[k] = v end
    if s[3] ~= "" then h["Content-Type"] = "application/json" end
    if s[3] == "" then reqs[n] = wrk.format(s[1], s[2], h) else reqs[n] = wrk.format(s[1], s[2], h, s[3]) end
  end
end
request = function()
  i = i % #reqs + 1
  return reqs[i]
end
`)
	return b.String()
}

// luaString quotes s as a Lua string literal.
func luaString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '"' || c == '\\' || c < 0x20 || c >= 0x7f {
			fmt.Fprintf(&b, "\\%03d", c)
			continue
		}
		b.WriteByte(c)
	}
	b.WriteByte('"')
	return b.String()
}

// runWrkOnce runs wrk against url for d and parses its report. A run
// with socket errors or answers other than 2xx and 3xx fails.
func runWrkOnce(ctx context.Context, wrk, script, url string, conns int, d time.Duration) (WrkStats, error) {
	secs := max(1, int((d+time.Second/2)/time.Second))
	ctx, cancel := context.WithTimeout(ctx, time.Duration(secs)*time.Second+30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, wrk, "-t", strconv.Itoa(min(wrkThreads, conns)), "-c", strconv.Itoa(conns),
		"-d", strconv.Itoa(secs)+"s", "--timeout", "5s", "--latency", "-s", script, url)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return WrkStats{}, fmt.Errorf("wrk: %w: %s", err, out)
	}
	return parseWrk(string(out))
}

var (
	wrkRPS     = regexp.MustCompile(`(?m)^Requests/sec:\s+([0-9.]+)`)
	wrkPct     = regexp.MustCompile(`(?m)^\s+(50|99)%\s+([0-9.]+)(us|ms|s)\s*$`)
	wrkBad     = regexp.MustCompile(`(?m)^\s+Non-2xx or 3xx responses: (\d+)`)
	wrkSockets = regexp.MustCompile(`(?m)^\s+Socket errors: (.*)$`)
)

// parseWrk reads the requests/s and the 50th and 99th percentiles of
// wrk --latency's report.
func parseWrk(out string) (WrkStats, error) {
	if m := wrkBad.FindStringSubmatch(out); m != nil {
		return WrkStats{}, fmt.Errorf("wrk: %s answers were not 2xx or 3xx", m[1])
	}
	if m := wrkSockets.FindStringSubmatch(out); m != nil {
		return WrkStats{}, fmt.Errorf("wrk: socket errors: %s", m[1])
	}
	m := wrkRPS.FindStringSubmatch(out)
	if m == nil {
		return WrkStats{}, fmt.Errorf("wrk printed no Requests/sec: %s", out)
	}
	var st WrkStats
	st.RPS, _ = strconv.ParseFloat(m[1], 64)
	found := 0
	for _, p := range wrkPct.FindAllStringSubmatch(out, -1) {
		v, _ := strconv.ParseFloat(p[2], 64)
		switch p[3] {
		case "us":
			v /= 1000
		case "s":
			v *= 1000
		}
		if p[1] == "50" {
			st.P50 = v
		} else {
			st.P99 = v
		}
		found++
	}
	if found != 2 {
		return WrkStats{}, fmt.Errorf("wrk printed no latency distribution (--latency): %s", out)
	}
	return st, nil
}

func writeWrkText(w io.Writer, loads []WrkLoad, cfg config) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "wrk -t%d, %d rounds of %v per side, baseline then rollout in each round; then the Go client (abba) for %v per side;\nratios: rollout / baseline\n\n",
		wrkThreads, cfg.rounds, cfg.duration, cfg.duration*time.Duration(cfg.rounds))
	tw := tabwriter.NewWriter(bw, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tconns\tbytes\tbaseline req/s\trollout req/s\trps ratio\tbaseline p99 ms\trollout p99 ms\tp99 ratio\tratio by round\tGo client rps ratio\tGo p99 ratio\t")
	for _, l := range loads {
		var a, b, pa, pb []float64
		var byRound []string
		for _, r := range l.Rounds {
			a, b = append(a, r.Baseline.RPS), append(b, r.Rollout.RPS)
			pa, pb = append(pa, r.Baseline.P99), append(pb, r.Rollout.P99)
			byRound = append(byRound, fmt.Sprintf("%.2f", ratio(r.Rollout.RPS, r.Baseline.RPS)))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t%.2f\t%.2f\t\n", l.Scenario, l.Connections, l.BodyBytes,
			mean(a), mean(b), l.RPSRatio, median(pa), median(pb), l.P99Ratio, strings.Join(byRound, " "), l.Go.RPSRatio, l.Go.P99Ratio)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	return bw.Flush()
}

func mean(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return ratio(s, float64(len(v)))
}
