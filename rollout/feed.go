package rollout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/rollout/rollout/rollout/feature"
)

// Following the store. Several instances may share one database; each
// keeps its own snapshot. Every committed change writes a commit to the
// store's feed, numbered by a revision. Sync reads the commits the snapshot
// has not seen and reloads only the features they name; Follow runs Sync
// whenever the store notifies a commit (PostgreSQL's LISTEN) and at every
// tick of an interval, the fallback for notifications lost while a
// connection was down.

// FeedStore reads the change feed: the commits of every instance sharing
// the database (see Store).
type FeedStore interface {
	// Revision returns the revision of the last commit, 0 when there is
	// none.
	Revision(ctx context.Context) (int64, error)
	// Commits returns the commits with a revision above since, oldest
	// first, at most limit of them (all when limit <= 0).
	Commits(ctx context.Context, since int64, limit int) ([]Commit, error)
}

// syncBatch is how many commits one read of the feed takes.
const syncBatch = 1000

// DefaultSyncInterval is how often Follow polls the store's feed.
const DefaultSyncInterval = time.Second

// FollowOptions configure Follow.
type FollowOptions struct {
	// Interval between polls of the feed; 0 means DefaultSyncInterval.
	Interval time.Duration
	// Notify delivers the revisions the store announces; nil means
	// polling only.
	Notify <-chan int64
	// Committed, when not nil, is called after each Sync that saw new
	// commits, with them (token commits included: the caller refreshes
	// its tokens).
	Committed func([]Commit)
	// Report receives the failures of Sync; nil drops them.
	Report func(error)
}

// Follow keeps the snapshot up to date with the store until ctx is done.
// It also syncs right after each change this service commits, so that
// subscribers hear of local changes at once.
func (s *Service) Follow(ctx context.Context, opts FollowOptions) {
	if opts.Interval <= 0 {
		opts.Interval = DefaultSyncInterval
	}
	tick := time.NewTicker(opts.Interval)
	defer tick.Stop()
	notify := opts.Notify
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.kick:
		case rev, ok := <-notify:
			if !ok {
				notify = nil // the store stopped notifying: poll only
				continue
			}
			if rev <= s.Snapshot().Revision() {
				continue // seen already
			}
		case <-tick.C:
		}
		commits, err := s.Sync(ctx)
		if err != nil && ctx.Err() == nil && opts.Report != nil {
			opts.Report(err)
		}
		if len(commits) > 0 && opts.Committed != nil {
			opts.Committed(commits)
		}
	}
}

// Sync brings the snapshot up to date with the store: it reads the commits
// after the snapshot's revision and reloads the features they name. It
// returns the commits it took in. A feature the store holds in a form that
// does not validate keeps its last good configuration, and the error says
// which; the others are taken in all the same.
func (s *Service) Sync(ctx context.Context) ([]Commit, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.syncLocked(ctx)
}

// syncLocked is Sync; the caller holds s.mu.
func (s *Service) syncLocked(ctx context.Context) ([]Commit, error) {
	var (
		seen []Commit
		errs []error
	)
	for {
		commits, err := s.store.Commits(ctx, s.Snapshot().Revision(), syncBatch)
		if err != nil {
			return seen, errors.Join(append(errs, fmt.Errorf("read the change feed: %w", err))...)
		}
		if len(commits) == 0 {
			return seen, errors.Join(errs...)
		}
		var keys []string
		segments := false
		for _, c := range commits {
			switch c.Kind {
			case CommitFeature:
				keys = append(keys, c.Key)
			case CommitSegment:
				segments = true
			}
		}
		if segments { // first: the features of the batch compile with them
			if err := s.reloadSegments(ctx); err != nil {
				return seen, errors.Join(append(errs, err)...) // try again later from here
			}
		}
		slices.Sort(keys)
		for _, key := range slices.Compact(keys) {
			if _, err := s.reload(ctx, key); err != nil {
				if feature.ErrorCode(err) == feature.EUnavailable {
					return seen, errors.Join(append(errs, err)...) // try again later from here
				}
				errs = append(errs, err)
			}
		}
		s.snap.Store(s.Snapshot().At(commits[len(commits)-1].Revision))
		s.publish(commits)
		seen = append(seen, commits...)
		if len(commits) < syncBatch {
			return seen, errors.Join(errs...)
		}
	}
}

