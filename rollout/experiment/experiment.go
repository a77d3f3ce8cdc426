package experiment

import (
	"context"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/rollout/rollout/ring"
	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/feature"
)

// Experiments (issue #33) measure which bucket of a feature wins on
// metrics that apps report (POST /api/track), counted in users: while an
// experiment runs on a feature, the first exposure of each user it serves
// (hashed, see UserHash) is recorded with its bucket; a user later served
// another bucket is a multiple exposure, left out of the results. Results
// compare each bucket with the control by an always-valid test
// (stats.Sequential), so that they may be read every day.

// MetricKind is how a metric's events are read.
type MetricKind string

// The kinds of metrics.
const (
	// MetricConversion: the share of users with at least one event after
	// their first exposure.
	MetricConversion MetricKind = "conversion"
	// MetricMean: the mean per user of the sum of the values of their
	// events after their first exposure (users without events count 0).
	MetricMean MetricKind = "mean"
)

// Metric is what an experiment measures.
type Metric struct {
	Key            string     `json:"key"`
	Kind           MetricKind `json:"kind"`
	Description    string     `json:"description"`
	HigherIsBetter bool       `json:"higher_is_better"`
	CreatedAt      time.Time  `json:"created_at"`
	CreatedBy      string     `json:"created_by"`
}

// Limits of metrics, events and experiments.
const (
	MaxMetrics            = 1_000 // metrics a server keeps
	MaxMetricsPerTest     = 10    // metrics one experiment reads
	MaxTrackBatch         = 1_000 // events one POST /api/track holds
	MaxTrackValue         = 1e9   // the magnitude of an event's value
	MaxTrackAge           = 7 * 24 * time.Hour
	MaxTrackAhead         = 5 * time.Minute // clocks apps may be ahead by
	MaxTrackUser          = 256             // bytes of a user ID
	maxDescription        = 2_000
	maxExperimentName     = 200
	maxRecordedUsers      = 1 << 18 // users an instance remembers per experiment (see recorder)
	maxPendingExposures   = 1 << 17 // first exposures waiting for a flush
	maxFirstExposureChunk = 1_000
)

// Validate reports what is wrong with a new metric, as an EInvalid *Error.
func (m Metric) Validate() error {
	switch {
	case !feature.ValidKey(m.Key):
		return feature.Errorf(feature.EInvalid, "metric key %q is invalid: use a feature key's form (letters, digits, '_', '-', '.', 1 to 64)", feature.Abbreviate(m.Key))
	case m.Kind != MetricConversion && m.Kind != MetricMean:
		return feature.Errorf(feature.EInvalid, "metric kind %q is invalid: use \"conversion\" or \"mean\"", feature.Abbreviate(string(m.Kind)))
	case len(m.Description) > maxDescription || !utf8.ValidString(m.Description):
		return feature.Errorf(feature.EInvalid, "a metric's description is at most %d bytes of UTF-8", maxDescription)
	}
	return nil
}

// TrackedEvent is one event an app reports for a metric: the user it
// happened to (kept only as UserHash), its value and when.
type TrackedEvent struct {
	Metric   string
	User     string
	UserHash int64
	Value    float64
	At       time.Time
}

// UserHash is how experiments keep a user: the first 8 bytes of the MD5 of
// "user:" and the user ID, as overrides hash theirs (feature.OverrideHash),
// as a signed 64-bit number. Two of a million users share one with a
// chance of about 3 in 100 million.
func UserHash(user string) int64 {
	return int64(ring.HashPrefixed("user:", user).Hi)
}

