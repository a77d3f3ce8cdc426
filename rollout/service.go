package rollout

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/auth"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/environment"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/idempotency"
	"github.com/rollout/rollout/rollout/plan"
	"github.com/rollout/rollout/rollout/request"
)

// Service applies changes to features and serves evaluations. Writes go to
// the Store one at a time; after each committed write a new Snapshot is
// swapped in, and evaluations read only that snapshot, never the store.
// A Service is safe for concurrent use.
type Service struct {
	store Store
	now   Clock

	mu      writeLock // serializes writes; guards retired
	snap    atomic.Pointer[feature.Snapshot]
	retired []retired

	flushMu   sync.Mutex // one exposure flush at a time
	exposures exposureChecks

	kick  chan struct{} // a local commit: Follow syncs at once
	subMu sync.Mutex
	subs  map[chan []Commit]bool

	history historyReads // reads of history take turns

	env  string        // the environment the service serves (see Environments)
	envs *Environments // the environments it is one of; nil: alone
	// redefined: a write changed a feature's definition, which the store
	// wrote to the other environments too (see shareOut).
	redefined atomic.Bool
}

// shareOut brings the other environments' services up to date when a write
// since the last call changed a feature's definition, which the store
// wrote there too (package environment). The caller holds no lock.
func (s *Service) shareOut(ctx context.Context) {
	if s.redefined.Swap(false) {
		s.envs.syncOthers(ctx, s)
	}
}

// Environment returns the key of the environment the service serves.
func (s *Service) Environment() string { return s.env }

// ChangeOptions are the guards and modes of one change.
type ChangeOptions struct {
	Actor  string // who makes the change; "anonymous" when empty
	DryRun bool   // compute the result and report, store nothing
	// MaxChurn, when not nil, refuses with EChurn a change that would move
	// more than this fraction of users.
	MaxChurn *float64
	// IfMatch, when not empty, refuses with EPrecondition a change to a
	// feature whose Tag is not this one (or that does not exist yet): the
	// change applies only to the configuration its author saw. "*" matches
	// any existing feature. Without it, a change is applied to the newest
	// version, even one another instance made meanwhile.
	IfMatch string
	// Comment is stored with the change's version: why it was made. At
	// most MaxComment bytes of UTF-8 text.
	Comment string
	// Role is the role of the token making the change: an editor's
	// changes are bound by the Settings (the churn limit, approvals);
	// "" (the command line, an open API) and admins are not.
	Role auth.Role
	// Idempotency, when not nil, is the request's idempotency key: the
	// transaction that commits the change also keeps the change's answer
	// with it (see Idempotency).
	Idempotency *idempotency.Key
	// Submit asks that an editor's change the settings refuse (above the
	// churn limit, a reshuffle) become a change request for another person
	// to approve, as where approvals are required; a change that cannot be
	// a request is still refused.
	Submit bool

	gate    *gate             // the editor's settings, set by the service
	request *request.Decision // an approval being applied
}

// checkComment refuses a comment validateComment refuses, and no comment
// on a change (not a dry run) in an environment that requires one.
func (s *Service) checkComment(comment string, dryRun bool) error {
	if err := validateComment(comment); err != nil {
		return err
	}
	if !dryRun && strings.TrimSpace(comment) == "" && s.envs.requiresComment(s.env) {
		return &feature.Error{Code: feature.EInvalid, Field: "comment", Message: "environment " + s.env + " requires a comment on every change: say why you make it"}
	}
	return nil
}

// MaxComment is the longest comment a change may carry, in bytes.
const MaxComment = 2000

