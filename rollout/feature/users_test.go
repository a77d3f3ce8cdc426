package feature

import (
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/rollout/rollout/rollout/feature/hll"
)

func abFeature(t *testing.T) Feature {
	t.Helper()
	f := Feature{Key: "checkout", ID: "id-checkout", Enabled: true, Salt: "s", Version: 1,
		Buckets: []Bucket{{Name: "control", Replicas: 100}, {Name: "new", Replicas: 100}}}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	return f
}

// usersOf reads the distinct users of counts per bucket.
func usersOf(t *testing.T, counts []Exposure) (map[string]int64, map[string]int64) {
	t.Helper()
	users, evals := map[string]*hll.Sketch{}, map[string]int64{}
	for _, e := range counts {
		evals[e.Bucket] += e.Count
		if users[e.Bucket] == nil {
			users[e.Bucket] = new(hll.Sketch)
		}
		if err := users[e.Bucket].UnmarshalBinary(e.Users); err != nil {
			t.Fatalf("bucket %q: users sketch: %v", e.Bucket, err)
		}
	}
	out := map[string]int64{}
	for b, s := range users {
		out[b] = s.Count()
	}
	return out, evals
}

// TestDistinctUsersCounted: 2,000 users evaluated three times each are
// 6,000 evaluations but about 2,000 users, in both paths that serve
// (with and without a context); a take resets both, and a failed flush
// restores both.
func TestDistinctUsersCounted(t *testing.T) {
	snap := newSnapshot(map[string]*Compiled{"checkout": compile(abFeature(t))}, 0)
	for round := range 3 {
		for i := range 2000 {
			user := fmt.Sprint("user-", i)
			var err error
			if round == 0 {
				_, err = snap.Evaluate("checkout", user)
			} else {
				_, err = snap.EvaluateContext("checkout", user, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	c := snap.Compiled("checkout")
	counts := c.TakeExposures(nil)
	users, evals := usersOf(t, counts)
	var total int64
	for b, n := range users {
		total += n
		if evals[b] != 3*n && math.Abs(float64(evals[b])/3-float64(n)) > 0.03*float64(n) {
			t.Errorf("bucket %q: %d evaluations and %d users, want about 3 evaluations a user", b, evals[b], n)
		}
	}
	if math.Abs(float64(total)-2000) > 40 {
		t.Errorf("distinct users = %d, want 2000 ± 2 %%", total)
	}
	if again := c.TakeExposures(nil); len(again) != 0 {
		t.Errorf("a second take = %+v, want nothing", again)
	}
	c.Restore(counts)
	restored, _ := usersOf(t, c.Counts(nil))
	for b, n := range users {
		if restored[b] != n {
			t.Errorf("bucket %q after Restore: %d users, want %d", b, restored[b], n)
		}
	}
}

// TestPeekCountsNoUser: the dashboard's looks are not users.
func TestPeekCountsNoUser(t *testing.T) {
	snap := newSnapshot(map[string]*Compiled{"checkout": compile(abFeature(t))}, 0)
	for i := range 100 {
		if _, err := snap.Peek("checkout", fmt.Sprint(i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := snap.Compiled("checkout").Users(); got != nil {
		t.Errorf("Users() after peeks = %v, want nil", got)
	}
}

// TestEvaluateCountsUsersWithoutAllocating: counting a user costs an
// evaluation no allocation once its outcome's sketch exists.
func TestEvaluateCountsUsersWithoutAllocating(t *testing.T) {
	snap := newSnapshot(map[string]*Compiled{"checkout": compile(abFeature(t))}, 0)
	users := []string{"a", "b", "c", "d", "e", "f"}
	for _, u := range users {
		_, _ = snap.Evaluate("checkout", u)
	}
	i := 0
	if n := testing.AllocsPerRun(1000, func() { _, _ = snap.Evaluate("checkout", users[i%len(users)]); i++ }); n != 0 {
		t.Errorf("Evaluate allocates %v times, want 0", n)
	}
}

func TestValidateExposureBatchUsers(t *testing.T) {
	rule := ""
	good := Exposure{FeatureID: "id", Version: 1, Count: 1, Rule: &rule, Users: new(hll.Sketch).Append(nil)}
	if err := ValidateExposureBatch("batch-0001", []Exposure{good}); err != nil {
		t.Errorf("a batch with an empty sketch: %v", err)
	}
	bad := good
	bad.Users = []byte{1, 12, 'x'}
	if err := ValidateExposureBatch("batch-0001", []Exposure{bad}); ErrorCode(err) != EInvalid {
		t.Errorf("a malformed sketch: %v, want EInvalid", err)
	}
}

// TestUsersTakenWhileServing: evaluations on several goroutines while
// takes run lose no evaluation, and the users of every take together are
// the users served (run with -race).
func TestUsersTakenWhileServing(t *testing.T) {
	snap := newSnapshot(map[string]*Compiled{"checkout": compile(abFeature(t))}, 0)
	c := snap.Compiled("checkout")
	all := new(hll.Sketch)
	var evals int64
	take := func() {
		for _, e := range c.TakeExposures(nil) {
			evals += e.Count
			if err := all.UnmarshalBinary(e.Users); err != nil {
				t.Fatal(err)
			}
		}
	}
	done := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 5000 {
				_, _ = snap.Evaluate("checkout", fmt.Sprint("g", g, "-", i))
			}
		})
	}
	go func() { wg.Wait(); close(done) }()
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
			take()
		}
	}
	take()
	if evals != 20_000 {
		t.Errorf("evaluations taken = %d, want 20000", evals)
	}
	if got := all.Count(); math.Abs(float64(got)-20_000) > 600 {
		t.Errorf("users taken = %d, want ≈ 20000", got)
	}
}