// Experiment is an experiment on one feature row (so one environment):
// the buckets it compares are those the feature served when it started
// (Shares), each against Control.
type Experiment struct {
	ID         string             `json:"id"`
	Feature    string             `json:"feature"`
	FeatureID  string             `json:"-"`
	Name       string             `json:"name"`
	Control    string             `json:"control"`
	Metrics    []string           `json:"metrics"`
	Hypothesis string             `json:"hypothesis"`
	Version    int                `json:"version"`
	Shares     map[string]float64 `json:"shares"`
	Status     string             `json:"status"` // running or stopped
	StartedAt  time.Time          `json:"started_at"`
	StartedBy  string             `json:"started_by"`
	StoppedAt  *time.Time         `json:"stopped_at"`
	StoppedBy  string             `json:"stopped_by,omitempty"`
	// DroppedExposures is how many first exposures instances could not
	// record (their queue was full while the store was unreachable): the
	// users left out of the results unless served again.
	DroppedExposures int64 `json:"dropped_exposures"`
}

// FirstExposure is a user's first exposure in an experiment: the bucket
// and version served, and when. A store that holds one for the user
// already keeps the first, and marks the user a multiple exposure when
// the buckets differ.
type FirstExposure struct {
	Experiment string
	UserHash   int64
	Bucket     string
	Version    int
	At         time.Time
}

// BucketTotals are an experiment's figures of one bucket for one metric:
// its users (multiple exposures left out), those with at least one event
// after their first exposure, and the sum and sum of squares of the
// per-user sums of the events' values.
type BucketTotals struct {
	Bucket          string
	Users, Converts int64
	Sum, SumSq      float64
}

// ExperimentStore is what Experiments need of their storage. Package store
// implements it.
type ExperimentStore interface {
	// CreateMetric stores m; EConflict when its key exists, EInvalid when
	// MaxMetrics exist. The write methods record their ev, unless it has
	// no Kind, in the audit trail, in the same transaction.
	CreateMetric(ctx context.Context, m Metric, ev audit.Event) error
	Metrics(ctx context.Context) ([]Metric, error)
	// Metric returns one metric, or ENotFound.
	Metric(ctx context.Context, key string) (Metric, error)
	// DeleteMetric deletes a metric and its events: ENotFound when there
	// is none, EConflict while a running experiment reads it.
	DeleteMetric(ctx context.Context, key string, ev audit.Event) error
	// AddTrackBatch stores events at most once per batch ID, as
	// ExposureStore.AddExposureBatch counts exposures: false when the ID
	// was seen in the ExposureBatchMemory before at.
	AddTrackBatch(ctx context.Context, batch string, at time.Time, events []TrackedEvent) (bool, error)
	// StartExperiment stores a running experiment: EConflict when one
	// runs on its feature row, ENotFound when the row is gone.
	StartExperiment(ctx context.Context, x Experiment, ev audit.Event) error
	// StopExperiment stops the running experiment id of the feature row
	// featureID: ENotFound when there is none, EConflict when it stopped.
	StopExperiment(ctx context.Context, featureID, id string, at time.Time, actor string, ev audit.Event) (Experiment, error)
	// Experiments returns those of a feature row, newest first.
	Experiments(ctx context.Context, featureID string) ([]Experiment, error)
	Experiment(ctx context.Context, featureID, id string) (Experiment, error)
	// RunningExperiments returns every running experiment.
	RunningExperiments(ctx context.Context) ([]Experiment, error)
	// AddFirstExposures records first exposures (see FirstExposure);
	// those of experiments that no longer exist are dropped.
	AddFirstExposures(ctx context.Context, xs []FirstExposure) error
	// ExperimentUsers returns the users of an experiment per bucket,
	// multiple exposures left out, and how many those are.
	ExperimentUsers(ctx context.Context, id string) (map[string]int64, int64, error)
	// ExperimentTotals returns the figures of each bucket with users for
	// a metric, counting events from each user's first exposure up to
	// until.
	ExperimentTotals(ctx context.Context, id, metric string, until time.Time) ([]BucketTotals, error)
	// AddDroppedExposures adds to each experiment's DroppedExposures (by
	// ID); those of experiments that no longer exist are dropped.
	AddDroppedExposures(ctx context.Context, dropped map[string]int64) error
	// PurgeTrackedEvents deletes at most limit tracked events from
	// before before (of the store's environment), oldest first, and
	// returns how many it deleted.
	PurgeTrackedEvents(ctx context.Context, before time.Time, limit int) (int64, error)
	// SaveResultsSnapshot keeps results (JSON) as the experiment's
	// snapshot of the UTC day of at, replacing the day's earlier one.
	SaveResultsSnapshot(ctx context.Context, id string, at time.Time, results []byte) error
	// ResultsSnapshots returns the experiment's snapshots, one a day,
	// oldest first: the last limit days that have one.
	ResultsSnapshots(ctx context.Context, id string, limit int) ([]ResultsSnapshot, error)
}

