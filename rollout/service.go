package rollout

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
)

// Service applies changes to features and serves evaluations. Writes go to
// the Store one at a time; after each committed write a new Snapshot is
// swapped in, and evaluations read only that snapshot, never the store.
// A Service is safe for concurrent use.
type Service struct {
	store Store
	now   Clock

	mu      sync.Mutex // serializes writes; guards retired
	snap    atomic.Pointer[Snapshot]
	retired []retired

	flushMu sync.Mutex // one exposure flush at a time

	history historyReads // reads of history take turns
}

// ChangeOptions are the guards and modes of one change.
type ChangeOptions struct {
	Actor  string // who makes the change; "anonymous" when empty
	DryRun bool   // compute the result and report, store nothing
	// MaxChurn, when not nil, refuses with EChurn a change that would move
	// more than this fraction of users.
	MaxChurn *float64
	// IfMatch, when not 0, refuses with EPrecondition a change to a feature
	// that is no longer at this version.
	IfMatch int
}

// Result is a feature after a change and the change's churn report.
type Result struct {
	Feature Feature
	Report  Report
	Shares  map[string]float64 // exact share of each bucket of the feature's ring
	DryRun  bool
}

// NewService returns a service over store, its snapshot loaded from it.
// A nil clock means time.Now.
func NewService(ctx context.Context, store Store, clock Clock) (*Service, error) {
	if clock == nil {
		clock = time.Now
	}
	s := &Service{store: store, now: clock}
	features, err := store.Features(ctx)
	if err != nil {
		return nil, fmt.Errorf("load features: %w", err)
	}
	all := make(map[string]*compiled, len(features))
	for _, f := range features {
		if err := f.validate(false); err != nil {
			return nil, fmt.Errorf("load feature %q: %w", f.Key, err)
		}
		all[f.Key] = compile(f)
	}
	s.snap.Store(newSnapshot(all))
	return s, nil
}

// Snapshot returns the current snapshot of every feature.
func (s *Service) Snapshot() *Snapshot { return s.snap.Load() }

// Evaluate returns the bucket the feature key serves user, from memory.
func (s *Service) Evaluate(key, user string) (Evaluation, error) {
	return s.Snapshot().Evaluate(key, user)
}

// Create stores f as a new feature at version 1. It sets f's ID, version and
// times; the caller sets everything else, the salt included.
func (s *Service) Create(ctx context.Context, f Feature, opts ChangeOptions) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()

	now := s.now().UTC()
	f = f.Clone()
	f.ID, f.Version, f.CreatedAt, f.UpdatedAt = uuid.NewString(), 1, now, now
	for i := range f.Buckets {
		f.Buckets[i].Value = compactJSON(f.Buckets[i].Value)
	}
	if err := f.Validate(); err != nil {
		return Result{}, err
	}
	if _, ok := s.Snapshot().features[f.Key]; ok {
		return Result{}, Errorf(EConflict, "feature %q already exists", f.Key)
	}
	cc := compile(f)
	rep := newReport(nil, cc)
	res := Result{Feature: f, Report: rep, Shares: maps.Clone(cc.shares), DryRun: opts.DryRun}
	if opts.DryRun {
		return res, nil
	}
	v := Version{Version: 1, Actor: actor(opts), Time: now, Summary: "created", Config: f, Report: rep}
	if err := s.store.CreateFeature(ctx, f, v); err != nil {
		return Result{}, err
	}
	s.swap(f.Key, cc)
	return res, nil
}

// Change applies ch to the feature key as a new version, with its churn
// report, unless a guard in opts refuses it.
func (s *Service) Change(ctx context.Context, key string, ch Change, opts ChangeOptions) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.current(key, opts)
	if err != nil {
		return Result{}, err
	}
	return s.apply(ctx, cur, ch, opts)
}

