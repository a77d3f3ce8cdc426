package rollout

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/rollout/rollout/rollout/audit"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/idempotency"
)

// Segments are named sets of conditions that rules of any feature use
// (in_segment). A change of a segment is a change of every feature that
// uses it: the segment's new version and a new version of each such
// feature (summary "segment S changed: …") are written in one
// transaction, so that the audit log, the change feed and the in-app
// clients (whose sync form carries the segments a feature uses) follow it
// as they follow any change of a feature. A segment in use cannot be
// deleted. Segments cannot use in_segment, so they never loop.

// SegmentEvent returns the audit event of a segment's version v, of kind.
func SegmentEvent(kind audit.Kind, v feature.SegmentVersion) audit.Event {
	return audit.Event{Time: v.Time, Actor: v.Actor, Kind: kind, Subject: v.Config.Key,
		Summary: "segment " + v.Config.Key + " " + v.Summary, Comment: v.Comment, Version: v.Version}
}

// CommitSegment is the kind of the commit of a segment created, changed
// or deleted.
const CommitSegment CommitKind = "segment"

// SegmentStore keeps segments and their history.
//
// Errors as Store's: ENotFound, EConflict (the key is taken, the stored
// version moved on, or, for DeleteSegment, a feature uses the segment:
// the message names them), EUnavailable.
type SegmentStore interface {
	// Segments returns every segment, ordered by key.
	Segments(ctx context.Context) ([]feature.Segment, error)
	// CreateSegment stores a new segment at version 1 with its first
	// history entry, its audit event (SegmentEvent) and a CommitSegment,
	// and settles settle (when not nil) in the same transaction, as a
	// Version's Settles is settled.
	CreateSegment(ctx context.Context, seg feature.Segment, v feature.SegmentVersion, settle *idempotency.Settlement) error
	// UpdateSegment replaces the stored segment, which must be at version
	// seg.Version-1, with seg and appends v (with its audit event); and, in the same
	// transaction, writes each of features as UpdateFeature does (each
	// Version's Config at its Version, the stored one below it) and
	// settles settle, as CreateSegment does.
	UpdateSegment(ctx context.Context, seg feature.Segment, v feature.SegmentVersion, features []Version, settle *idempotency.Settlement) error
	// DeleteSegment removes the segment, which must be at version, with
	// its history, recording e (SegmentEvent of audit.SegmentDelete) in
	// the audit trail and settling settle; EConflict when a stored
	// feature's rules use it.
	DeleteSegment(ctx context.Context, key string, version int, e audit.Event, settle *idempotency.Settlement) error
	// CreateUserList is CreateSegment for a user list (seg.List), with
	// its users, each once.
	CreateUserList(ctx context.Context, seg feature.Segment, v feature.SegmentVersion, users []string, settle *idempotency.Settlement) error
	// UpdateUserList is UpdateSegment for a user list, which also adds
	// the users of add (none of which it holds; EConflict if one is) and
	// removes those of remove.
	UpdateUserList(ctx context.Context, seg feature.Segment, v feature.SegmentVersion, add, remove []string, features []Version, settle *idempotency.Settlement) error
	// SegmentUsers returns the user IDs of the user list key, sorted
	// (none for a segment of conditions); ENotFound when there is no such
	// segment.
	SegmentUsers(ctx context.Context, key string) ([]string, error)
	// SegmentVersions returns the segment's history, newest first, at
	// most limit entries (all when limit <= 0) below version before (no
	// bound when before <= 0).
	SegmentVersions(ctx context.Context, key string, before, limit int) ([]feature.SegmentVersion, error)
}

// SegmentResult is a segment after a change, with the features the
// change also changed (their keys, sorted).
type SegmentResult struct {
	Segment  feature.Segment `json:"segment"`
	Features []string        `json:"features"`
	DryRun   bool            `json:"dry_run"`
	// Needs, in an editor's dry run, is "admin" when the change would be
	// refused (approvals cover a feature that uses the segment).
	Needs string `json:"needs,omitempty"`
	// Users, for a change of a user list, is what it does to the list.
	Users *ListDiff `json:"users,omitempty"`
}

func segmentNotFound(key string) error {
	return feature.Errorf(feature.ENotFound, "segment %q does not exist", key)
}

// checkSegments refuses f when its rules use a segment that does not
// exist, in the store either. The caller holds s.mu.
func (s *Service) checkSegments(ctx context.Context, f feature.Feature) error {
	if s.knownSegments(f) != nil {
		if err := s.reloadSegments(ctx); err != nil { // made elsewhere?
			return err
		}
	}
	return s.knownSegments(f)
}