// validateComment refuses a comment that is too long or not text.
func validateComment(c string) error {
	switch {
	case len(c) > MaxComment:
		return feature.Errorf(feature.EInvalid, "the comment is %d bytes long: keep it to %d", len(c), MaxComment)
	case !utf8.ValidString(c):
		return feature.Errorf(feature.EInvalid, "the comment is not valid UTF-8 text")
	case strings.ContainsFunc(c, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\t' }):
		return feature.Errorf(feature.EInvalid, "the comment holds control characters: write plain text")
	}
	return nil
}

// Result is a feature after a change and the change's churn report.
type Result struct {
	Feature feature.Feature
	Report  feature.Report
	Shares  map[string]float64 // exact share of each bucket of the feature's ring
	DryRun  bool
	// Request, when not nil, is the change request the change became:
	// approvals cover the feature, and nothing was applied.
	Request *request.Request
	// Needs, in an editor's dry run, says what the change would need:
	// "approval" (it would become a request), "admin" (it would be
	// refused: above the churn limit, or a reshuffle), or "" (it would
	// apply).
	Needs string
	// Elsewhere is what an archive or a restore does in the other
	// environments, which it archives or restores too.
	Elsewhere []environment.Effect
	// Unchanged: the change would change nothing (a promotion of a
	// feature alike already), and no version was written.
	Unchanged bool
}

// NewService returns a service over store, its snapshot loaded from it.
// A nil clock means time.Now.
func NewService(ctx context.Context, store Store, clock Clock) (*Service, error) {
	if clock == nil {
		clock = time.Now
	}
	s := &Service{store: store, now: clock, kick: make(chan struct{}, 1), env: Production}
	// The revision first: commits made while the features load are then
	// read again by the next Sync, which is harmless.
	rev, err := store.Revision(ctx)
	if err != nil {
		return nil, fmt.Errorf("load revision: %w", err)
	}
	segs, err := store.Segments(ctx)
	if err != nil {
		return nil, fmt.Errorf("load segments: %w", err)
	}
	segments := make(map[string]*feature.CompiledSegment, len(segs))
	for _, seg := range segs {
		if err := seg.ValidateStored(); err != nil {
			return nil, fmt.Errorf("load segment %q: %w", seg.Key, err)
		}
		c, err := compileStoredSegment(ctx, store, seg)
		if err != nil {
			return nil, fmt.Errorf("load segment %q: %w", seg.Key, err)
		}
		segments[seg.Key] = c
	}
	features, err := store.Features(ctx)
	if err != nil {
		return nil, fmt.Errorf("load features: %w", err)
	}
	all := make([]*feature.Compiled, 0, len(features))
	for _, f := range features {
		if err := f.ValidateStored(false); err != nil {
			return nil, fmt.Errorf("load feature %q: %w", f.Key, err)
		}
		all = append(all, feature.Compile(f, segments))
	}
	s.snap.Store(feature.NewSnapshotOf(all, segments, rev))
	return s, nil
}

// Snapshot returns the current snapshot of every feature.
func (s *Service) Snapshot() *feature.Snapshot { return s.snap.Load() }

// Evaluate returns the bucket the feature key serves user, from memory.
func (s *Service) Evaluate(key, user string) (feature.Evaluation, error) {
	return s.Snapshot().Evaluate(key, user)
}

// Create stores f as a new feature at version 1. It sets f's ID, version and
// times; the caller sets everything else, the salt included.
func (s *Service) Create(ctx context.Context, f feature.Feature, opts ChangeOptions) (Result, error) {
	res, err := s.create(ctx, f, opts)
	if err == nil && !opts.DryRun {
		s.envs.syncOthers(ctx, s) // the feature exists there too now
	}
	return res, err
}

func (s *Service) create(ctx context.Context, f feature.Feature, opts ChangeOptions) (Result, error) {
	if err := s.checkComment(opts.Comment, opts.DryRun); err != nil {
		return Result{}, err
	}
	if err := s.mu.lock(ctx); err != nil {
		return Result{}, err
	}
	defer s.mu.Unlock()

	now := s.now().UTC()
	f = f.Clone()
	f.ID, f.Version, f.CreatedAt, f.UpdatedAt = uuid.NewString(), 1, now, now
	for i := range f.Buckets {
		f.Buckets[i].Value = feature.CompactJSON(f.Buckets[i].Value)
	}
	f.Rules = feature.CloneRules(f.Rules)
	if err := plan.Splits(feature.Feature{}, &f); err != nil {
		return Result{}, err
	}
	if err := f.Validate(); err != nil {
		return Result{}, err
	}
	if err := s.checkSegments(ctx, f); err != nil {
		return Result{}, err
	}
	if err := s.checkPrerequisites(feature.Feature{}, f); err != nil {
		return Result{}, err
	}
	if s.Snapshot().Compiled(f.Key) != nil {
		// Another instance may have deleted it: ask the store.
		if c, err := s.reload(ctx, f.Key); err != nil {
			return Result{}, err
		} else if c != nil {
			return Result{}, feature.Errorf(feature.EConflict, "feature %q already exists", f.Key)
		}
	}
	if opts.IfMatch != "" {
		return Result{}, feature.Errorf(feature.EPrecondition, "feature %q does not exist yet, so If-Match cannot match: create it without If-Match", f.Key)
	}
	cc := s.compileFeature(f)
	if err := cc.CheckPatterns(); err != nil {
		return Result{}, err
	}
	rep := cc.ReportFrom(nil)
	if err := checkChurn(rep, opts); err != nil {
		return Result{}, err
	}
	res := Result{Feature: f, Report: rep, Shares: cc.Shares(), DryRun: opts.DryRun}
	if opts.DryRun {
		return res, nil
	}
	settles, err := opts.Idempotency.Settle(res, now)
	if err != nil {
		return Result{}, err
	}
	v := Version{Version: 1, Actor: actor(opts), Time: now, Summary: "created", Comment: opts.Comment, Config: f, OverrideCount: len(f.Overrides), Report: rep, Kind: audit.Create, Settles: settles}
	v.Elsewhere = s.envs.elsewhere(s, f, v)
	if err := s.store.CreateFeature(ctx, f, v); err != nil {
		if feature.ErrorCode(err) == feature.EConflict { // created elsewhere meanwhile: serve it
			if _, rerr := s.reload(ctx, f.Key); rerr != nil {
				return Result{}, errors.Join(err, rerr) // still a conflict, and why the snapshot lacks the feature
			}
		}
		return Result{}, err
	}
	s.swap(f.Key, cc)
	s.committed()
	return res, nil
}

// Change applies ch to the feature key as a new version, with its churn
// report, unless a guard in opts refuses it.
//
// A dry run's report estimates, per population its rules move, how many
// evaluations a day that is (PopulationChange.Estimate).
func (s *Service) Change(ctx context.Context, key string, ch change.Change, opts ChangeOptions) (Result, error) {
	res, err := s.change(ctx, key, ch, opts)
	s.shareOut(ctx)
	if err == nil && opts.DryRun && len(res.Report.Rules) > 0 {
		if err := s.estimateRules(ctx, key, &res.Report); err != nil {
			return Result{}, err
		}
	}
	return res, err
}

func (s *Service) change(ctx context.Context, key string, ch change.Change, opts ChangeOptions) (Result, error) {
	if err := s.checkComment(opts.Comment, opts.DryRun); err != nil {
		return Result{}, err
	}
	var err error
	if opts.gate, err = s.gateFor(ctx, opts); err != nil {
		return Result{}, err
	}
	if err := s.mu.lock(ctx); err != nil {
		return Result{}, err
	}
	defer s.mu.Unlock()
	res, err := s.onFresh(ctx, key, opts, func(cur *feature.Compiled) (Result, error) {
		return s.apply(ctx, cur, ch, opts)
	}, func() (Result, error) {
		return s.applyHeld(ctx, key, ch, opts)
	})
	return s.asRequest(ctx, res, err, opts)
}

// Rollback restores the configuration of the feature's version n as a new
// version, which puts every user back in the bucket they had at n.
func (s *Service) Rollback(ctx context.Context, key string, n int, opts ChangeOptions) (Result, error) {
	return s.RollbackWith(ctx, key, n, RollbackOptions{}, opts)
}

// RollbackOptions are the choices of a rollback.
type RollbackOptions struct {
	// KeepOverrides keeps the feature's current overrides instead of the
	// old version's: those whose bucket the old version has stay, the old
	// version's other overrides are not restored. Without it a rollback
	// restores the old version's overrides, dropping the ones made since.
	KeepOverrides bool
}

// RollbackWith is Rollback with its options.
func (s *Service) RollbackWith(ctx context.Context, key string, n int, ro RollbackOptions, opts ChangeOptions) (Result, error) {
	if err := s.checkComment(opts.Comment, opts.DryRun); err != nil {
		return Result{}, err
	}
	var err error
	if opts.gate, err = s.gateFor(ctx, opts); err != nil {
		return Result{}, err
	}
	defer s.shareOut(ctx) // after the unlock: deferred calls run last first
	if err := s.mu.lock(ctx); err != nil {
		return Result{}, err
	}
	defer s.mu.Unlock()
	if _, err := s.current(ctx, key, opts); err != nil {
		return Result{}, err
	}
	old, err := s.store.Version(ctx, key, n)
	if err != nil {
		return Result{}, err
	}
	back := change.Rollback(old.Config, ro.KeepOverrides).WithSpec(request.Spec{Kind: request.SpecRollback, Version: n, KeepOverrides: ro.KeepOverrides})
	res, err := s.onFresh(ctx, key, opts, func(cur *feature.Compiled) (Result, error) {
		return s.apply(ctx, cur, back, opts)
	}, func() (Result, error) {
		return s.applyHeld(ctx, key, back, opts)
	})
	return s.asRequest(ctx, res, err, opts)
}

// checkChurn refuses, with EChurn and the report, a change that moves more
// users than opts.MaxChurn allows.
func checkChurn(rep feature.Report, opts ChangeOptions) error {
	if opts.MaxChurn == nil || rep.Churn <= *opts.MaxChurn {
		return nil
	}
	return overMaxChurn("the change", rep, *opts.MaxChurn, "nothing was changed")
}

// overMaxChurn is the one refusal of what (the change, a document's
// feature, a ramp's step) over a max_churn guard of limit: EChurn, with
// the report rep, its message ending with then (what happens instead).
func overMaxChurn(what string, rep feature.Report, limit float64, then string) *feature.Error {
	return &feature.Error{Code: feature.EChurn, Report: &rep, Message: fmt.Sprintf(
		"%s would move %.4f%% of users, more than max_churn %.4f%%: %s", what, 100*rep.Churn, 100*limit, then)}
}

// Versions returns the feature's history, newest first, without the
// versions' overrides; see Store.VersionSummaries. Version reads one
// version whole. Reads of history take turns on at most half the cores: it
// waits for its turn, or returns EUnavailable if ctx ends first.
func (s *Service) Versions(ctx context.Context, key string, before, limit int) ([]Version, error) {
	if err := s.history.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.history.release()
	return s.store.VersionSummaries(ctx, key, before, limit)
}

// Changes returns the audit log: versions of every feature that q selects,
// newest first (see Store.Changes), DefaultHistoryPage of them when q.Limit
// is 0. It takes turns with other history reads. Errors: EInvalid for a
// negative limit or cursor, EUnavailable, the store's.
func (s *Service) Changes(ctx context.Context, q ChangeQuery) ([]Version, error) {
	if q.Limit == 0 {
		q.Limit = DefaultHistoryPage
	}
	if q.Limit < 0 || q.Before < 0 {
		return nil, feature.Errorf(feature.EInvalid, "read changes below a seq >= 0, a positive number at a time: got limit %d, before %d", q.Limit, q.Before)
	}
	if err := s.history.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.history.release()
	return s.store.Changes(ctx, q)
}

// Version returns version n of the feature's history, with its whole
// configuration.
func (s *Service) Version(ctx context.Context, key string, n int) (Version, error) {
	return s.store.Version(ctx, key, n)
}

// onFresh runs write on the feature key as it stands. The snapshot may lag
// behind changes made by another instance: when the store refuses the
// write because the feature moved on (EConflict), the feature is reloaded
// and write runs again on what is there now. With If-Match, that is done
// once, and only if If-Match still matches (else EPrecondition). Without
// it the change is meant for whatever the feature is now: after
// optimisticAttempts lost races it is made by held, which holds the
// feature in the store from read to write and so cannot lose; without a
// held (a delete), write is tried up to maxWriteAttempts times, with a
// short random pause between attempts. The caller holds s.mu.
func (s *Service) onFresh(ctx context.Context, key string, opts ChangeOptions, write func(cur *feature.Compiled) (Result, error), held func() (Result, error)) (Result, error) {
	attempts := maxWriteAttempts
	if opts.IfMatch != "" {
		attempts = 2
	}
	for attempt := 1; ; attempt++ {
		if opts.IfMatch == "" && !opts.DryRun && held != nil && attempt > optimisticAttempts {
			return held()
		}
		cur, err := s.current(ctx, key, opts)
		if err != nil {
			return Result{}, err
		}
		res, err := write(cur)
		if attempt >= attempts || feature.ErrorCode(err) != feature.EConflict || errors.As(err, new(*changeError)) {
			return res, err
		}
		if attempt > 1 {
			if err := pause(ctx, attempt); err != nil {
				return Result{}, err
			}
		}
		if _, err := s.reload(ctx, key); err != nil {
			return Result{}, err
		}
	}
}

// optimisticAttempts is how many times a change without If-Match is tried
// on the snapshot's version (reloaded after a lost race) before it holds
// the feature in the store instead: holding costs a read inside the write,
// so the common case, no race, does without.
const optimisticAttempts = 2

// maxWriteAttempts bounds how many times a change without If-Match is
// applied to a feature that other instances keep moving on.
const maxWriteAttempts = 10

// pause waits a random while that grows with attempt (up to about 50ms),
// so that instances racing for one feature fall out of step; it returns
// EUnavailable if ctx ends first.
func pause(ctx context.Context, attempt int) error {
	d := time.Duration(rand.Int64N(int64(min(time.Millisecond<<attempt, 50*time.Millisecond)))) + time.Millisecond
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return feature.Errorf(feature.EUnavailable, "the change could not be saved before the request ended: other instances kept changing the feature; try again")
	}
}

