package experiment

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// An experiment's history and its events' lifetime: each running
// experiment keeps one snapshot of its results a UTC day (the day's last
// reading, taken on each read of the results and by the hourly job), from
// which results draw the lift's interval over time; tracked events older
// than the retention are deleted by the same job.

// DefaultEventRetention is how long tracked events are kept by default.
const DefaultEventRetention = 90 * 24 * time.Hour

// Limits of the history and of the purge.
const (
	// MaxHistoryDays bounds the snapshots one read of results returns
	// (the most recent days).
	MaxHistoryDays = 400
	// purgeChunk is how many events one statement of the purge deletes,
	// and maxPurgeChunks how many statements one run makes: a run
	// deletes at most 1,000,000 events, each statement a short write.
	purgeChunk     = 10_000
	maxPurgeChunks = 100
)

// ResultsSnapshot is what an experiment's results said on one day: the
// lift of each bucket against the control, per metric (null: not enough
// data yet).
type ResultsSnapshot struct {
	At    time.Time                          `json:"at"`
	Lifts map[string]map[string]*LiftResults `json:"lifts"` // metric → bucket → lift
}

// LiftPoint is one day's lift of a bucket for a metric, in results'
// history.
type LiftPoint struct {
	At   time.Time    `json:"at"`
	Lift *LiftResults `json:"lift"` // null: not enough data that day
}

// SetEventRetention sets how long tracked events are kept: 0 means
// DefaultEventRetention, a negative duration forever. It must be set
// before RunEvery runs.
func (e *Experiments) SetEventRetention(d time.Duration) { e.eventRetention = d }

// retention is how long events are kept; 0: forever.
func (e *Experiments) retention() time.Duration {
	switch {
	case e.eventRetention == 0:
		return DefaultEventRetention
	case e.eventRetention < 0:
		return 0
	}
	return e.eventRetention
}

// Daily deletes the tracked events older than the retention (at most
// maxPurgeChunks×purgeChunk a run; the next run goes on) and takes today's
// snapshot of each running experiment's results.
func (e *Experiments) Daily(ctx context.Context) error {
	if _, err := e.PurgeEvents(ctx); err != nil {
		return err
	}
	for _, r := range *e.running.Load() {
		if _, err := e.Results(ctx, r.x.Feature, r.x.ID); err != nil {
			return fmt.Errorf("snapshot of experiment %s: %w", r.x.ID, err)
		}
	}
	return nil
}

// PurgeEvents deletes the tracked events older than the retention, and
// returns how many.
func (e *Experiments) PurgeEvents(ctx context.Context) (int64, error) {
	keep := e.retention()
	if keep <= 0 {
		return 0, nil
	}
	before := e.svc.Now().UTC().Add(-keep)
	var total int64
	for range maxPurgeChunks {
		n, err := e.store.PurgeTrackedEvents(ctx, before, purgeChunk)
		total += n
		if err != nil || n < purgeChunk {
			return total, err
		}
	}
	return total, nil
}

// snapshotOf is what r says of its lifts.
func snapshotOf(r ExperimentResults) ResultsSnapshot {
	snap := ResultsSnapshot{At: r.UpdatedAt, Lifts: map[string]map[string]*LiftResults{}}
	for _, b := range r.Buckets {
		if b.Control {
			continue
		}
		for metric, m := range b.Metrics {
			if snap.Lifts[metric] == nil {
				snap.Lifts[metric] = map[string]*LiftResults{}
			}
			snap.Lifts[metric][b.Bucket] = m.Lift
		}
	}
	return snap
}

// history keeps r as today's snapshot while its experiment runs, and
// fills each bucket's metrics' History from the snapshots kept.
func (e *Experiments) history(ctx context.Context, r *ExperimentResults) error {
	if r.Experiment.Status == "running" {
		data, err := json.Marshal(snapshotOf(*r))
		if err != nil {
			return err
		}
		if err := e.store.SaveResultsSnapshot(ctx, r.Experiment.ID, r.UpdatedAt, data); err != nil {
			return err
		}
	}
	snaps, err := e.store.ResultsSnapshots(ctx, r.Experiment.ID, MaxHistoryDays)
	if err != nil {
		return err
	}
	for i := range r.Buckets {
		b := &r.Buckets[i]
		for metric, m := range b.Metrics {
			m.History = []LiftPoint{}
			if !b.Control {
				for _, s := range snaps {
					if lifts, ok := s.Lifts[metric]; ok {
						m.History = append(m.History, LiftPoint{At: s.At, Lift: lifts[b.Bucket]})
					}
				}
			}
			b.Metrics[metric] = m
		}
	}
	return nil
}
