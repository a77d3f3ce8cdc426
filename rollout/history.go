package rollout

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rollout/rollout/ring"
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
	points  atomic.Int64 // ring points hashed by user look-ups, in all
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
		return Errorf(EUnavailable, "the history read was given up while waiting for its turn: %v", context.Cause(ctx))
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

// Assignment is what a feature served one user at one version.
type Assignment struct {
	Version int       `json:"version"`
	Time    time.Time `json:"time"`
	Summary string    `json:"summary"`
	Bucket  *string   `json:"bucket"` // null: no bucket
	Reason  string    `json:"reason"`
}

// UserHistory returns the bucket user had at each version of the feature
// below before (no bound when 0), newest first, at most limit versions
// (DefaultHistoryPage when 0, at most MaxHistoryPage), so that "why did this
// customer's experience change?" has an answer. next is the before of the
// page that follows, 0 when there is none.
//
// Each version costs at most one hash per ring point (MaxPoints), and none
// when its buckets and salt are those of the version after it; no ring is
// built. Look-ups take turns with other history reads (see Versions).
// Errors: EInvalid for a bad user ID or limit, ENotFound, EUnavailable when
// ctx ends while waiting, and the store's.
func (s *Service) UserHistory(ctx context.Context, key, user string, before, limit int) (page []Assignment, next int, err error) {
	if err := ValidateUser(user); err != nil {
		return nil, 0, err
	}
	if limit == 0 {
		limit = DefaultHistoryPage
	}
	if limit < 0 || limit > MaxHistoryPage || before < 0 {
		return nil, 0, Errorf(EInvalid, "read at most %d versions at a time, below a version >= 0: got limit %d, before %d", MaxHistoryPage, limit, before)
	}
	if err := s.history.acquire(ctx); err != nil {
		return nil, 0, err
	}
	defer s.history.release()

	var last lookup
	for {
		// One more than the page still holds tells whether another follows.
		want := min(historyChunk, limit-len(page)+1)
		versions, err := s.store.Versions(ctx, key, before, want)
		if err != nil {
			return nil, 0, err
		}
		for _, v := range versions {
			if len(page) == limit {
				return page, before, nil
			}
			bucket, reason := s.assignAt(&last, v.Config, user)
			page = append(page, Assignment{Version: v.Version, Time: v.Time, Summary: v.Summary, Bucket: nullable(bucket), Reason: reason})
			before = v.Version
		}
		if len(versions) < want {
			return page, 0, nil
		}
	}
}

// lookup remembers the ring position a user had at one version, which the
// next version reuses when its ring and salt are the same.
type lookup struct {
	buckets []Bucket
	salt    string
	owner   string
	ok      bool
}

// assignAt is compiled.assign on configuration f, for one user, without
// compiling f: what f served user and why.
func (s *Service) assignAt(last *lookup, f Feature, user string) (bucket, reason string) {
	if !f.Enabled {
		return f.Fallback, ReasonDisabled
	}
	if b, ok := f.Overrides[user]; ok {
		return b, ReasonOverride
	}
	if last.ok && last.salt == f.Salt && slices.EqualFunc(last.buckets, f.Buckets, sameRingBucket) {
		return last.owner, ReasonRing
	}
	prefix := ""
	if f.Salt != "" {
		prefix = f.Salt + ":"
	}
	owner, _ := ring.Owner(ringBuckets(f.Buckets), userPosition(prefix, user))
	points := 0
	for _, b := range f.Buckets {
		points += b.Replicas
	}
	s.history.points.Add(int64(points))
	*last = lookup{buckets: f.Buckets, salt: f.Salt, owner: owner, ok: true}
	return owner, ReasonRing
}

func sameRingBucket(a, b Bucket) bool { return a.Name == b.Name && a.Replicas == b.Replicas }