// current returns the feature key as it stands, checking opts.IfMatch. When
// the snapshot lacks the feature or holds another version than If-Match
// names, it asks the store first: the change may have been made elsewhere.
// The caller holds s.mu.
func (s *Service) current(ctx context.Context, key string, opts ChangeOptions) (*feature.Compiled, error) {
	c := s.Snapshot().Compiled(key)
	if c == nil || !matches(c, opts.IfMatch) {
		var err error
		if c, err = s.reload(ctx, key); err != nil {
			return nil, err
		}
	}
	if c == nil {
		return nil, feature.NotFound(key)
	}
	if matches(c, opts.IfMatch) {
		return c, nil
	}
	version, id, ok := strings.Cut(opts.IfMatch, "-")
	_, now, _ := strings.Cut(c.Feature().Tag(), "-")
	switch {
	case !ok:
		return nil, feature.Errorf(feature.EPrecondition, "If-Match %q is not an ETag of feature %q, whose ETag is now %q: read the feature, then send its ETag", opts.IfMatch, key, c.Feature().Tag())
	case id != now:
		return nil, feature.Errorf(feature.EPrecondition, "feature %q was deleted and created again since you read it (it is now a new feature at version %d): reload it and decide again", key, c.Feature().Version)
	}
	return nil, feature.Errorf(feature.EPrecondition, "feature %q is at version %d, not %s: reload it and decide again", key, c.Feature().Version, version)
}

