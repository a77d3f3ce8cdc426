package rollout

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/idempotency"
)

// User lists are segments that name their users (feature.Segment.List)
// rather than conditions: up to feature.MaxListUsers IDs, which the store
// keeps a row each (so that an edit writes what it adds and removes), and
// the snapshot hashed (feature.UserList). A change of a list is a change
// of a segment: its next version, with its size, and a new version of
// every feature that uses it, in one transaction; its history and the
// features' reports count the users that enter and leave the list, which
// are exactly those whose in_segment changes. The history does not name
// them.

// ListDiff is what a change does to a user list: the users it adds and
// removes (each counted once) and the list's size after it.
type ListDiff struct {
	Added   int `json:"added"`
	Removed int `json:"removed"`
	Size    int `json:"size"`
}

// compileStoredSegment compiles seg, read from st: a user list with the
// users st holds.
func compileStoredSegment(ctx context.Context, st SegmentStore, seg feature.Segment) (*feature.CompiledSegment, error) {
	if !seg.List {
		return feature.CompileSegment(seg), nil
	}
	users, err := st.SegmentUsers(ctx, seg.Key)
	if err != nil {
		return nil, fmt.Errorf("read the users of list %q: %w", seg.Key, err)
	}
	return feature.CompileUserList(seg, feature.NewUserList(seg.Key, users)), nil
}

// distinctUsers checks users (at most feature.MaxListUsers valid IDs, in
// the error at field) and returns them sorted, each once: a repeated ID
// counts once.
func distinctUsers(field string, users []string) ([]string, error) {
	if err := feature.ValidateListUsers(field, users); err != nil {
		return nil, err
	}
	out := slices.Clone(users)
	slices.Sort(out)
	return slices.Compact(out), nil
}

func listSummary(d ListDiff) string {
	return fmt.Sprintf("users: %d added, %d removed (%d listed)", d.Added, d.Removed, d.Size)
}

func listPopulation(key string, d ListDiff) func(from, to int) string {
	return func(from, to int) string {
		return fmt.Sprintf("users in list %s: %d enter and %d leave it (version %d → %d, %d listed)", key, d.Added, d.Removed, from, to, d.Size)
	}
}

// CreateUserList stores a new user list key of users at version 1.
func (s *Service) CreateUserList(ctx context.Context, key, description string, users []string, opts ChangeOptions) (SegmentResult, error) {
	if err := validateComment(opts.Comment); err != nil {
		return SegmentResult{}, err
	}
	users, err := distinctUsers("users", users)
	if err != nil {
		return SegmentResult{}, err
	}
	if err := s.mu.lock(ctx); err != nil {
		return SegmentResult{}, err
	}
	defer s.mu.Unlock()
	now := s.now().UTC()
	seg := feature.Segment{Key: key, Description: description, Conditions: []feature.Condition{}, List: true, Size: len(users), Version: 1, CreatedAt: now, UpdatedAt: now}
	if err := seg.Validate(); err != nil {
		return SegmentResult{}, err
	}
	if opts.IfMatch != "" {
		return SegmentResult{}, feature.Errorf(feature.EPrecondition, "segment %q does not exist yet, so If-Match cannot match: create it without If-Match", key)
	}
	if len(s.Snapshot().CompiledSegments()) >= feature.MaxSegments {
		return SegmentResult{}, feature.Errorf(feature.EInvalid, "there are %d segments already, the most there may be", feature.MaxSegments)
	}
	diff := &ListDiff{Added: len(users), Size: len(users)}
	res := SegmentResult{Segment: seg, Features: []string{}, DryRun: opts.DryRun, Users: diff}
	if _, ok := s.Snapshot().CompiledSegments()[key]; ok {
		return res, feature.Errorf(feature.EConflict, "segment %q already exists", key)
	}
	if opts.DryRun {
		return res, nil
	}
	v := feature.SegmentVersion{Version: 1, Actor: actor(opts), Time: now, Summary: fmt.Sprintf("created: a user list of %d users", len(users)), Comment: opts.Comment, Config: seg}
	settles, err := opts.Idempotency.Settle(res, now)
	if err != nil {
		return SegmentResult{}, err
	}
	if err := s.store.CreateUserList(ctx, seg, v, users, settles); err != nil {
		if feature.ErrorCode(err) == feature.EConflict {
			_ = s.reloadSegments(ctx)
		}
		return SegmentResult{}, err
	}
	segs := maps.Clone(s.Snapshot().CompiledSegments())
	segs[key] = feature.CompileUserList(seg, feature.NewUserList(key, users))
	s.installSegments(segs)
	s.committed()
	return res, nil
}

