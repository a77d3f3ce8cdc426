package rollout

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestSnapshotWithKeepsKeysSorted: with edits the sorted keys in place of
// sorting them again, and never changes those of the snapshot it copies.
func TestSnapshotWithKeepsKeysSorted(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	snap := newSnapshot(map[string]*compiled{}, 0)
	for i := range 2000 {
		key := fmt.Sprintf("f%02d", rng.IntN(40))
		var c *compiled
		if rng.IntN(3) > 0 {
			c = &compiled{}
		}
		before, kept := snap, slices.Clone(snap.keys)
		snap = snap.with(key, c)
		if want := slices.Sorted(maps.Keys(snap.features)); !slices.Equal(snap.keys, want) {
			t.Fatalf("step %d, with(%q, %v): keys = %q, want %q", i, key, c != nil, snap.keys, want)
		}
		if !slices.Equal(before.keys, kept) {
			t.Fatalf("step %d, with(%q, %v) changed the keys of the snapshot it copied: %q, were %q", i, key, c != nil, before.keys, kept)
		}
	}
}
