package ring

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
)

func mustNew(t testing.TB, buckets ...Bucket) *Ring {
	t.Helper()
	r, err := New(buckets...)
	if err != nil {
		t.Fatalf("New(%v): %v", buckets, err)
	}
	return r
}

func abc(t testing.TB) *Ring {
	return mustNew(t, Bucket{"A", 3}, Bucket{"B", 3}, Bucket{"C", 3})
}

// TestReferenceDoctest is the reference ring's doctest.
func TestReferenceDoctest(t *testing.T) {
	var empty Ring
	if got, ok := empty.Lookup("user1"); ok {
		t.Fatalf("empty ring: Lookup(user1) = %q, true; want no owner", got)
	}
	steps := []struct {
		ring *Ring
		key  string
		want string
	}{
		{mustNew(t, Bucket{"A", 3}), "user1", "A"},
		{abc(t), "user1", "B"},
		{abc(t).Without("B"), "user1", "C"},
		{abc(t).Without("B"), "user3", "C"},
	}
	for _, s := range steps {
		if got, ok := s.ring.Lookup(s.key); !ok || got != s.want {
			t.Errorf("%v: Lookup(%q) = %q, %v; want %q", s.ring.Buckets(), s.key, got, ok, s.want)
		}
	}
}

func TestHashIsFullMD5(t *testing.T) {
	// int(hashlib.md5(b"user1").hexdigest(), 16)
	got := Hash("user1").big().Text(16)
	want := "24c9e15e52afc47c225b757e7bee1f9d"
	if got != want {
		t.Errorf("Hash(user1) = %s, want %s", got, want)
	}
}

type vectors struct {
	Rings []struct {
		Buckets []vectorBucket     `json:"buckets"`
		Keys    []string           `json:"keys"`
		Expect  []string           `json:"expect"`
		Shares  map[string]float64 `json:"shares"`
	} `json:"rings"`
	Changes []struct {
		Before []vectorBucket     `json:"before"`
		After  []vectorBucket     `json:"after"`
		Op     string             `json:"op"`
		Churn  float64            `json:"churn"`
		Matrix map[string]float64 `json:"matrix"`
	} `json:"changes"`
}

type vectorBucket struct {
	Name     string `json:"name"`
	Replicas int    `json:"replicas"`
}

func toBuckets(vs []vectorBucket) []Bucket {
	out := make([]Bucket, len(vs))
	for i, v := range vs {
		out[i] = Bucket(v)
	}
	return out
}

func loadVectors(t *testing.T) vectors {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "ring_vectors.json"))
	if err != nil {
		t.Fatal(err)
	}
	var v vectors
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	if len(v.Rings) != 40 || len(v.Changes) != 40 {
		t.Fatalf("vectors: %d rings, %d changes; want 40 and 40", len(v.Rings), len(v.Changes))
	}
	return v
}

// TestVectorsAreTheReference checks that testdata holds the reference's
// vectors unchanged, when the shared reference is beside the checkout.
func TestVectorsAreTheReference(t *testing.T) {
	for _, name := range []string{"ring_vectors.json", "ring_reference.py"} {
		ref, err := os.ReadFile(filepath.Join("..", "..", "shared", "reference", name))
		if errors.Is(err, os.ErrNotExist) {
			t.Skip("../shared/reference is not beside this checkout")
		}
		if err != nil {
			t.Fatal(err)
		}
		ours, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			t.Fatal(err)
		}
		if string(ours) != string(ref) {
			t.Errorf("testdata/%s differs from ../shared/reference/%s", name, name)
		}
	}
}

func TestGoldenRings(t *testing.T) {
	for i, v := range loadVectors(t).Rings {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			r := mustNew(t, toBuckets(v.Buckets)...)
			for k, key := range v.Keys {
				if got, _ := r.Lookup(key); got != v.Expect[k] {
					t.Errorf("Lookup(%q) = %q, want %q", key, got, v.Expect[k])
				}
			}
			got := r.Shares()
			if len(got) != len(v.Shares) {
				t.Errorf("Shares() = %v, want %v", got, v.Shares)
			}
			for name, want := range v.Shares {
				if got[name] != want {
					t.Errorf("Shares()[%q] = %v, want %v", name, got[name], want)
				}
			}
		})
	}
}