// ReplaceUserList makes users (and description) the user list key's, as
// its next version: the store adds the users it lacked and removes those
// users leaves out.
func (s *Service) ReplaceUserList(ctx context.Context, key, description string, users []string, opts ChangeOptions) (SegmentResult, error) {
	users, err := distinctUsers("users", users)
	if err != nil {
		return SegmentResult{}, err
	}
	return s.changeList(ctx, key, opts, func(ctx context.Context, cur *feature.CompiledSegment) (segmentEdit, []string, []string, error) {
		l := cur.Users()
		added, removed := l.Diff(users)
		d := ListDiff{Added: added, Removed: removed, Size: len(users)}
		seg := cur.Segment().Clone()
		seg.Description, seg.Size = description, d.Size
		e := segmentEdit{seg: seg, users: feature.NewUserList(key, users), diff: &d, summary: listSummary(d), population: listPopulation(key, d)}
		if opts.DryRun {
			return e, nil, nil, nil
		}
		// The IDs to remove: the stored ones users leaves out.
		stored, err := s.store.SegmentUsers(ctx, key)
		if err != nil {
			return e, nil, nil, err
		}
		var add, remove []string
		for _, u := range users {
			if !l.Has(u) {
				add = append(add, u)
			}
		}
		next := e.users
		for _, u := range stored {
			if !next.Has(u) {
				remove = append(remove, u)
			}
		}
		if len(add) != added || len(remove) != removed {
			// The stored list moved on from the snapshot's.
			return e, nil, nil, feature.Errorf(feature.EConflict, "user list %q changed meanwhile: try again", key)
		}
		return e, add, remove, nil
	})
}

// EditUserList adds the users of add to the user list key and removes
// those of remove, as its next version. Adding a listed user, or removing
// one that is not, changes nothing; a user in both is refused.
func (s *Service) EditUserList(ctx context.Context, key string, add, remove []string, opts ChangeOptions) (SegmentResult, error) {
	add, err := distinctUsers("add", add)
	if err != nil {
		return SegmentResult{}, err
	}
	if remove, err = distinctUsers("remove", remove); err != nil {
		return SegmentResult{}, err
	}
	for _, u := range add {
		if _, found := slices.BinarySearch(remove, u); found {
			return SegmentResult{}, feature.Errorf(feature.EInvalid, "user %q is both added and removed: give it once", feature.Abbreviate(u))
		}
	}
	return s.changeList(ctx, key, opts, func(ctx context.Context, cur *feature.CompiledSegment) (segmentEdit, []string, []string, error) {
		l := cur.Users()
		var adds, removes []string
		for _, u := range add {
			if !l.Has(u) {
				adds = append(adds, u)
			}
		}
		for _, u := range remove {
			if l.Has(u) {
				removes = append(removes, u)
			}
		}
		d := ListDiff{Added: len(adds), Removed: len(removes), Size: l.Len() + len(adds) - len(removes)}
		seg := cur.Segment().Clone()
		seg.Size = d.Size
		if d.Size > feature.MaxListUsers {
			return segmentEdit{}, nil, nil, feature.Errorf(feature.EInvalid, "user list %q would hold %d users; at most %d: remove some first", key, d.Size, feature.MaxListUsers).Within("add")
		}
		return segmentEdit{seg: seg, users: l.Edit(adds, removes), diff: &d, summary: listSummary(d), population: listPopulation(key, d)}, adds, removes, nil
	})
}

// changeList changes the user list key as edit says: edit returns the
// change and the IDs the store adds and removes.
func (s *Service) changeList(ctx context.Context, key string, opts ChangeOptions,
	edit func(ctx context.Context, cur *feature.CompiledSegment) (segmentEdit, []string, []string, error)) (SegmentResult, error) {
	if err := validateComment(opts.Comment); err != nil {
		return SegmentResult{}, err
	}
	res, err := func() (SegmentResult, error) {
		if err := s.mu.lock(ctx); err != nil {
			return SegmentResult{}, err
		}
		defer s.mu.Unlock()
		for attempt := 1; ; attempt++ {
			res, err := s.changeListLocked(ctx, key, opts, edit)
			if feature.ErrorCode(err) != feature.EConflict || attempt == 3 || errors.As(err, new(*changeError)) {
				return res, err
			}
			// Another instance moved the list or a feature on: catch up.
			if _, serr := s.syncLocked(ctx); serr != nil {
				return SegmentResult{}, serr
			}
		}
	}()
	if err == nil && !opts.DryRun {
		s.envs.syncOthers(ctx, s) // their features' versions were written too
	}
	return res, err
}

func (s *Service) changeListLocked(ctx context.Context, key string, opts ChangeOptions,
	edit func(ctx context.Context, cur *feature.CompiledSegment) (segmentEdit, []string, []string, error)) (SegmentResult, error) {
	cur, err := s.currentSegment(ctx, key, opts)
	if err != nil {
		return SegmentResult{}, err
	}
	if !cur.Segment().List {
		return SegmentResult{}, &changeError{feature.Errorf(feature.EInvalid, "segment %q is a segment of conditions, not a user list: change its conditions (PUT {\"description\",\"conditions\":[…]})", key)}
	}
	e, add, remove, err := edit(ctx, cur)
	if err != nil {
		if feature.ErrorCode(err) == feature.EInvalid {
			err = &changeError{err}
		}
		return SegmentResult{}, err
	}
	e.write = func(ctx context.Context, seg feature.Segment, v feature.SegmentVersion, versions []Version, settle *idempotency.Settlement) error {
		return s.store.UpdateUserList(ctx, seg, v, add, remove, versions, settle)
	}
	return s.changeSegment(ctx, cur, e, opts)
}