// Experiments runs the experiments of a Service's features.
type Experiments struct {
	store ExperimentStore
	svc   *rollout.Service

	// running are the recorders of the running experiments by feature
	// row ID; never nil once NewExperiments returns.
	running atomic.Pointer[map[string]*recorder]
	hooked  atomic.Pointer[feature.ServedHook]

	mu      sync.Mutex // guards pending and droppedBy
	pending []FirstExposure
	dropped atomic.Int64
	// droppedBy are the first exposures dropped per experiment ID and
	// not yet added to the store's (Flush).
	droppedBy map[string]int64
	// lastDaily is when the job last purged events and took snapshots.
	lastDaily time.Time
	// maxPending bounds pending (maxPendingExposures but in tests).
	maxPending int
	// eventRetention: see SetEventRetention.
	eventRetention time.Duration

	// refreshed is set once the running experiments were read (Refresh).
	refreshed atomic.Bool

	results resultsCache
	// wrote counts the writes of exposures and events this instance made:
	// cached results older than the last are read again.
	wrote atomic.Int64
}

// recorder records the first exposures of one running experiment that
// this instance serves. It remembers the bucket of up to maxRecordedUsers
// users so that their next evaluations cost a map look-up; past that it
// forgets them all and starts again (the store keeps the first exposure
// whatever is sent again).
type recorder struct {
	x      Experiment
	shards [recorderShards]recorderShard
}

// recorderShards spreads a recorder's users over locks of their own, so
// that evaluations on many cores rarely wait for each other.
const recorderShards = 16

type recorderShard struct {
	mu   sync.Mutex
	seen map[int64]string
}

func newRecorder(x Experiment) *recorder {
	r := &recorder{x: x}
	for i := range r.shards {
		r.shards[i].seen = map[int64]string{}
	}
	return r
}

