package experiment

import (
	"context"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/stats"
)

// ResultsMethod names the test of ExperimentResults (see stats.Sequential).
const ResultsMethod = "msprt: always-valid mixture sequential probability ratio test of the relative lift, normal mixture with tau = 0.1, alpha = 0.05"

// resultsTTL is how long one read of an experiment's results is served
// again: reading 1,000,000 users' figures costs seconds of a database, and
// results move slowly.
const resultsTTL = 30 * time.Second

// maxResultReads bounds the reads of results that run at once; others
// wait for a turn (or their request's end).
const maxResultReads = 2

// ExperimentResults are an experiment's figures per bucket and their
// comparison with the control.
type ExperimentResults struct {
	Experiment Experiment      `json:"experiment"`
	Buckets    []BucketResults `json:"buckets"`
	// SRM is the sample-ratio check of the users per bucket against the
	// shares the experiment started with (null: nothing to test).
	SRM               *stats.SRM `json:"srm"`
	MultipleExposures int64      `json:"multiple_exposures"`
	// DroppedExposures is how many first exposures could not be recorded
	// (stored, and those of this instance not yet stored): users left out
	// unless served again. Not 0: the results may be biased.
	DroppedExposures int64     `json:"dropped_exposures"`
	Method           string    `json:"method"`
	UpdatedAt        time.Time `json:"updated_at"`
}

// BucketResults are one bucket's users and figures per metric.
type BucketResults struct {
	Bucket  string                   `json:"bucket"`
	Control bool                     `json:"control"`
	Users   int64                    `json:"users"`
	Metrics map[string]MetricResults `json:"metrics"`
}

// MetricResults are one bucket's figures for one metric. Rate is the share
// of users converted (conversion metrics), Mean the mean per user (for
// conversions, the rate). CI is Mean's always-valid interval; Lift the
// relative difference from the control's mean with its interval (null for
// the control, and until both have stats.MinUsers users). NotEnoughData
// says the figures cannot be compared yet.
type MetricResults struct {
	UsersConverted int64        `json:"users_converted"`
	Rate           *float64     `json:"rate"`
	Mean           float64      `json:"mean"`
	CI             *[2]float64  `json:"ci"`
	Lift           *LiftResults `json:"lift"`
	Significant    bool         `json:"significant"`
	NotEnoughData  bool         `json:"not_enough_data"`
	// Better says whether a significant lift goes the metric's way
	// (higher_is_better).
	Better *bool `json:"better,omitempty"`
	// History is the lift and its interval as read each day, oldest
	// first, today's last (empty for the control).
	History []LiftPoint `json:"history"`
}

// LiftResults is a relative lift and its always-valid interval.
type LiftResults struct {
	Value float64    `json:"value"`
	CI    [2]float64 `json:"ci"`
}

// resultsCache keeps each experiment's last results for resultsTTL, while
// this instance has stored no exposures or events since (writes: see
// Experiments.wrote).
type resultsCache struct {
	mu    sync.Mutex
	byID  map[string]cachedResults
	turns chan struct{}
	once  sync.Once
}

type cachedResults struct {
	r      ExperimentResults
	writes int64
}

// Results returns the results of the experiment id of the feature key,
// counted at most resultsTTL ago.
func (e *Experiments) Results(ctx context.Context, key, id string) (ExperimentResults, error) {
	x, err := e.Get(ctx, key, id)
	if err != nil {
		return ExperimentResults{}, err
	}
	now := e.svc.Now().UTC()
	c := &e.results
	c.once.Do(func() { c.turns = make(chan struct{}, maxResultReads) })
	writes := e.wrote.Load()
	c.mu.Lock()
	cached, ok := c.byID[id]
	c.mu.Unlock()
	if ok && now.Sub(cached.r.UpdatedAt) < resultsTTL && cached.r.Experiment.Status == x.Status && cached.writes == writes {
		return cached.r, nil
	}
	select {
	case c.turns <- struct{}{}:
		defer func() { <-c.turns }()
	case <-ctx.Done():
		return ExperimentResults{}, feature.Errorf(feature.EUnavailable, "results are being read for other requests: try again")
	}
	if err := e.Flush(ctx); err != nil {
		return ExperimentResults{}, err
	}
	writes = e.wrote.Load()                       // after the flush
	if x, err = e.Get(ctx, key, id); err != nil { // with the drops flushed
		return ExperimentResults{}, err
	}
	r, err := e.compute(ctx, x, now)
	if err != nil {
		return ExperimentResults{}, err
	}
	r.DroppedExposures = x.DroppedExposures + e.pendingDrops(x.ID)
	if err := e.history(ctx, &r); err != nil {
		return ExperimentResults{}, err
	}
	c.mu.Lock()
	if c.byID == nil || len(c.byID) >= 256 {
		c.byID = map[string]cachedResults{}
	}
	c.byID[id] = cachedResults{r: r, writes: writes}
	c.mu.Unlock()
	return r, nil
}