func TestGoldenChanges(t *testing.T) {
	for i, v := range loadVectors(t).Changes {
		t.Run(fmt.Sprintf("%d-%s", i, v.Op), func(t *testing.T) {
			c := ChurnBetween(mustNew(t, toBuckets(v.Before)...), mustNew(t, toBuckets(v.After)...))
			if c.Total != v.Churn {
				t.Errorf("Total = %v, want %v", c.Total, v.Churn)
			}
			got := map[string]float64{}
			for _, m := range c.Moves {
				got[m.From+"->"+m.To] = m.Share
			}
			if len(got) != len(v.Matrix) {
				t.Errorf("Moves = %v, want %v", got, v.Matrix)
			}
			for k, want := range v.Matrix {
				if got[k] != want {
					t.Errorf("Moves[%s] = %v, want %v", k, got[k], want)
				}
			}
		})
	}
}

func TestSeedExample(t *testing.T) {
	before := abc(t)
	shares := before.Shares()
	for name, want := range map[string]float64{"A": 0.0825150, "B": 0.6477858, "C": 0.2696992} {
		if math.Abs(shares[name]-want) > 5e-8 {
			t.Errorf("Shares()[%q] = %.7f, want %.7f", name, shares[name], want)
		}
	}
	after, err := before.With(Bucket{"D", 3})
	if err != nil {
		t.Fatal(err)
	}
	c := ChurnBetween(before, after)
	if math.Abs(c.Total-0.2226766) > 5e-8 {
		t.Errorf("churn = %.7f, want 0.2226766", c.Total)
	}
	for _, m := range c.Moves {
		if m.To != "D" {
			t.Errorf("move %s->%s: every move must go into D", m.From, m.To)
		}
	}
	if c.Total != after.Shares()["D"] {
		t.Errorf("churn %v != D's share %v", c.Total, after.Shares()["D"])
	}
}

// TestSeedCounts counts the seed demo's 1,000,000 users.
func TestSeedCounts(t *testing.T) {
	if testing.Short() {
		t.Skip("counts a million keys")
	}
	before := abc(t)
	after, _ := before.With(Bucket{"D", 3})
	counts := map[string]int{}
	moved := 0
	for i := range 1_000_000 {
		key := fmt.Sprintf("user:%d", i)
		b, _ := before.Lookup(key)
		a, _ := after.Lookup(key)
		counts[b]++
		if a != b {
			moved++
			if a != "D" {
				t.Fatalf("%s moved %s->%s, not into D", key, b, a)
			}
		}
	}
	want := map[string]int{"A": 82_568, "B": 647_631, "C": 269_801}
	for name, n := range want {
		if counts[name] != n {
			t.Errorf("users in %s = %d, want %d", name, counts[name], n)
		}
	}
	if moved != 222_739 {
		t.Errorf("moved = %d, want 222739", moved)
	}
}

func TestNewRefusesCorruptRings(t *testing.T) {
	tests := []struct {
		name    string
		buckets []Bucket
		want    error
	}{
		{"empty name", []Bucket{{"", 1}}, ErrEmptyName},
		{"hash in name", []Bucket{{"a#1", 1}}, ErrNameHasHash},
		{"negative", []Bucket{{"a", -1}}, ErrNegative},
		{"duplicate", []Bucket{{"a", 1}, {"b", 1}, {"a", 2}}, ErrDuplicate},
		{"too many points", []Bucket{{"a", MaxPoints}, {"b", 1}}, ErrTooManyPoints},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := New(tt.buckets...); !errors.Is(err, tt.want) {
				t.Errorf("New(%v) error = %v, want %v", tt.buckets, err, tt.want)
			}
		})
	}
}

func TestLookupIndexNamesTheSameBucket(t *testing.T) {
	r := mustNew(t, Bucket{"on", 40}, Bucket{"off", 20}, Bucket{"beta", 7})
	buckets := r.Buckets()
	for i := range 2000 {
		key := fmt.Sprint("u", i)
		name, _ := r.Lookup(key)
		idx, ok := r.LookupIndex(Hash(key))
		if !ok || buckets[idx].Name != name {
			t.Fatalf("LookupIndex(%q) = %d (%v), want the index of %q in %v", key, idx, ok, name, buckets)
		}
	}
	var empty Ring
	if _, ok := empty.LookupIndex(Hash("u")); ok {
		t.Error("LookupIndex on an empty ring: ok = true")
	}
}