// reload reads the feature key from the store and puts it in the snapshot,
// or takes it out when the store no longer has it. It returns what the
// snapshot serves for key afterwards (nil: nothing). A configuration
// already in the snapshot (the same feature at the same version) is kept,
// not compiled again. The caller holds s.mu.
func (s *Service) reload(ctx context.Context, key string) (*feature.Compiled, error) {
	cur := s.Snapshot().Compiled(key)
	f, err := s.store.Feature(ctx, key)
	switch {
	case feature.ErrorCode(err) == feature.ENotFound:
		if cur != nil {
			s.swap(key, nil)
		}
		return nil, nil
	case err != nil:
		return cur, fmt.Errorf("reload feature %q: %w", key, err)
	case cur != nil && cur.Feature().ID == f.ID && cur.Feature().Version == f.Version:
		return cur, nil
	}
	if err := f.ValidateStored(true); err != nil {
		return cur, fmt.Errorf("reload feature %q: the stored configuration is invalid, keeping version %d: %w", key, versionOf(cur), err)
	}
	c := s.compileFeature(f)
	s.swap(key, c)
	return c, nil
}

// known returns the feature key from the snapshot or, when the snapshot
// lacks it (made elsewhere, not yet synced), from the store; ENotFound when
// neither has it.
func (s *Service) known(ctx context.Context, key string) (*feature.Compiled, error) {
	if c := s.Snapshot().Compiled(key); c != nil {
		return c, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, err := s.reload(ctx, key)
	if err == nil && c == nil {
		err = feature.NotFound(key)
	}
	return c, err
}

func versionOf(c *feature.Compiled) int {
	if c == nil {
		return 0
	}
	return c.Feature().Version
}

// matches reports whether c is the configuration an If-Match tag names;
// an empty tag names any.
func matches(c *feature.Compiled, tag string) bool {
	return c != nil && (tag == "" || tag == "*" || tag == c.Feature().Tag())
}

// changeError marks a change refused for what it asks (a bucket that
// exists already, say), as opposed to a store's refusal: those are not
// retried on a reloaded feature.
type changeError struct{ err error }

func (e *changeError) Error() string { return e.err.Error() }
func (e *changeError) Unwrap() error { return e.err }

// subscriberBuffer is how many batches of commits a subscriber may fall
// behind before it is dropped.
const subscriberBuffer = 64

// Subscribe returns a channel that receives, in order, the commits each
// Sync takes in (after the snapshot holds them), and a function that ends
// the subscription. A subscriber that falls more than a few dozen batches
// behind has its channel closed: it should start again from a fresh
// snapshot. Safe for concurrent use.
func (s *Service) Subscribe() (<-chan []Commit, func()) {
	ch := make(chan []Commit, subscriberBuffer)
	s.subMu.Lock()
	if s.subs == nil {
		s.subs = map[chan []Commit]bool{}
	}
	s.subs[ch] = true
	s.subMu.Unlock()
	return ch, func() {
		s.subMu.Lock()
		defer s.subMu.Unlock()
		if s.subs[ch] {
			delete(s.subs, ch)
			close(ch)
		}
	}
}

// publish sends commits to every subscriber, dropping those that lag.
func (s *Service) publish(commits []Commit) {
	s.subMu.Lock()
	defer s.subMu.Unlock()
	for ch := range s.subs {
		select {
		case ch <- commits:
		default:
			delete(s.subs, ch)
			close(ch)
		}
	}
}

// committed tells Follow that this service committed a change, so that it
// syncs now rather than at the next tick. It never blocks.
func (s *Service) committed() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}