// NewExperiments returns the experiments of svc's features, kept in
// store, with the running ones read.
func NewExperiments(ctx context.Context, store ExperimentStore, svc *rollout.Service) (*Experiments, error) {
	e := newExperiments(store, svc)
	if err := e.Refresh(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

// newExperiments returns the experiments of svc's features before their
// running ones are read (see ready).
func newExperiments(store ExperimentStore, svc *rollout.Service) *Experiments {
	e := &Experiments{store: store, svc: svc, maxPending: maxPendingExposures}
	e.running.Store(&map[string]*recorder{})
	return e
}

// ready reads the running experiments unless they were read.
func (e *Experiments) ready(ctx context.Context) error {
	if e.refreshed.Load() {
		return nil
	}
	return e.Refresh(ctx)
}

// EnvironmentExperiments holds the Experiments of each environment's
// Service, each over the store bound to its environment, made on first
// use: an environment's experiments record what its service serves, and
// its apps' exposures and events.
type EnvironmentExperiments struct {
	// EventRetention is each environment's Experiments' (see
	// Experiments.SetEventRetention); set it before the first Of.
	EventRetention time.Duration

	storeIn   func(env string) ExperimentStore
	byService sync.Map // *rollout.Service → *Experiments
}

// NewEnvironmentExperiments returns the experiments of every environment,
// kept in storeIn(environment).
func NewEnvironmentExperiments(storeIn func(env string) ExperimentStore) *EnvironmentExperiments {
	return &EnvironmentExperiments{storeIn: storeIn}
}

// Of returns the experiments of svc's environment. Those made here read
// their running experiments on first need (Run, or the first batch of
// exposures), or when told (Refresh).
func (x *EnvironmentExperiments) Of(svc *rollout.Service) *Experiments {
	if e, ok := x.byService.Load(svc); ok {
		return e.(*Experiments)
	}
	n := newExperiments(x.storeIn(svc.Environment()), svc)
	n.SetEventRetention(x.EventRetention)
	e, _ := x.byService.LoadOrStore(svc, n)
	return e.(*Experiments)
}

// Run runs the experiments of svc (RunEvery, reading the running ones at
// once) until ctx ends, when svc's environment was deleted or the server
// stops; then they are forgotten.
func (x *EnvironmentExperiments) Run(ctx context.Context, svc *rollout.Service, interval time.Duration, report func(error)) {
	e := x.Of(svc)
	if err := e.Refresh(ctx); err != nil && ctx.Err() == nil && report != nil {
		report(err)
	}
	e.RunEvery(ctx, interval, report)
	x.byService.CompareAndDelete(svc, e)
}

// Refresh reads the running experiments again (another instance may have
// started or stopped one) and makes sure the service's snapshots tell
// e of what they serve.
func (e *Experiments) Refresh(ctx context.Context) error {
	xs, err := e.store.RunningExperiments(ctx)
	if err != nil {
		return err
	}
	old := *e.running.Load()
	next := make(map[string]*recorder, len(xs))
	for _, x := range xs {
		if r := old[x.FeatureID]; r != nil && r.x.ID == x.ID {
			next[x.FeatureID] = r
			continue
		}
		next[x.FeatureID] = newRecorder(x)
	}
	e.running.Store(&next)
	e.refreshed.Store(true)
	if h := e.svc.Snapshot().ServedHook(); h != nil && e.hooked.Swap(h) != h {
		h.Set(e.served)
	}
	return nil
}

// served is the snapshot's hook: it records the first exposure of user if
// an experiment runs on c's feature.
func (e *Experiments) served(c *feature.Compiled, user string, o *feature.Outcome) {
	r := (*e.running.Load())[c.Feature().ID]
	if r == nil || o.Bucket == "" {
		return
	}
	e.record(r, UserHash(user), o.Bucket, o.Version, time.Time{})
}

// record queues the exposure of a user to bucket at time at (zero: now)
// unless r remembers the user with that bucket already.
func (e *Experiments) record(r *recorder, h int64, bucket string, version int, at time.Time) {
	sh := &r.shards[uint64(h)%recorderShards]
	sh.mu.Lock()
	if b, ok := sh.seen[h]; ok && b == bucket {
		sh.mu.Unlock()
		return
	}
	if len(sh.seen) >= maxRecordedUsers/recorderShards {
		clear(sh.seen)
	}
	sh.seen[h] = bucket
	sh.mu.Unlock()
	if at.IsZero() {
		at = e.svc.Now().UTC()
	}
	x := FirstExposure{Experiment: r.x.ID, UserHash: h, Bucket: bucket, Version: version, At: at}
	e.mu.Lock()
	if len(e.pending) < e.maxPending {
		e.pending = append(e.pending, x)
	} else {
		e.dropLocked(x.Experiment, 1)
	}
	e.mu.Unlock()
}

// dropLocked counts n first exposures of experiment id dropped; e.mu is
// held.
func (e *Experiments) dropLocked(id string, n int64) {
	e.dropped.Add(n)
	if e.droppedBy == nil {
		e.droppedBy = map[string]int64{}
	}
	e.droppedBy[id] += n
}

// pendingDrops returns the drops of experiment id not yet stored.
func (e *Experiments) pendingDrops(id string) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.droppedBy[id]
}

// Dropped is how many first exposures this instance could not queue (the
// store was unreachable for long): their users are left out unless seen
// again.
func (e *Experiments) Dropped() int64 { return e.dropped.Load() }

// Flush writes the queued first exposures to the store. On failure they
// wait for the next flush (as many as the queue holds).
func (e *Experiments) Flush(ctx context.Context) error {
	e.mu.Lock()
	xs, drops := e.pending, e.droppedBy
	e.pending, e.droppedBy = nil, nil
	e.mu.Unlock()
	for len(xs) > 0 {
		n := min(len(xs), maxFirstExposureChunk)
		e.wrote.Add(1)
		if err := e.store.AddFirstExposures(ctx, xs[:n]); err != nil {
			e.mu.Lock()
			keep := max(min(len(xs), e.maxPending-len(e.pending)), 0)
			for _, x := range xs[keep:] {
				e.dropLocked(x.Experiment, 1)
			}
			if keep > 0 {
				e.pending = append(xs[:keep:keep], e.pending...)
			}
			for id, n := range drops {
				e.dropLocked(id, n)
			}
			e.mu.Unlock()
			return err
		}
		xs = xs[n:]
	}
	if len(drops) > 0 {
		if err := e.store.AddDroppedExposures(ctx, drops); err != nil {
			e.mu.Lock()
			for id, n := range drops {
				e.dropLocked(id, n)
				e.dropped.Add(-n) // counted once already
			}
			e.mu.Unlock()
			return err
		}
	}
	return nil
}

// RunEvery flushes first exposures and reads the running experiments again
// every interval until ctx is done, then flushes once more. Failures go to
// report.
//
// Once an hour it also does the daily work (Daily): it deletes tracked
// events older than the retention, and takes today's snapshot of each
// running experiment's results.
func (e *Experiments) RunEvery(ctx context.Context, interval time.Duration, report func(error)) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for done := false; !done; {
		select {
		case <-ctx.Done():
			done = true
		case <-tick.C:
			if err := e.tick(ctx); err != nil && ctx.Err() == nil && report != nil {
				report(err)
			}
		}
	}
	final, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := e.Flush(final); err != nil && report != nil {
		report(err)
	}
}

