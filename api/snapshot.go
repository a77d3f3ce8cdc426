package api

import (
	"encoding/hex"
	"sync"
	"time"

	"github.com/rollout/rollout/rollout"
)

// snapshotState is what the API derives from one snapshot of the service:
// its number among the snapshots this process has served, when the API first
// saw it, and the tag that bulk evaluation's ETags start with.
type snapshotState struct {
	snap *rollout.Snapshot
	seq  uint64
	seen time.Time

	tagOnce sync.Once
	tag     [16]byte // hex

	answers answers
}

// snapshotState returns the state of the service's current snapshot,
// deriving it when the snapshot is new. The API calls it after each change
// it applies and on every bulk evaluation and scrape, so a swap is seen at
// once when it comes through the API.
func (s *Server) snapshotState() *snapshotState {
	for {
		// Load the state before the snapshot: snapshots only move
		// forward, so a state installed meanwhile makes the swap below
		// fail rather than go back in time.
		cur := s.snap.Load()
		snap := s.svc.Snapshot()
		if cur != nil && cur.snap == snap {
			return cur
		}
		next := &snapshotState{snap: snap, seq: 1, seen: time.Now()}
		if cur != nil {
			next.seq = cur.seq + 1
		}
		if s.snap.CompareAndSwap(cur, next) {
			return next
		}
	}
}

// etagTag returns the hex of a hash of every feature's key, ID and version:
// it changes exactly when a feature is created, changed or deleted (a
// feature deleted and created again has a new ID), and is the same after a
// restart on the same database. It is computed once per snapshot.
func (st *snapshotState) etagTag() []byte {
	st.tagOnce.Do(func() {
		h := uint64(fnvOffset)
		var n [8]byte
		for _, key := range st.snap.Keys() {
			f, _ := st.snap.Feature(key)
			h = fnvString(h, key)
			h = fnvString(h, "\x00"+f.ID+"\x00")
			for i, v := 0, uint64(f.Version); i < 8; i, v = i+1, v>>8 {
				n[i] = byte(v)
			}
			h = fnvString(h, string(n[:]))
		}
		var sum [8]byte
		for i := range sum {
			sum[i] = byte(h >> (56 - 8*i))
		}
		hex.Encode(st.tag[:], sum[:])
	})
	return st.tag[:]
}

// FNV-1a, 64 bits: stable across processes, unlike hash/maphash, and
// computed in place without allocating.
const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func fnvString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= fnvPrime
	}
	return h
}