// isUnknownSegment reports whether err refuses rules that use a segment
// that does not exist (an EInvalid error).
func isUnknownSegment(err error) bool { return errors.As(err, new(*unknownSegment)) }

// compileFeature compiles f with the snapshot's segments.
func (s *Service) compileFeature(f feature.Feature) *feature.Compiled {
	return feature.Compile(f, s.Snapshot().CompiledSegments())
}

// reloadSegments reads every segment from the store into the snapshot and
// recompiles the features whose segments changed. The caller holds s.mu.
func (s *Service) reloadSegments(ctx context.Context) error {
	segs, err := s.store.Segments(ctx)
	if err != nil {
		return fmt.Errorf("reload segments: %w", err)
	}
	next := make(map[string]*feature.CompiledSegment, len(segs))
	cur := s.Snapshot().CompiledSegments()
	for _, seg := range segs {
		if c, ok := cur[seg.Key]; ok && c.Segment().Version == seg.Version && c.Segment().CreatedAt.Equal(seg.CreatedAt) {
			next[seg.Key] = c
			continue
		}
		if err := seg.ValidateStored(); err != nil {
			return fmt.Errorf("reload segment %q: the stored configuration is invalid: %w", seg.Key, err)
		}
		c, err := compileStoredSegment(ctx, s.store, seg)
		if err != nil {
			return fmt.Errorf("reload segment %q: %w", seg.Key, err)
		}
		next[seg.Key] = c
	}
	s.installSegments(next)
	return nil
}

// installSegments swaps in a snapshot with segments, every feature that
// uses a segment whose compiled form changed compiled anew. The caller
// holds s.mu.
func (s *Service) installSegments(segments map[string]*feature.CompiledSegment) {
	snap := s.Snapshot()
	changed := func(key string) bool { return snap.CompiledSegments()[key] != segments[key] }
	next := snap.WithSegments(segments)
	for _, key := range snap.Keys() {
		c := snap.Compiled(key)
		if slices.ContainsFunc(c.Feature().Segments(), changed) {
			s.retire(c)
			next = next.With(key, feature.Compile(c.Feature(), segments))
		}
	}
	s.snap.Store(next)
}

// CreateSegment stores seg as a new segment at version 1.
func (s *Service) CreateSegment(ctx context.Context, seg feature.Segment, opts ChangeOptions) (SegmentResult, error) {
	if err := validateComment(opts.Comment); err != nil {
		return SegmentResult{}, err
	}
	if err := s.mu.lock(ctx); err != nil {
		return SegmentResult{}, err
	}
	defer s.mu.Unlock()
	now := s.now().UTC()
	seg = seg.Clone()
	seg.Conditions = feature.CompactConditions(seg.Conditions)
	seg.Version, seg.CreatedAt, seg.UpdatedAt = 1, now, now
	if err := seg.Validate(); err != nil {
		return SegmentResult{}, err
	}
	if seg.List {
		return SegmentResult{}, feature.Errorf(feature.EInvalid, "segment %q is a user list: create it with its users (CreateUserList)", seg.Key)
	}
	if opts.IfMatch != "" {
		return SegmentResult{}, feature.Errorf(feature.EPrecondition, "segment %q does not exist yet, so If-Match cannot match: create it without If-Match", seg.Key)
	}
	if len(s.Snapshot().CompiledSegments()) >= feature.MaxSegments {
		return SegmentResult{}, feature.Errorf(feature.EInvalid, "there are %d segments already, the most there may be", feature.MaxSegments)
	}
	res := SegmentResult{Segment: seg, Features: []string{}, DryRun: opts.DryRun}
	if _, ok := s.Snapshot().CompiledSegments()[seg.Key]; ok {
		return res, feature.Errorf(feature.EConflict, "segment %q already exists", seg.Key)
	}
	if opts.DryRun {
		return res, nil
	}
	v := feature.SegmentVersion{Version: 1, Actor: actor(opts), Time: now, Summary: "created: " + change.AbbreviateSummary(feature.DescribeConditions(seg.Conditions)), Comment: opts.Comment, Config: seg}
	settles, err := opts.Idempotency.Settle(res, now)
	if err != nil {
		return SegmentResult{}, err
	}
	if err := s.store.CreateSegment(ctx, seg, v, settles); err != nil {
		if feature.ErrorCode(err) == feature.EConflict {
			_ = s.reloadSegments(ctx)
		}
		return SegmentResult{}, err
	}
	segs := maps.Clone(s.Snapshot().CompiledSegments())
	segs[seg.Key] = feature.CompileSegment(seg)
	s.installSegments(segs)
	s.committed()
	return res, nil
}