// CreateMetric validates and stores a new metric made by actor.
func (e *Experiments) CreateMetric(ctx context.Context, m Metric, actor string) (Metric, error) {
	if err := m.Validate(); err != nil {
		return Metric{}, err
	}
	m.CreatedAt, m.CreatedBy = e.svc.Now().UTC(), actor
	ev := audit.Event{Time: m.CreatedAt, Actor: actorName(actor), Kind: audit.MetricCreate, Subject: m.Key,
		Summary: "created metric " + m.Key + " (" + string(m.Kind) + ")"}
	if err := e.store.CreateMetric(ctx, m, ev); err != nil {
		return Metric{}, err
	}
	return m, nil
}

// Metrics returns every metric, by key.
func (e *Experiments) Metrics(ctx context.Context) ([]Metric, error) { return e.store.Metrics(ctx) }

// Metric returns one metric.
func (e *Experiments) Metric(ctx context.Context, key string) (Metric, error) {
	return e.store.Metric(ctx, key)
}

// DeleteMetric deletes, for actor, a metric that no running experiment
// reads, and its events.
func (e *Experiments) DeleteMetric(ctx context.Context, key, actor string) error {
	ev := audit.Event{Time: e.svc.Now().UTC(), Actor: actorName(actor), Kind: audit.MetricDelete, Subject: key,
		Summary: "deleted metric " + key + " and its tracked events"}
	return e.store.DeleteMetric(ctx, key, ev)
}

var trackBatchPattern = regexp.MustCompile(`^[A-Za-z0-9_-]{8,64}$`)

// TrackResult is what Track did with a batch.
type TrackResult struct {
	Added   bool `json:"added"` // false: the batch ID was seen before
	Tracked int  `json:"tracked"`
}

