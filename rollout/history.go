package rollout

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/rollout/rollout/rollout/feature"
	"github.com/rollout/rollout/rollout/history"
)

// History is read a page at a time, so that one request costs a bounded
// amount of work and memory however long a feature's history grows, and
// reads of it take turns on at most half the cores, so that they cannot
// slow evaluation, which never waits for them.
const (
	DefaultHistoryPage = 50  // versions per page when none is asked for
	MaxHistoryPage     = 500 // versions per page at most
	// historyChunk is how many versions UserHistory holds in memory at once.
	historyChunk = 50
)

// historyReads lets at most half the cores (at least one) read history at
// once; the others wait their turn. Its zero value is ready to use.
type historyReads struct {
	once    sync.Once
	slots   chan struct{}
	waiting atomic.Int64 // reads waiting for a slot
	points  atomic.Int64 // ring points user look-ups have hashed, in all
	// held, when not nil, is called by each read while it holds its slot
	// (tests).
	held func()
}

// acquire waits for a slot, or for ctx to end; release gives it back.
func (h *historyReads) acquire(ctx context.Context) error {
	h.once.Do(func() { h.slots = make(chan struct{}, historySlots()) })
	h.waiting.Add(1)
	select {
	case h.slots <- struct{}{}:
		h.waiting.Add(-1)
	case <-ctx.Done():
		h.waiting.Add(-1)
		return feature.Errorf(feature.EUnavailable, "the history read was given up while waiting for its turn: %v", context.Cause(ctx))
	}
	if h.held != nil {
		h.held()
	}
	return nil
}

func (h *historyReads) release() { <-h.slots }

// historySlots is how many history reads may run at once: half the cores
// Go may use, at least one.
func historySlots() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// HistoryStore reads the features' history (Service.Versions, Changes,
// Version, UserHistory).
type HistoryStore interface {
	// VersionSummaries returns the feature's history, newest first, at
	// most limit entries (all when limit <= 0) with a version below
	// before (no bound when before <= 0), without the overrides, which
	// can be many in every version: each entry's Config.Overrides is nil
	// and its OverrideCount says how many it had.
	VersionSummaries(ctx context.Context, key string, before, limit int) ([]Version, error)
	// UserVersions returns what VersionSummaries returns, with in each
	// entry's Config.Overrides the override of user alone (nil when it had
	// none): what a look-up of one user's history needs.
	UserVersions(ctx context.Context, key, user string, before, limit int) ([]Version, error)
	// Version returns one entry of the feature's history, with its whole
	// configuration, overrides included.
	Version(ctx context.Context, key string, version int) (Version, error)
	// Changes returns the versions of every existing feature that q
	// selects, newest first (by Seq, which it sets), with their comments
	// and without their overrides (as VersionSummaries): the audit log. A
	// feature that does not exist selects nothing; it is not an error.
	Changes(ctx context.Context, q ChangeQuery) ([]Version, error)
}

// UserHistory returns the bucket user had at each version of the feature
// below before (no bound when 0), newest first, at most limit versions
// (DefaultHistoryPage when 0, at most MaxHistoryPage), so that "why did this
// customer's experience change?" has an answer. next is the before of the
// page that follows, 0 when there is none.
//
// No ring is built: each ring point is hashed once per call, however many
// versions of the page have it, and each version then costs one comparison
// per point (at most MaxPoints), or none when its buckets and salt are
// those of the version after it. Look-ups take turns with other history reads (see Versions).
// Errors: EInvalid for a bad user ID or limit, ENotFound, EUnavailable when
// ctx ends while waiting, and the store's.
func (s *Service) UserHistory(ctx context.Context, key, user string, before, limit int) (page []history.Assignment, next int, err error) {
	if err := feature.ValidateUser(user); err != nil {
		return nil, 0, err
	}
	if limit == 0 {
		limit = DefaultHistoryPage
	}
	if limit < 0 || limit > MaxHistoryPage || before < 0 {
		return nil, 0, feature.Errorf(feature.EInvalid, "read at most %d versions at a time, below a version >= 0: got limit %d, before %d", MaxHistoryPage, limit, before)
	}
	if err := s.history.acquire(ctx); err != nil {
		return nil, 0, err
	}
	defer s.history.release()

	last := history.Lookup{Hashed: &s.history.points}
	for {
		// One more than the page still holds tells whether another follows.
		want := min(historyChunk, limit-len(page)+1)
		versions, err := s.store.UserVersions(ctx, key, user, before, want)
		if err != nil {
			return nil, 0, err
		}
		for _, v := range versions {
			if len(page) == limit {
				return page, before, nil
			}
			bucket, reason := last.Assign(v.Config, user)
			page = append(page, history.Assignment{Version: v.Version, Time: v.Time, Summary: v.Summary, Bucket: nullable(bucket), Reason: reason})
			before = v.Version
		}
		if len(versions) < want {
			return page, 0, nil
		}
	}
}

// nullable is s, or nil for "" (no bucket).
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