// UpdateSegment replaces the description and the conditions of the
// segment key, as its next version, and makes a new version of every
// feature that uses it.
func (s *Service) UpdateSegment(ctx context.Context, key, description string, conditions []feature.Condition, opts ChangeOptions) (SegmentResult, error) {
	res, err := s.updateSegmentLocking(ctx, key, description, conditions, opts)
	if err == nil && !opts.DryRun {
		s.envs.syncOthers(ctx, s) // their features' versions were written too
	}
	return res, err
}

func (s *Service) updateSegmentLocking(ctx context.Context, key, description string, conditions []feature.Condition, opts ChangeOptions) (SegmentResult, error) {
	if err := validateComment(opts.Comment); err != nil {
		return SegmentResult{}, err
	}
	if err := s.mu.lock(ctx); err != nil {
		return SegmentResult{}, err
	}
	defer s.mu.Unlock()
	for attempt := 1; ; attempt++ {
		res, err := s.updateSegment(ctx, key, description, conditions, opts)
		if feature.ErrorCode(err) != feature.EConflict || attempt == 3 || errors.As(err, new(*changeError)) {
			return res, err
		}
		// Another instance moved the segment or a feature on: catch up.
		if _, serr := s.syncLocked(ctx); serr != nil {
			return SegmentResult{}, serr
		}
	}
}

func (s *Service) updateSegment(ctx context.Context, key, description string, conditions []feature.Condition, opts ChangeOptions) (SegmentResult, error) {
	cur, err := s.currentSegment(ctx, key, opts)
	if err != nil {
		return SegmentResult{}, err
	}
	if cur.Segment().List {
		return SegmentResult{}, &changeError{feature.Errorf(feature.EInvalid, "segment %q is a user list: give its users (PUT {\"description\",\"users\":[…]}, or POST /api/segments/%s/users), not conditions", key, key)}
	}
	seg := cur.Segment().Clone()
	seg.Description, seg.Conditions = description, feature.Segment{Conditions: conditions}.Clone().Conditions
	seg.Conditions = feature.CompactConditions(seg.Conditions)
	summary := "changed: " + feature.DescribeConditions(seg.Conditions)
	if feature.SameConditions(cur.Segment().Conditions, seg.Conditions) {
		summary = "description changed"
	}
	return s.changeSegment(ctx, cur, segmentEdit{seg: seg, summary: summary,
		population: func(from, to int) string {
			return fmt.Sprintf("users matching in segment %s: as segment version %d said → as version %d says (%s)", key, from, to, feature.Abbreviate(feature.DescribeConditions(seg.Conditions)))
		},
		write: func(ctx context.Context, seg feature.Segment, v feature.SegmentVersion, versions []Version, settle *idempotency.Settlement) error {
			return s.store.UpdateSegment(ctx, seg, v, versions, settle)
		}}, opts)
}

// currentSegment returns the segment key as the snapshot has it (read
// again from the store when the snapshot lacks it), checking If-Match.
// The caller holds s.mu.
func (s *Service) currentSegment(ctx context.Context, key string, opts ChangeOptions) (*feature.CompiledSegment, error) {
	cur, ok := s.Snapshot().CompiledSegments()[key]
	if !ok {
		if err := s.reloadSegments(ctx); err != nil {
			return nil, err
		}
		if cur, ok = s.Snapshot().CompiledSegments()[key]; !ok {
			return nil, segmentNotFound(key)
		}
	}
	if opts.IfMatch != "" && opts.IfMatch != "*" && opts.IfMatch != cur.Segment().Tag() {
		return nil, &changeError{feature.Errorf(feature.EPrecondition, "segment %q is at version %d (ETag %q), not %s: reload it and decide again", key, cur.Segment().Version, cur.Segment().Tag(), opts.IfMatch)}
	}
	return cur, nil
}

// segmentEdit is a change of a segment that changeSegment applies.
type segmentEdit struct {
	seg     feature.Segment // the next configuration, but for its version and time
	users   *feature.UserList
	summary string // of the segment's history entry
	diff    *ListDiff
	// population says, in words, the population of the features that use
	// the segment that the change from version from to to changes.
	population func(from, to int) string
	// write stores the change (see SegmentStore.UpdateSegment).
	write func(ctx context.Context, seg feature.Segment, v feature.SegmentVersion, versions []Version, settle *idempotency.Settlement) error
}

