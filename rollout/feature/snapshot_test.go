package feature

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
	snap := newSnapshot(map[string]*Compiled{}, 0)
	for i := range 2000 {
		key := fmt.Sprintf("f%02d", rng.IntN(40))
		var c *Compiled
		if rng.IntN(3) > 0 {
			c = &Compiled{}
		}
		before, kept := snap, slices.Clone(snap.keys)
		snap = snap.With(key, c)
		if want := slices.Sorted(maps.Keys(snap.features)); !slices.Equal(snap.keys, want) {
			t.Fatalf("step %d, with(%q, %v): keys = %q, want %q", i, key, c != nil, snap.keys, want)
		}
		if !slices.Equal(before.keys, kept) {
			t.Fatalf("step %d, with(%q, %v) changed the keys of the snapshot it copied: %q, were %q", i, key, c != nil, before.keys, kept)
		}
	}
}

// TestOutcomes: the outcome a snapshot serves a user is its evaluation but
// for the user ID, whatever the reason (the ring, an override, the kill
// switch with and without a fallback); evaluations with the same bucket and
// reason share one outcome; and both ways count the evaluation.
func TestOutcomes(t *testing.T) {
	base := Feature{Key: "f", Enabled: true, Salt: "f", Version: 3,
		Buckets:   []Bucket{{Name: "a", Replicas: 40, Value: []byte(`1`)}, {Name: "b", Replicas: 40, Value: []byte(`2`)}, {Name: "c", Replicas: 40}},
		Overrides: map[string]string{"vip": "c", "other-vip": "c", "tester": "a"}}
	disabled := base.Clone()
	disabled.Enabled = false
	fallback := disabled.Clone()
	fallback.Fallback = "b"
	for _, f := range []Feature{base, disabled, fallback} {
		c := compile(f)
		snap := newSnapshot(map[string]*Compiled{"f": c}, 1)
		byKind := map[[2]string]*Outcome{}
		users := []string{"vip", "other-vip", "tester"}
		for i := range 200 {
			users = append(users, fmt.Sprintf("user-%d", i))
		}
		for _, u := range users {
			want := c.peek(u)
			o, err := snap.EvaluateOutcome("f", u)
			if err != nil {
				t.Fatal(err)
			}
			got := o.Evaluation(u)
			if got.Feature != want.Feature || got.User != u || got.Bucket != want.Bucket || string(got.Value) != string(want.Value) ||
				got.Version != want.Version || got.Reason != want.Reason {
				t.Fatalf("enabled %v, fallback %q: outcome for %s = %+v, want %+v", f.Enabled, f.Fallback, u, got, want)
			}
			kind := [2]string{got.Bucket, got.Reason}
			if prev, ok := byKind[kind]; ok && prev != o {
				t.Fatalf("enabled %v: two outcomes for bucket %q by %s", f.Enabled, kind[0], kind[1])
			}
			byKind[kind] = o
			if e, _ := snap.Evaluate("f", u); e.Bucket != want.Bucket || e.Reason != want.Reason {
				t.Fatalf("Evaluate for %s = %+v, want %+v", u, e, want)
			}
		}
		if n := len(byKind); f.Enabled && n != 5 || !f.Enabled && n != 1 {
			t.Errorf("enabled %v, fallback %q: %d outcomes served, want 5 enabled (3 by the ring, 2 by overrides), 1 disabled", f.Enabled, f.Fallback, n)
		}
		var counted int64
		for _, p := range c.take(nil) {
			counted += p.n
		}
		if want := int64(2 * len(users)); counted != want {
			t.Errorf("enabled %v: %d evaluations counted, want %d", f.Enabled, counted, want)
		}
	}
}
