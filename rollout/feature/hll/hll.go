// Package hll counts distinct users in bounded memory: a HyperLogLog
// sketch of 4,096 one-byte registers (precision 12), updated without locks
// so that any number of evaluations add users to one sketch at once, and
// estimated by Ertl's improved estimator (no empirical bias tables), whose
// standard error is about 1.04/√4096 ≈ 1.6 % at every cardinality.
//
// Sketches of the same users' hashes merge by taking each register's
// maximum: the merge of the sketches of two sets is the sketch of their
// union, and merging a sketch twice changes nothing. That is what lets
// the counts of any number of instances and apps, flushed any number of
// times, add up to distinct users per bucket, per version and per day.
//
// The files: hll.go (Sketch, Hash), estimate.go (Estimate), encode.go
// (the binary form stored and sent: sparse for small sketches, dense
// otherwise).
package hll

import (
	"math/bits"
	"sync/atomic"
)

// Precision is the number of bits of a hash that pick a register; M is
// the number of registers.
const (
	Precision = 12
	M         = 1 << Precision
	// RelativeError is the sketch's standard error, relative to the
	// count: 1.04/√M.
	RelativeError = 0.01625
	// maxRank is the largest value a register holds: one plus the
	// leading zeros of the 64-Precision bits left of a hash.
	maxRank = 64 - Precision + 1
)

// Sketch is a HyperLogLog sketch. The zero Sketch is empty and ready;
// it is safe for concurrent use: Insert, Merge and reads may run at once.
// A Sketch must not be copied after first use.
type Sketch struct {
	// regs holds the registers, four to a word, register i in byte
	// i%4 of word i/4.
	regs [M / 4]atomic.Uint32
}

// Hash is the 64-bit hash of a user ID under which sketches count it: the
// FNV-1a hash of its bytes, mixed by MurmurHash3's finalizer so that
// every bit depends on every byte. It is the same in every process and
// version (sketches of apps and servers merge), it does not allocate, and
// it costs about a nanosecond a byte.
func Hash(user string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(user); i++ {
		h ^= uint64(user[i])
		h *= 1099511628211
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// Insert adds the user of hash h (see Hash). It does not allocate; most
// calls, once a sketch has seen many users, are one atomic load.
func (s *Sketch) Insert(h uint64) {
	i := h >> (64 - Precision)
	rank := uint32(bits.LeadingZeros64(h<<Precision|1<<(Precision-1))) + 1
	s.raise(int(i), rank)
}

// raise sets register i to rank unless it holds more.
func (s *Sketch) raise(i int, rank uint32) {
	w := &s.regs[i>>2]
	shift := uint(i&3) * 8
	for {
		old := w.Load()
		if (old>>shift)&0xff >= rank {
			return
		}
		if w.CompareAndSwap(old, old&^(0xff<<shift)|rank<<shift) {
			return
		}
	}
}

// Register returns the value of register i.
func (s *Sketch) Register(i int) uint8 {
	return uint8(s.regs[i>>2].Load() >> (uint(i&3) * 8))
}

// Merge adds the users of o to s (each register its maximum of the two).
func (s *Sketch) Merge(o *Sketch) {
	for k := range s.regs {
		v := o.regs[k].Load()
		if v == 0 {
			continue
		}
		for j := range 4 {
			if r := (v >> (j * 8)) & 0xff; r > 0 {
				s.raise(k*4+j, r)
			}
		}
	}
}

// Reset empties s. Inserts concurrent with it may land before or after.
func (s *Sketch) Reset() {
	for k := range s.regs {
		s.regs[k].Store(0)
	}
}

// Empty reports whether s has seen no user.
func (s *Sketch) Empty() bool {
	for k := range s.regs {
		if s.regs[k].Load() != 0 {
			return false
		}
	}
	return true
}