// Track stores a batch of events an app reports, once per batch ID. A
// batch with an event at fault is refused whole (EInvalid naming the
// event): an unknown metric, a user ID that is empty or longer than
// MaxTrackUser bytes, a value that is not finite or beyond ±MaxTrackValue,
// a time more than MaxTrackAge old or MaxTrackAhead ahead. A value of 0 is
// taken as 1 (the default); a zero time as now.
func (e *Experiments) Track(ctx context.Context, batch string, events []TrackedEvent, valueSet []bool) (TrackResult, error) {
	if !trackBatchPattern.MatchString(batch) {
		return TrackResult{}, feature.Errorf(feature.EInvalid, "batch ID %q is invalid: use 8 to 64 characters of A-Z, a-z, 0-9, '_', '-' (a random ID per batch, the same on a retry)", feature.Abbreviate(batch))
	}
	switch {
	case len(events) == 0:
		return TrackResult{}, feature.Errorf(feature.EInvalid, "the batch holds no events")
	case len(events) > MaxTrackBatch:
		return TrackResult{}, feature.Errorf(feature.EInvalid, "a batch holds at most %d events, got %d: split it", MaxTrackBatch, len(events))
	}
	metrics, err := e.store.Metrics(ctx)
	if err != nil {
		return TrackResult{}, err
	}
	known := make(map[string]bool, len(metrics))
	for _, m := range metrics {
		known[m.Key] = true
	}
	now := e.svc.Now().UTC()
	out := make([]TrackedEvent, len(events))
	for i, ev := range events {
		switch {
		case !known[ev.Metric]:
			return TrackResult{}, feature.Errorf(feature.EInvalid, "event %d: no metric %q: create it first (POST /api/metrics)", i, feature.Abbreviate(ev.Metric))
		case ev.User == "" || len(ev.User) > MaxTrackUser:
			return TrackResult{}, feature.Errorf(feature.EInvalid, "event %d: user must be 1 to %d bytes", i, MaxTrackUser)
		case math.IsNaN(ev.Value) || math.Abs(ev.Value) > MaxTrackValue:
			return TrackResult{}, feature.Errorf(feature.EInvalid, "event %d: value must be a number from %g to %g", i, -MaxTrackValue, float64(MaxTrackValue))
		case !ev.At.IsZero() && ev.At.Before(now.Add(-MaxTrackAge)):
			return TrackResult{}, feature.Errorf(feature.EInvalid, "event %d: at %s is more than %s ago", i, ev.At.Format(time.RFC3339), MaxTrackAge)
		case ev.At.After(now.Add(MaxTrackAhead)):
			return TrackResult{}, feature.Errorf(feature.EInvalid, "event %d: at %s is in the future", i, ev.At.Format(time.RFC3339))
		}
		if i >= len(valueSet) || !valueSet[i] {
			ev.Value = 1
		}
		if ev.At.IsZero() {
			ev.At = now
		}
		ev.At = ev.At.UTC()
		ev.UserHash, ev.User = UserHash(ev.User), ""
		out[i] = ev
	}
	e.wrote.Add(1)
	added, err := e.store.AddTrackBatch(ctx, batch, now, out)
	if err != nil {
		return TrackResult{}, err
	}
	if !added {
		return TrackResult{}, nil
	}
	return TrackResult{Added: true, Tracked: len(out)}, nil
}

// ExperimentRequest is what starts an experiment.
type ExperimentRequest struct {
	Name       string   `json:"name"`
	Control    string   `json:"control"`
	Metrics    []string `json:"metrics"`
	Hypothesis string   `json:"hypothesis"`
}

