package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sync"
	"time"
)

// maxPhaseRequests bounds the requests of one phase, whatever its duration.
const maxPhaseRequests = 50_000_000

// maxPhaseErrors stops a phase whose requests keep failing.
const maxPhaseErrors = 1000

// request is one request of a scenario; target is its path and query.
type request struct {
	method, target string
	body           []byte
}

// newClient returns the keep-alive client of one scenario: at most conns
// connections per server, all kept open, and no proxy, so that requests go
// to the loopback address they name and nowhere else.
func newClient(conns int) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:               nil,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConns:        2 * conns,
			MaxIdleConnsPerHost: conns,
			MaxConnsPerHost:     conns,
			IdleConnTimeout:     time.Minute,
			DisableCompression:  true,
		},
		Timeout: 30 * time.Second,
	}
}

// sample is what one phase of load measured.
type sample struct {
	requests int64
	errors   int64
	firstErr error
	elapsed  time.Duration
	latency  []time.Duration
}

func (s *sample) add(o sample) {
	s.requests += o.requests
	s.errors += o.errors
	if s.firstErr == nil {
		s.firstErr = o.firstErr
	}
	s.elapsed += o.elapsed
	s.latency = append(s.latency, o.latency...)
}

// drive sends reqs in turn to base from conns closed-loop workers, each
// sending its next request as soon as the last is answered, until d has
// passed or maxPhaseRequests were sent. Requests under way at the deadline
// finish and count, so that no connection is cut. An answer other than 200,
// or a failed request, is an error. header is sent with every request.
func drive(ctx context.Context, client *http.Client, base string, header http.Header, reqs []request, conns int, d time.Duration) sample {
	deadline := time.Now().Add(d)
	perWorker := int64(maxPhaseRequests / conns)
	out := make([]sample, conns)
	var wg sync.WaitGroup
	start := time.Now()
	for w := range conns {
		wg.Go(func() {
			s := &out[w]
			s.latency = make([]time.Duration, 0, 4096)
			for i := w; s.requests < perWorker && s.errors < maxPhaseErrors; i += conns {
				t0 := time.Now()
				if !t0.Before(deadline) || ctx.Err() != nil {
					return
				}
				err := do(ctx, client, base, header, reqs[i%len(reqs)])
				s.requests++
				if err != nil {
					s.errors++
					if s.firstErr == nil {
						s.firstErr = err
					}
					continue
				}
				s.latency = append(s.latency, time.Since(t0))
			}
		})
	}
	wg.Wait()
	var total sample
	for _, s := range out {
		total.add(s)
	}
	total.elapsed = time.Since(start)
	return total
}

// do sends one request and reads the whole answer, which must be 200.
func do(ctx context.Context, client *http.Client, base string, header http.Header, r request) error {
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, base+r.target, body)
	if err != nil {
		return err
	}
	for k, v := range header {
		req.Header[k] = v
	}
	if r.body != nil {
		req.Header["Content-Type"] = []string{"application/json"}
	}
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(res.Body, 512))
		return fmt.Errorf("%s %s: %s: %s", r.method, r.target, res.Status, bytes.TrimSpace(msg))
	}
	_, err = io.Copy(io.Discard, res.Body)
	return err
}

// Stats summarize a sample. Latencies are in milliseconds.
type Stats struct {
	Requests int64   `json:"requests"`
	Errors   int64   `json:"errors"`
	RPS      float64 `json:"rps"`
	P50      float64 `json:"p50_ms"`
	P90      float64 `json:"p90_ms"`
	P99      float64 `json:"p99_ms"`
	Mean     float64 `json:"mean_ms"`
	Error    string  `json:"first_error,omitempty"`
}

func summarize(s sample) Stats {
	st := Stats{Requests: s.requests, Errors: s.errors}
	if s.firstErr != nil {
		st.Error = s.firstErr.Error()
	}
	if s.elapsed > 0 {
		st.RPS = float64(s.requests) / s.elapsed.Seconds()
	}
	if len(s.latency) == 0 {
		return st
	}
	slices.Sort(s.latency)
	pct := func(p float64) float64 {
		i := min(int(p*float64(len(s.latency))), len(s.latency)-1)
		return ms(s.latency[i])
	}
	var sum time.Duration
	for _, d := range s.latency {
		sum += d
	}
	st.P50, st.P90, st.P99 = pct(.50), pct(.90), pct(.99)
	st.Mean = ms(sum / time.Duration(len(s.latency)))
	return st
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// abba runs phase a, b, b, a, each for half of d, after a warm-up of each,
// so that both sides see the same drift of a shared machine; it returns the
// samples of a and of b. phase runs one side for a given time.
func abba(d time.Duration, phase func(b bool, d time.Duration) sample) (sample, sample) {
	warm := min(d/5, time.Second)
	phase(false, warm)
	phase(true, warm)
	var a, b sample
	a.add(phase(false, d/2))
	b.add(phase(true, d/2))
	b.add(phase(true, d-d/2))
	a.add(phase(false, d-d/2))
	return a, b
}