// apply makes ch a new version of cur. The caller holds s.mu.
func (s *Service) apply(ctx context.Context, cur *feature.Compiled, ch change.Change, opts ChangeOptions) (Result, error) {
	return s.applyWith(ctx, cur, ch, opts, func(f feature.Feature, v Version) error {
		return s.store.UpdateFeature(ctx, f, v)
	})
}

// applyWith is apply, the new version written by save. The caller holds
// s.mu.
func (s *Service) applyWith(ctx context.Context, cur *feature.Compiled, ch change.Change, opts ChangeOptions, save func(feature.Feature, Version) error) (Result, error) {
	res, v, cc, err := s.prepare(cur, ch, opts)
	if isUnknownSegment(err) {
		// Made by another instance, not yet synced? Read them, try again.
		if rerr := s.reloadSegments(ctx); rerr != nil {
			return Result{}, rerr
		}
		res, v, cc, err = s.prepare(cur, ch, opts)
	}
	if err != nil || opts.DryRun {
		return res, err
	}
	if v.Settles, err = opts.Idempotency.Settle(res, v.Time); err != nil {
		return Result{}, err
	}
	if err := save(res.Feature, v); err != nil {
		return Result{}, err // on EConflict onFresh reloads
	}
	s.noteDefinition(cur.Feature(), res.Feature)
	s.swap(res.Feature.Key, cc)
	s.committed()
	return res, nil
}