// Start starts an experiment on the feature key's current configuration:
// the buckets it serves a share of users are compared, each against the
// control. Only one experiment runs on a feature (row) at a time.
func (e *Experiments) Start(ctx context.Context, key string, req ExperimentRequest, actor string) (Experiment, error) {
	f, err := e.svc.Feature(ctx, key)
	if err != nil {
		return Experiment{}, err
	}
	shares := f.ServedRing().Shares()
	served := 0
	for _, s := range shares {
		if s > 0 {
			served++
		}
	}
	switch {
	case strings.TrimSpace(req.Name) == "" || len(req.Name) > maxExperimentName || !utf8.ValidString(req.Name):
		return Experiment{}, feature.Errorf(feature.EInvalid, "name must be 1 to %d bytes of UTF-8", maxExperimentName)
	case len(req.Hypothesis) > maxDescription || !utf8.ValidString(req.Hypothesis):
		return Experiment{}, feature.Errorf(feature.EInvalid, "hypothesis must be at most %d bytes of UTF-8", maxDescription)
	case shares[req.Control] <= 0:
		return Experiment{}, feature.Errorf(feature.EInvalid, "control %q is not a bucket feature %q serves users: give one of its buckets with a share", feature.Abbreviate(req.Control), key)
	case served < 2:
		return Experiment{}, feature.Errorf(feature.EInvalid, "feature %q serves users one bucket only: give another bucket a share before experimenting", key)
	case len(req.Metrics) == 0 || len(req.Metrics) > MaxMetricsPerTest:
		return Experiment{}, feature.Errorf(feature.EInvalid, "metrics must name 1 to %d metrics", MaxMetricsPerTest)
	}
	metrics := slices.Clone(req.Metrics)
	slices.Sort(metrics)
	if len(slices.Compact(metrics)) != len(req.Metrics) {
		return Experiment{}, feature.Errorf(feature.EInvalid, "metrics name a metric twice")
	}
	for _, m := range req.Metrics {
		if _, err := e.store.Metric(ctx, m); err != nil {
			if feature.ErrorCode(err) == feature.ENotFound {
				return Experiment{}, feature.Errorf(feature.EInvalid, "no metric %q: create it first (POST /api/metrics)", feature.Abbreviate(m))
			}
			return Experiment{}, err
		}
	}
	for name, s := range shares {
		if s <= 0 {
			delete(shares, name)
		}
	}
	x := Experiment{ID: uuid.NewString(), Feature: key, FeatureID: f.ID, Name: req.Name, Control: req.Control,
		Metrics: slices.Clone(req.Metrics), Hypothesis: req.Hypothesis, Version: f.Version, Shares: shares,
		Status: "running", StartedAt: e.svc.Now().UTC(), StartedBy: actor}
	ev := audit.Event{Time: x.StartedAt, Actor: actorName(actor), Kind: audit.ExperimentStart, Feature: key, Subject: x.ID, Version: f.Version,
		Summary: fmt.Sprintf("started experiment %q on %s at version %d against %s, measuring %s", x.Name, key, f.Version, x.Control, strings.Join(x.Metrics, ", "))}
	if err := e.store.StartExperiment(ctx, x, ev); err != nil {
		return Experiment{}, err
	}
	return x, e.Refresh(ctx)
}

// Stop stops the running experiment id of the feature key.
func (e *Experiments) Stop(ctx context.Context, key, id, actor string) (Experiment, error) {
	f, err := e.svc.Feature(ctx, key)
	if err != nil {
		return Experiment{}, err
	}
	if err := e.Flush(ctx); err != nil {
		return Experiment{}, err
	}
	now := e.svc.Now().UTC()
	ev := audit.Event{Time: now, Actor: actorName(actor), Kind: audit.ExperimentStop, Feature: key, Subject: id,
		Summary: "stopped experiment " + id + " on " + key}
	x, err := e.store.StopExperiment(ctx, f.ID, id, now, actor, ev)
	if err != nil {
		return Experiment{}, err
	}
	return x, e.Refresh(ctx)
}

// List returns the experiments of the feature key, newest first.
func (e *Experiments) List(ctx context.Context, key string) ([]Experiment, error) {
	f, err := e.svc.Feature(ctx, key)
	if err != nil {
		return nil, err
	}
	return e.store.Experiments(ctx, f.ID)
}