// changeSegment applies e to the segment cur: the segment's next version
// and the next version of every feature that uses it, in every
// environment, in one transaction. The caller holds s.mu.
func (s *Service) changeSegment(ctx context.Context, cur *feature.CompiledSegment, e segmentEdit, opts ChangeOptions) (SegmentResult, error) {
	snap := s.Snapshot()
	key := cur.Segment().Key
	now := s.now().UTC()
	seg := e.seg
	seg.Version, seg.UpdatedAt = cur.Segment().Version+1, now
	if err := seg.Validate(); err != nil {
		return SegmentResult{}, &changeError{err}
	}
	summary := change.AbbreviateSummary(e.summary)
	compiled := feature.CompileSegmentAfter(seg, cur)
	if e.users != nil {
		compiled = feature.CompileUserList(seg, e.users)
	}
	segs := maps.Clone(snap.CompiledSegments())
	segs[key] = compiled
	users := snap.SegmentUsers(key)
	for _, fk := range users {
		if err := feature.Compile(snap.Compiled(fk).Feature(), segs).CheckPatterns(); err != nil {
			return SegmentResult{}, &changeError{feature.Errorf(feature.EInvalid, "segment %q: feature %q, which uses it, would pass the limits of its rules: %s", key, fk, feature.ErrorMessage(err))}
		}
	}
	res := SegmentResult{Segment: seg, Features: users, DryRun: opts.DryRun, Users: e.diff}
	if res.Features == nil {
		res.Features = []string{}
	}
	g, err := s.gateFor(ctx, opts)
	if err != nil {
		return SegmentResult{}, err
	}
	archived, err := s.archivedUsers(ctx, g, key)
	if err != nil {
		return SegmentResult{}, err
	}
	if err := g.checkSegment(key, users, archived); err != nil {
		if !opts.DryRun {
			return SegmentResult{}, &changeError{err}
		}
		res.Needs = "admin"
	}
	if opts.DryRun {
		return res, nil
	}
	var versions []Version
	nexts := map[string]*feature.Compiled{}
	population := feature.PopulationChange{When: "in segment " + key, From: "segment version " + strconv.Itoa(cur.Segment().Version), To: "segment version " + strconv.Itoa(seg.Version),
		Text: e.population(cur.Segment().Version, seg.Version)}
	if e.diff != nil {
		population.Added, population.Removed = e.diff.Added, e.diff.Removed
	}
	// version is the new version of the feature c (of the environment
	// env, "" for this one) that serves the segment as seg says.
	version := func(c *feature.Compiled, segs map[string]*feature.CompiledSegment, env string) (Version, *feature.Compiled) {
		next := c.Feature().Clone()
		next.Version, next.UpdatedAt = c.Feature().Version+1, now
		cc := feature.Compile(next, segs)
		rep := cc.ReportFrom(c)
		rep.Rules = []feature.PopulationChange{population}
		return Version{Version: next.Version, Actor: actor(opts), Time: now, Summary: change.AbbreviateSummary(fmt.Sprintf("segment %s %s", key, summary)),
			Comment: opts.Comment, Config: next, OverrideCount: len(next.Overrides), Report: rep, Environment: env}, cc
	}
	for _, fk := range users {
		v, cc := version(snap.Compiled(fk), segs, "")
		nexts[fk] = cc
		versions = append(versions, v)
	}
	// A segment is shared: the features of the other environments that
	// use it get their version in the same transaction. (A write of one of
	// them made meanwhile fails it with EConflict: try again.)
	for _, o := range s.envs.others(s) {
		osnap := o.Snapshot()
		osegs := maps.Clone(osnap.CompiledSegments())
		osegs[key] = compiled
		for _, fk := range osnap.SegmentUsers(key) {
			v, _ := version(osnap.Compiled(fk), osegs, o.env)
			versions = append(versions, v)
		}
	}
	v := feature.SegmentVersion{Version: seg.Version, Actor: actor(opts), Time: now, Summary: summary, Comment: opts.Comment, Config: seg}
	settles, err := opts.Idempotency.Settle(res, now)
	if err != nil {
		return SegmentResult{}, err
	}
	if err := e.write(ctx, seg, v, versions, settles); err != nil {
		return SegmentResult{}, err
	}
	next := s.Snapshot().WithSegments(segs)
	for _, fk := range users {
		s.retire(next.Compiled(fk))
		next = next.With(fk, nexts[fk])
	}
	s.snap.Store(next)
	s.committed()
	return res, nil
}

