package evaluation

import (
	"encoding/binary"
	"encoding/hex"
	"sync"
	"time"

	"github.com/cespare/xxhash/v2"
	"github.com/rollout/rollout/rollout/feature"
)

// snapshotState is what the API derives from one snapshot of the service:
// its number among the snapshots this process has served, when the API first
// saw it, and the tag that bulk evaluation's ETags start with.
type snapshotState struct {
	snap *feature.Snapshot
	seq  uint64
	seen time.Time

	tagOnce sync.Once
	tag     [16]byte // hex

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
			if cur != nil {
				s.metrics.ForgetFeatures(removedKeys(cur.snap.Keys(), snap.Keys()))
			}
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
		d := xxhash.New()
		var n [8]byte
		for _, key := range st.snap.Keys() {
			f, _ := st.snap.Feature(key)
			d.WriteString(key)
			d.WriteString("\x00" + f.ID + "\x00")
			binary.LittleEndian.PutUint64(n[:], uint64(f.Version))
			d.Write(n[:])
		}
		hex.Encode(st.tag[:], d.Sum(nil))
	})
	return st.tag[:]
}

// removedKeys returns the keys of before, sorted, that after, sorted, does
// not have.
func removedKeys(before, after []string) []string {
	if len(before) == len(after) && (len(before) == 0 || &before[0] == &after[0]) {
		return nil // the same keys, shared
	}
	var out []string
	j := 0
	for _, k := range before {
		for j < len(after) && after[j] < k {
			j++
		}
		if j == len(after) || after[j] != k {
			out = append(out, k)
		}
	}
	return out
}