// Rollback restores the configuration of the feature's version n as a new
// version, which puts every user back in the bucket they had at n.
func (s *Service) Rollback(ctx context.Context, key string, n int, opts ChangeOptions) (Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.current(key, opts)
	if err != nil {
		return Result{}, err
	}
	old, err := s.store.Version(ctx, key, n)
	if err != nil {
		return Result{}, err
	}
	return s.apply(ctx, cur, rollbackTo(old.Config), opts)
}

// Delete removes the feature key and its history.
func (s *Service) Delete(ctx context.Context, key string, opts ChangeOptions) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur, err := s.current(key, opts)
	if err != nil {
		return err
	}
	if opts.DryRun {
		return nil
	}
	if err := s.store.DeleteFeature(ctx, key, cur.feature.Version); err != nil {
		return err
	}
	s.swap(key, nil)
	return nil
}

// Versions returns the feature's history, newest first; see Store.Versions.
// Reads of history take turns on at most half the cores: it waits for its
// turn, or returns EUnavailable if ctx ends first.
func (s *Service) Versions(ctx context.Context, key string, before, limit int) ([]Version, error) {
	if _, ok := s.Snapshot().features[key]; !ok {
		return nil, notFound(key)
	}
	if err := s.history.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.history.release()
	return s.store.Versions(ctx, key, before, limit)
}

// Version returns version n of the feature's history.
func (s *Service) Version(ctx context.Context, key string, n int) (Version, error) {
	if _, ok := s.Snapshot().features[key]; !ok {
		return Version{}, notFound(key)
	}
	return s.store.Version(ctx, key, n)
}

// current returns the feature key as it stands, checking opts.IfMatch.
func (s *Service) current(key string, opts ChangeOptions) (*compiled, error) {
	c, ok := s.Snapshot().features[key]
	if !ok {
		return nil, notFound(key)
	}
	if opts.IfMatch != 0 && opts.IfMatch != c.feature.Version {
		return nil, Errorf(EPrecondition, "feature %q is at version %d, not %d: reload it and decide again", key, c.feature.Version, opts.IfMatch)
	}
	return c, nil
}

// apply makes ch a new version of cur. The caller holds s.mu.
func (s *Service) apply(ctx context.Context, cur *compiled, ch Change, opts ChangeOptions) (Result, error) {
	next := cur.feature.Clone()
	if err := ch.apply(&next); err != nil {
		return Result{}, err
	}
	if err := next.Validate(); err != nil {
		return Result{}, err
	}
	now := s.now().UTC()
	next.Version, next.UpdatedAt = cur.feature.Version+1, now
	cc := compile(next)
	rep := newReport(cur, cc)
	if opts.MaxChurn != nil && rep.Churn > *opts.MaxChurn {
		return Result{}, &Error{
			Code:    EChurn,
			Message: fmt.Sprintf("the change would move %.4f%% of users, more than max_churn %.4f%%: nothing was changed", 100*rep.Churn, 100**opts.MaxChurn),
			Report:  &rep,
		}
	}
	res := Result{Feature: next, Report: rep, Shares: maps.Clone(cc.shares), DryRun: opts.DryRun}
	if opts.DryRun {
		return res, nil
	}
	v := Version{Version: next.Version, Actor: actor(opts), Time: now, Summary: ch.summary, Config: next, Report: rep}
	if err := s.store.UpdateFeature(ctx, next, v); err != nil {
		return Result{}, err
	}
	s.swap(next.Key, cc)
	return res, nil
}

// swap installs a snapshot in which c serves key (nil: key is gone). The
// caller holds s.mu.
func (s *Service) swap(key string, c *compiled) {
	old := s.Snapshot()
	s.retire(old.features[key])
	s.snap.Store(old.with(key, c))
}

func actor(opts ChangeOptions) string {
	if opts.Actor == "" {
		return "anonymous"
	}
	return opts.Actor
}

func notFound(key string) error {
	return Errorf(ENotFound, "feature %q does not exist", key)
}
