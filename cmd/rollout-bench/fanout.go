package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Fanout is what --fanout measures: how long a change takes, from the
// start of the request that makes it, to reach each of Streams clients
// following GET /sync/v1/stream on one instance, over Rounds changes.
type Fanout struct {
	Streams int     `json:"streams"`
	Rounds  int     `json:"rounds"`
	Missed  int     `json:"missed"` // arrivals that did not come within fanoutWait
	P50MS   float64 `json:"p50_ms"`
	P99MS   float64 `json:"p99_ms"`
	MaxMS   float64 `json:"max_ms"`
	// EventBytes is the size of one change event as the streams got it.
	EventBytes int `json:"event_bytes"`
}

// fanoutWait bounds the wait for one change to reach every stream.
const fanoutWait = 30 * time.Second

// runFanout measures a change's fan-out to cfg.fanout streams (see
// Fanout), with cfg.rounds changes of one feature's description.
func runFanout(ctx context.Context, cfg config, stdout io.Writer, progress func(string, ...any)) (err error) {
	dir, err := os.MkdirTemp("", "rollout-bench-fanout")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	s, err := startService(ctx, dir, cfg.features)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := s.close(); err == nil {
			err = cerr
		}
	}()

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// One connection per stream, as apps have.
	client := &http.Client{Transport: &http.Transport{Proxy: nil, MaxIdleConnsPerHost: -1}}
	type arrival struct {
		stream int
		id     int64
		at     time.Time
		size   int
	}
	arrivals := make(chan arrival, cfg.fanout)
	var (
		wg    sync.WaitGroup
		hello sync.WaitGroup
	)
	defer wg.Wait()
	defer cancel()
	progress("fanout: opening %d streams", cfg.fanout)
	hello.Add(cfg.fanout)
	openErr := make(chan error, cfg.fanout)
	for i := range cfg.fanout {
		wg.Go(func() {
			said := false
			defer func() {
				if !said {
					hello.Done()
				}
			}()
			req, err := http.NewRequestWithContext(ctx, "GET", s.url+"/sync/v1/stream", nil)
			if err != nil {
				openErr <- err
				return
			}
			req.Header = s.evaluate.Clone()
			res, err := client.Do(req)
			if err != nil {
				openErr <- err
				return
			}
			defer res.Body.Close()
			if res.StatusCode != http.StatusOK {
				openErr <- fmt.Errorf("GET /sync/v1/stream: %s", res.Status)
				return
			}
			sc := bufio.NewScanner(res.Body)
			sc.Buffer(make([]byte, 0, 64<<10), 8<<20)
			var (
				event string
				id    int64
				size  int
			)
			for sc.Scan() {
				line := sc.Text()
				switch {
				case line == "":
					switch event {
					case "hello":
						said = true
						hello.Done()
					case "change":
						select {
						case arrivals <- arrival{stream: i, id: id, at: time.Now(), size: size}:
						case <-ctx.Done():
							return
						}
					}
					event, size = "", 0
				case strings.HasPrefix(line, "event: "):
					event = line[len("event: "):]
				case strings.HasPrefix(line, "id: "):
					id, _ = strconv.ParseInt(line[len("id: "):], 10, 64)
				case strings.HasPrefix(line, "data: "):
					size = len(line) - len("data: ")
				}
			}
		})
	}
	hello.Wait()
	select {
	case err := <-openErr:
		return fmt.Errorf("fanout: %w", err)
	default:
	}

	edit := &http.Client{Transport: &http.Transport{Proxy: nil}}
	var lat []time.Duration
	rep := Fanout{Streams: cfg.fanout, Rounds: cfg.rounds}
	for round := range cfg.rounds {
		body, _ := json.Marshal(map[string]any{"description": fmt.Sprintf("fanout round %d", round)})
		start := time.Now()
		if err := doStatus(ctx, edit, s.url, s.edit, request{"PATCH", "/api/features/" + featureKey(0), body}, http.StatusOK); err != nil {
			return fmt.Errorf("fanout: %w", err)
		}
		got := 0
		timeout := time.After(fanoutWait)
	wait:
		for got < cfg.fanout {
			select {
			case a := <-arrivals:
				got++
				lat = append(lat, a.at.Sub(start))
				rep.EventBytes = a.size
			case <-timeout:
				break wait
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		rep.Missed += cfg.fanout - got
		progress("fanout: round %d reached %d of %d streams", round+1, got, cfg.fanout)
	}
	if len(lat) == 0 {
		return fmt.Errorf("fanout: no change reached any stream")
	}
	slices.Sort(lat)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	rep.P50MS, rep.P99MS, rep.MaxMS = ms(lat[len(lat)/2]), ms(lat[len(lat)*99/100]), ms(lat[len(lat)-1])
	if cfg.json {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	_, err = fmt.Fprintf(stdout, "a change to %d streams on one instance, %d rounds: p50 %.1f ms, p99 %.1f ms, max %.1f ms, %d missed; event %d bytes\n",
		rep.Streams, rep.Rounds, rep.P50MS, rep.P99MS, rep.MaxMS, rep.Missed, rep.EventBytes)
	return err
}