// compute reads and compares the figures of x.
func (e *Experiments) compute(ctx context.Context, x Experiment, now time.Time) (ExperimentResults, error) {
	users, multiple, err := e.store.ExperimentUsers(ctx, x.ID)
	if err != nil {
		return ExperimentResults{}, err
	}
	until := now
	if x.StoppedAt != nil {
		until = *x.StoppedAt
	}
	res := ExperimentResults{Experiment: x, MultipleExposures: multiple, Method: ResultsMethod, UpdatedAt: now}
	names := slices.Sorted(maps.Keys(x.Shares))
	for name := range users {
		if _, ok := x.Shares[name]; !ok {
			names = append(names, name) // served by an override or a rule outside the shares
		}
	}
	slices.Sort(names)
	byName := map[string]*BucketResults{}
	for _, name := range names {
		res.Buckets = append(res.Buckets, BucketResults{Bucket: name, Control: name == x.Control, Users: users[name], Metrics: map[string]MetricResults{}})
	}
	for i := range res.Buckets {
		byName[res.Buckets[i].Bucket] = &res.Buckets[i]
	}
	for _, key := range x.Metrics {
		m, err := e.store.Metric(ctx, key)
		if feature.ErrorCode(err) == feature.ENotFound {
			continue // deleted since the experiment stopped
		}
		if err != nil {
			return ExperimentResults{}, err
		}
		totals, err := e.store.ExperimentTotals(ctx, x.ID, key, until)
		if err != nil {
			return ExperimentResults{}, err
		}
		samples := map[string]stats.Sample{}
		converts := map[string]int64{}
		var sum float64
		var n int64
		for _, t := range totals {
			s := stats.Sample{N: t.Users, Sum: t.Sum, SumSq: t.SumSq}
			if m.Kind == MetricConversion {
				s.Sum, s.SumSq = float64(t.Converts), float64(t.Converts)
			}
			samples[t.Bucket], converts[t.Bucket] = s, t.Converts
			sum += s.Sum
			n += s.N
		}
		scale := 0.0
		if n > 0 {
			scale = sum / float64(n)
		}
		control := samples[x.Control]
		control.N = users[x.Control]
		for name, b := range byName {
			s := samples[name]
			s.N = b.Users
			mr := MetricResults{UsersConverted: converts[name], Mean: s.Mean()}
			if m.Kind == MetricConversion {
				rate := s.Mean()
				mr.Rate = &rate
			}
			iv, ok := stats.MeanInterval(s, scale)
			if ok {
				mr.CI = &[2]float64{iv.Lo, iv.Hi}
			}
			if name != x.Control {
				lift, ok2 := stats.Sequential(control, s)
				if ok2 {
					mr.Lift = &LiftResults{Value: lift.Value, CI: [2]float64{lift.CI.Lo, lift.CI.Hi}}
					mr.Significant = lift.Significant
					if lift.Significant {
						better := (lift.Value > 0) == m.HigherIsBetter
						mr.Better = &better
					}
				}
				ok = ok && ok2
			}
			mr.NotEnoughData = !ok
			if math.IsNaN(mr.Mean) {
				mr.Mean = 0
			}
			b.Metrics[key] = mr
		}
	}
	if r, ok := stats.CheckSRM(x.Version, users, x.Shares); ok {
		res.SRM = &r
	}
	return res, nil
}