// archivedUsers returns the keys of the archived features whose rules use
// the segment key, when gate g may need them (an editor's change: a
// restore serves them again with the segment as it is then); none for a
// nil gate.
func (s *Service) archivedUsers(ctx context.Context, g *gate, key string) ([]string, error) {
	if g == nil {
		return nil, nil
	}
	fs, err := s.store.ArchivedFeatures(ctx)
	if err != nil {
		return nil, fmt.Errorf("read archived features: %w", err)
	}
	var out []string
	for _, f := range fs {
		if slices.Contains(f.Segments(), key) {
			out = append(out, f.Key)
		}
	}
	return out, nil
}

// DeleteSegment removes the segment key and its history. A segment that
// a feature's rules use is refused (EConflict, naming the features).
func (s *Service) DeleteSegment(ctx context.Context, key string, opts ChangeOptions) (SegmentResult, error) {
	if err := validateComment(opts.Comment); err != nil {
		return SegmentResult{}, err
	}
	if err := s.mu.lock(ctx); err != nil {
		return SegmentResult{}, err
	}
	defer s.mu.Unlock()
	cur, ok := s.Snapshot().CompiledSegments()[key]
	if !ok {
		if err := s.reloadSegments(ctx); err != nil {
			return SegmentResult{}, err
		}
		if cur, ok = s.Snapshot().CompiledSegments()[key]; !ok {
			return SegmentResult{}, segmentNotFound(key)
		}
	}
	if opts.IfMatch != "" && opts.IfMatch != "*" && opts.IfMatch != cur.Segment().Tag() {
		return SegmentResult{}, feature.Errorf(feature.EPrecondition, "segment %q is at version %d (ETag %q), not %s: reload it and decide again", key, cur.Segment().Version, cur.Segment().Tag(), opts.IfMatch)
	}
	if users := s.Snapshot().SegmentUsers(key); len(users) > 0 {
		return SegmentResult{}, feature.Errorf(feature.EConflict, "segment %q is in use by feature(s) %s: remove it from their rules first", key, strings.Join(users, ", "))
	}
	res := SegmentResult{Segment: cur.Segment(), Features: []string{}, DryRun: opts.DryRun}
	if opts.DryRun {
		return res, nil
	}
	now := s.now().UTC()
	settles, err := opts.Idempotency.Settle(res, now)
	if err != nil {
		return SegmentResult{}, err
	}
	gone := feature.SegmentVersion{Version: cur.Segment().Version, Actor: actor(opts), Time: now, Summary: "deleted", Comment: opts.Comment, Config: cur.Segment()}
	if err := s.store.DeleteSegment(ctx, key, cur.Segment().Version, SegmentEvent(audit.SegmentDelete, gone), settles); err != nil {
		return SegmentResult{}, err
	}
	segs := maps.Clone(s.Snapshot().CompiledSegments())
	delete(segs, key)
	s.installSegments(segs)
	s.committed()
	return res, nil
}

// SegmentVersions returns the segment's history, newest first; see
// SegmentStore.SegmentVersions. It takes turns with other history reads.
func (s *Service) SegmentVersions(ctx context.Context, key string, before, limit int) ([]feature.SegmentVersion, error) {
	if err := s.history.acquire(ctx); err != nil {
		return nil, err
	}
	defer s.history.release()
	return s.store.SegmentVersions(ctx, key, before, limit)
}

// unknownSegment refuses a feature whose rules use a segment the snapshot
// lacks.
type unknownSegment struct{ err *feature.Error }

func (e *unknownSegment) Error() string { return e.err.Error() }
func (e *unknownSegment) Unwrap() error { return e.err }

// knownSegments refuses f when its rules use a segment the snapshot
// lacks (see checkSegments, which asks the store too).
func (s *Service) knownSegments(f feature.Feature) error {
	var missing []string
	for _, key := range f.Segments() {
		if _, ok := s.Snapshot().CompiledSegments()[key]; !ok {
			missing = append(missing, key)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return &unknownSegment{err: &feature.Error{Code: feature.EInvalid, Message: fmt.Sprintf("in_segment names segment(s) %s, which do(es) not exist: create them first (POST /api/segments)", strings.Join(missing, ", "))}}
}