// applyHeld makes ch a new version of the feature key as the store holds
// it (Store.UpdateFeatureWith): no other write of the feature can come
// between its read and its write. The caller holds s.mu.
func (s *Service) applyHeld(ctx context.Context, key string, ch change.Change, opts ChangeOptions) (Result, error) {
	var (
		res Result
		cc  *feature.Compiled
	)
	var before feature.Feature
	err := s.store.UpdateFeatureWith(ctx, key, func(f feature.Feature) (feature.Feature, Version, error) {
		before = f
		cur := s.Snapshot().Compiled(key)
		if cur == nil || cur.Feature().ID != f.ID || cur.Feature().Version != f.Version {
			if err := f.Validate(); err != nil {
				return feature.Feature{}, Version{}, fmt.Errorf("the stored configuration of feature %q is invalid: %w", key, err)
			}
			cur = s.compileFeature(f)
		}
		var v Version
		var err error
		if res, v, cc, err = s.prepare(cur, ch, opts); err != nil {
			return feature.Feature{}, Version{}, err
		}
		if v.Settles, err = opts.Idempotency.Settle(res, v.Time); err != nil {
			return feature.Feature{}, Version{}, err
		}
		return res.Feature, v, nil
	})
	if err != nil {
		return Result{}, err
	}
	s.noteDefinition(before, res.Feature)
	s.swap(key, cc)
	s.committed()
	return res, nil
}