// Get returns the experiment id of the feature key.
func (e *Experiments) Get(ctx context.Context, key, id string) (Experiment, error) {
	f, err := e.svc.Feature(ctx, key)
	if err != nil {
		return Experiment{}, err
	}
	return e.store.Experiment(ctx, f.ID, id)
}

// ExposedUser is a user an app's in-app client served, sent with its
// exposure counts so that experiments count the user.
type ExposedUser struct {
	FeatureID string `json:"feature_id"`
	Version   int    `json:"version"`
	Bucket    string `json:"bucket"`
	User      string `json:"user"`
	// At is when the app first served the user in its flush interval;
	// zero, or further than MaxTrackAge back or MaxTrackAhead ahead:
	// now.
	At time.Time `json:"at"`
}

// RunningFeatures returns the IDs of the feature rows experiments run on,
// sorted; nil when none runs.
func (e *Experiments) RunningFeatures() []string {
	running := *e.running.Load()
	if len(running) == 0 {
		return nil
	}
	ids := make([]string, 0, len(running))
	for id := range running {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// MaxExposedUsers bounds the users one batch of exposures names.
const MaxExposedUsers = 5_000

// ExposedUsers records the users an app's in-app client served (see
// ExposedUser) for the experiments running on their features, once the
// running experiments were read, and returns how many it recorded and
// RunningFeatures. Users of features without one are ignored; a user with
// a bucket the experiment does not compare, or an ID out of bounds, is
// refused with EInvalid (and none is recorded).
func (e *Experiments) ExposedUsers(ctx context.Context, users []ExposedUser) (int, []string, error) {
	if err := e.ready(ctx); err != nil {
		return 0, nil, err
	}
	n, err := e.addExposedUsers(users)
	if err != nil {
		return 0, nil, err
	}
	return n, e.RunningFeatures(), nil
}

func (e *Experiments) addExposedUsers(users []ExposedUser) (int, error) {
	if len(users) > MaxExposedUsers {
		return 0, feature.Errorf(feature.EInvalid, "a batch names at most %d users, got %d: split it", MaxExposedUsers, len(users))
	}
	running := *e.running.Load()
	for i, u := range users {
		if u.User == "" || len(u.User) > MaxTrackUser {
			return 0, feature.Errorf(feature.EInvalid, "user %d: the user ID must be 1 to %d bytes", i, MaxTrackUser)
		}
		if r := running[u.FeatureID]; r != nil && u.Bucket != "" {
			if _, ok := r.x.Shares[u.Bucket]; !ok {
				return 0, feature.Errorf(feature.EInvalid, "user %d: experiment %q compares no bucket %q", i, r.x.ID, feature.Abbreviate(u.Bucket))
			}
		}
	}
	n, now := 0, e.svc.Now().UTC()
	for _, u := range users {
		if r := running[u.FeatureID]; r != nil && u.Bucket != "" {
			at := now
			if !u.At.IsZero() && u.At.After(now.Add(-MaxTrackAge)) && u.At.Before(now.Add(MaxTrackAhead)) {
				at = u.At.UTC()
			}
			e.record(r, UserHash(u.User), u.Bucket, u.Version, at)
			n++
		}
	}
	return n, nil
}

// tick is RunEvery's work at each interval.
func (e *Experiments) tick(ctx context.Context) error {
	if err := e.Refresh(ctx); err != nil {
		return err
	}
	if err := e.Flush(ctx); err != nil {
		return err
	}
	if now := e.svc.Now(); now.Sub(e.lastDaily) >= time.Hour {
		e.lastDaily = now
		return e.Daily(ctx)
	}
	return nil
}

// actorName is who an audit event names: "anonymous" for no one.
func actorName(a string) string {
	if a == "" {
		return "anonymous"
	}
	return a
}
