package feature

import (
	"sync/atomic"

	"github.com/rollout/rollout/rollout/feature/hll"
)

// Distinct users are counted beside evaluations, per outcome, in a
// HyperLogLog sketch (package hll) made on the outcome's first evaluation
// after a take: an app that evaluates a feature 3 times for each of 2,000
// users reports 6,000 evaluations and ≈ 2,000 users. A sketch is 4 KiB;
// only outcomes that served someone since the last take hold one (and a
// spare, reused at the next take). A user served at the very instant a
// take swaps the sketch out may be missed by that take: sketches are
// estimates, about 1.6 % off (hll.RelativeError).

// userSketch is the distinct users of one outcome since the last take.
type userSketch struct {
	cur   atomic.Pointer[hll.Sketch]
	spare atomic.Pointer[hll.Sketch] // emptied, for the next install
}

// insert adds the user of hash h.
func (u *userSketch) insert(h uint64) {
	s := u.cur.Load()
	if s == nil {
		s = u.install()
	}
	s.Insert(h)
}

// install makes a sketch current, the spare if there is one, and returns
// the current one (another goroutine's, when it installed one first).
func (u *userSketch) install() *hll.Sketch {
	for {
		s := u.spare.Swap(nil)
		if s == nil {
			s = new(hll.Sketch)
		}
		if u.cur.CompareAndSwap(nil, s) {
			return s
		}
		u.spare.CompareAndSwap(nil, s)
		if cur := u.cur.Load(); cur != nil {
			return cur
		}
	}
}

// take swaps the current sketch out and returns it (nil: no user since
// the last take); give it back with recycle once read.
func (u *userSketch) take() *hll.Sketch { return u.cur.Swap(nil) }

// recycle empties s, taken from u, and keeps it for the next install.
func (u *userSketch) recycle(s *hll.Sketch) {
	s.Reset()
	u.spare.CompareAndSwap(nil, s)
}

// merge adds the users of the binary sketch data to u's current sketch
// (a take that failed to store them); malformed data adds none.
func (u *userSketch) merge(data []byte) {
	if hll.Check(data) != nil {
		return
	}
	s := u.cur.Load()
	if s == nil {
		s = u.install()
	}
	_ = s.UnmarshalBinary(data)
}

// Users returns the distinct users c served since the last take, per
// bucket name ("" for none), as sketches; nil when it served none.
func (c *Compiled) Users() map[string]*hll.Sketch {
	var out map[string]*hll.Sketch
	for i := range c.users {
		s := c.users[i].cur.Load()
		if s == nil {
			continue
		}
		if out == nil {
			out = map[string]*hll.Sketch{}
		}
		name := c.bucketName(c.outcomes[i].bucket)
		if out[name] == nil {
			out[name] = new(hll.Sketch)
		}
		out[name].Merge(s)
	}
	return out
}
