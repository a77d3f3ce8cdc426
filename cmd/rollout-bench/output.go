package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// targets checks the run against issue #7's targets.
func targets(rep *Report) []Target {
	var out []Target
	add := func(name string, value float64, limit string, met bool) {
		out = append(out, Target{Name: name, Value: value, Limit: limit, Met: met})
	}
	for _, l := range rep.HTTP {
		switch {
		case l.Scenario == "GET /evaluate":
			add(fmt.Sprintf("%s rps / baseline, %d conns", l.Scenario, l.Connections), l.RPSRatio, ">= 0.80", l.RPSRatio >= .8)
			add(fmt.Sprintf("%s p99 / baseline, %d conns", l.Scenario, l.Connections), l.P99Ratio, "<= 2", l.P99Ratio <= 2)
		case strings.HasPrefix(l.Scenario, "POST /evaluate"):
			add(fmt.Sprintf("%s rps / baseline, %d conns", l.Scenario, l.Connections), l.RPSRatio, ">= 0.50", l.RPSRatio >= .5)
		}
	}
	add("bucket change p50 (10 buckets × 100 replicas), ms", rep.Writes.P50, "< 5", rep.Writes.P50 < 5)
	load := rep.Startup.OpenMS + rep.Startup.LoadMS
	add(fmt.Sprintf("startup with %d features: open + load, ms", rep.Startup.Features), load, "< 2000", load < 2000)
	add(fmt.Sprintf("startup with %d features: peak RSS, MB", rep.Startup.Features), rep.Startup.PeakRSSMB, "< 300", rep.Startup.PeakRSSMB < 300)
	for _, m := range rep.Mixed {
		add(fmt.Sprintf("%s rps with an admin writing (%s) / without", m.Scenario, rateName(m.WriteRate)), m.RPSRatio, ">= 0.90", m.RPSRatio >= .9)
	}
	return out
}

func writeJSON(w io.Writer, rep *Report) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(rep)
}

func writeText(w io.Writer, rep *Report) error {
	m := rep.Machine
	fmt.Fprintf(w, "rollout-bench: %s %s/%s, %d CPUs (GOMAXPROCS %d), client and servers in one process sharing them\n",
		m.Go, m.OS, m.Arch, m.CPUs, m.GOMAXPROCS)
	fmt.Fprintf(w, "HTTP/1.1 keep-alive, closed loop, %s per side in turns (baseline, rollout, rollout, baseline), %d features, bearer token\n\n",
		rep.Settings.Duration, rep.Settings.Features)

	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tconns\tbytes\tbase rps\tp50 ms\tp90 ms\tp99 ms\trollout rps\tp50 ms\tp90 ms\tp99 ms\trps ratio\tp99 ratio\terrors\t")
	for _, l := range rep.HTTP {
		b, r := l.Baseline, l.Rollout
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.0f\t%.3f\t%.3f\t%.3f\t%.0f\t%.3f\t%.3f\t%.3f\t%.2f\t%.2f\t%d\t\n",
			l.Scenario, l.Connections, l.BodyBytes, b.RPS, b.P50, b.P90, b.P99, r.RPS, r.P50, r.P90, r.P99, l.RPSRatio, l.P99Ratio, b.Errors+r.Errors)
	}
	if err := tw.Flush(); err != nil {
		return err
	}

	fmt.Fprintln(w)
	for _, x := range rep.Mixed {
		fmt.Fprintf(w, "%s at %d conns with an admin changing features (%s): %.0f rps (p99 %.3f ms) writing, %.0f rps (p99 %.3f ms) not: ratio %.2f; %d changes, %.1f/s\n",
			x.Scenario, x.Connections, rateName(x.WriteRate), x.Writing.RPS, x.Writing.P99, x.Idle.RPS, x.Idle.P99, x.RPSRatio, x.Writes, x.WritesPerS)
	}
	wr := rep.Writes
	fmt.Fprintf(w, "bucket change through the API, %d buckets × %d replicas, %d changes: p50 %.2f ms, p90 %.2f ms, p99 %.2f ms, mean %.2f ms; %.2f ms of CPU each\n",
		wr.Buckets, wr.Replicas, wr.Changes, wr.P50, wr.P90, wr.P99, wr.Mean, wr.CPU)
	st := rep.Startup
	fmt.Fprintf(w, "startup, %d features (4 buckets × 100 replicas), new process: open %.0f ms, load %.0f ms; heap after GC %.0f MB, RSS %.0f MB, peak RSS %.0f MB (created in %.1f s beforehand)\n",
		st.Features, st.OpenMS, st.LoadMS, st.HeapAllocMB, st.RSSMB, st.PeakRSSMB, st.CreateSecs)

	fmt.Fprintln(w, "\ntargets (issue #7):")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range rep.Targets {
		verdict := "met"
		if !t.Met {
			verdict = "MISSED"
		}
		fmt.Fprintf(tw, "  %s\t%.2f\t%s\t%s\n", t.Name, t.Value, t.Limit, verdict)
	}
	return tw.Flush()
}