// everywhere notes, for shareOut, a write that acted on every environment
// (an archive, a restore, a purge).
func (s *Service) everywhere() {
	if s.envs != nil && len(s.envs.List()) > 1 {
		s.redefined.Store(true)
	}
}

// noteDefinition notes, for shareOut, a write from before to after that
// changed the feature's definition, where there are other environments.
func (s *Service) noteDefinition(before, after feature.Feature) {
	if s.envs != nil && len(s.envs.List()) > 1 && environment.DefinitionDiffers(before, after) {
		s.redefined.Store(true)
	}
}

// prepare computes ch applied to cur: the result, its version and the
// compiled feature, refusing what a guard in opts refuses. It stores
// nothing.
func (s *Service) prepare(cur *feature.Compiled, ch change.Change, opts ChangeOptions) (Result, Version, *feature.Compiled, error) {
	next := cur.Feature().Clone()
	if err := ch.Apply(&next); err != nil {
		return Result{}, Version{}, nil, &changeError{err}
	}
	if err := plan.Splits(cur.Feature(), &next); err != nil {
		return Result{}, Version{}, nil, err
	}
	if err := next.Validate(); err != nil {
		return Result{}, Version{}, nil, err
	}
	if err := s.knownSegments(next); err != nil {
		return Result{}, Version{}, nil, err
	}
	if err := s.checkPrerequisites(cur.Feature(), next); err != nil {
		return Result{}, Version{}, nil, err
	}
	if err := s.envs.checkDefinition(s, cur.Feature(), next, opts.gate != nil); err != nil {
		return Result{}, Version{}, nil, err
	}
	now := s.now().UTC()
	next.Version, next.UpdatedAt = cur.Feature().Version+1, now
	cc := s.compileFeature(next)
	if err := cc.CheckPatterns(); err != nil {
		return Result{}, Version{}, nil, &changeError{err}
	}
	rep := cc.ReportFrom(cur)
	rep.Dependants = s.dependantChanges(cur, cc)
	if err := checkChurn(rep, opts); err != nil {
		return Result{}, Version{}, nil, err
	}
	res := Result{Feature: next, Report: rep, Shares: cc.Shares(), DryRun: opts.DryRun}
	if opts.gate != nil {
		err := opts.gate.check(cur, ch, res)
		if err != nil && opts.Submit && ch.Spec().Kind != "" && feature.ErrorCode(err) == feature.EForbidden {
			err = approvalOf(cur, ch, res)
		}
		switch _, approval := err.(*needsApproval); {
		case opts.DryRun && approval:
			res.Needs = "approval"
		case opts.DryRun && err != nil:
			res.Needs = "admin"
		case err != nil:
			return Result{}, Version{}, nil, err
		}
	}
	v := Version{Version: next.Version, Actor: actor(opts), Time: now, Summary: audit.VersionSummary(ch.Summary(), rep), Comment: opts.Comment, Config: next, OverrideCount: len(next.Overrides), Report: rep, Kind: ch.Kind(), Request: opts.request}
	return res, v, cc, nil
}

// swap installs a snapshot in which c serves key (nil: key is gone). The
// caller holds s.mu.
func (s *Service) swap(key string, c *feature.Compiled) {
	old := s.Snapshot()
	s.retire(old.Compiled(key))
	s.snap.Store(old.With(key, c))
}

func actor(opts ChangeOptions) string {
	if opts.Actor == "" {
		return "anonymous"
	}
	return opts.Actor
}
