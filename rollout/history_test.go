package rollout_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rollout/rollout/rollout"
	"github.com/rollout/rollout/rollout/change"
	"github.com/rollout/rollout/rollout/feature"
)

// TestUserHistoryMatchesEachVersion walks a user's history page by page
// over random changes (buckets added, resized and removed, kill switch,
// overrides, new salts) and checks each version's bucket against the
// version's configuration evaluated on its own ring, and that the pages
// join up with nothing missing or repeated.
func TestUserHistoryMatchesEachVersion(t *testing.T) {
	svc, _ := newService(t)
	ctx := context.Background()
	mustCreate(t, svc, abc("f"))
	rng := rand.New(rand.NewPCG(3, 4))
	names := []string{"A", "B", "C", "D", "E"}
	users := []string{"user-1", "user-2", "vip", "user-4"}
	for i := range 40 {
		cur, _ := svc.Snapshot().Feature("f")
		name := names[rng.IntN(len(names))]
		var ch change.Change
		switch _, exists := cur.Bucket(name); {
		case i%9 == 0:
			ch = change.Reshuffle(fmt.Sprint("salt-", i))
		case i%7 == 0:
			ch = change.SetOverride("vip", cur.Buckets[0].Name)
		case i%11 == 0:
			ch = change.ClearOverride("vip")
		case !exists:
			ch = change.AddBucket(feature.Bucket{Name: name, Replicas: 1 + rng.IntN(50)})
		case rng.IntN(3) == 0 && len(cur.Buckets) > 1 && cur.Fallback != name && cur.Overrides["vip"] != name:
			ch = change.RemoveBucket(name)
		case rng.IntN(5) == 0:
			ch = change.Patch(nil, ptr(!cur.Enabled), ptr(cur.Buckets[0].Name))
		default:
			ch = change.UpdateBucket(name, ptr(1+rng.IntN(100)), nil)
		}
		if _, err := svc.Change(ctx, "f", ch, rollout.ChangeOptions{}); err != nil && feature.ErrorCode(err) != feature.EConflict {
			t.Fatalf("%s: %v", ch.Summary(), err)
		}
	}
	cur, _ := svc.Snapshot().Feature("f")
	for _, user := range users {
		want := cur.Version
		for before, pages := 0, 0; ; pages++ {
			page, next, err := svc.UserHistory(ctx, "f", user, before, 7)
			if err != nil {
				t.Fatal(err)
			}
			if len(page) > 7 {
				t.Fatalf("UserHistory(limit 7) returned %d versions", len(page))
			}
			for _, a := range page {
				if a.Version != want {
					t.Fatalf("page %d of %s's history has version %d, want %d", pages, user, a.Version, want)
				}
				v, err := svc.Version(ctx, "f", a.Version)
				if err != nil {
					t.Fatal(err)
				}
				got := ""
				if a.Bucket != nil {
					got = *a.Bucket
				}
				if wantBucket := bucketAt(t, v.Config, user); got != wantBucket {
					t.Errorf("version %d: %s had %q, want %q", a.Version, user, got, wantBucket)
				}
				want--
			}
			if next == 0 {
				break
			}
			if next != page[len(page)-1].Version {
				t.Fatalf("next = %d, want the last version of the page, %d", next, page[len(page)-1].Version)
			}
			before = next
		}
		if want != 0 {
			t.Errorf("%s's history stopped before version %d", user, want)
		}
	}
}

// TestUserHistoryWorkIsBounded checks that a look-up costs what its page
// holds, not what the history holds, and hashes each distinct ring point
// of the page's versions once.
func TestUserHistoryWorkIsBounded(t *testing.T) {
	svc, _ := newService(t)
	ctx := context.Background()
	f := feature.Feature{Key: "big", Enabled: true, Salt: "big"}
	for i := range 4 {
		f.Buckets = append(f.Buckets, feature.Bucket{Name: fmt.Sprint("b", i), Replicas: 250})
	}
	mustCreate(t, svc, f)
	const versions = 61
	for i := 2; i <= versions; i++ {
		if i%2 == 0 {
			mustChange(t, svc, "big", change.UpdateBucket("b0", ptr(250+i), nil))
		} else {
			mustChange(t, svc, "big", change.SetOverride("someone-else", "b1")) // the same ring
		}
	}
	const points = 1000 // about: b0 varies by 1 to 61 replicas
	for _, tt := range []struct {
		limit, wantLen, wantNext int
	}{
		{0, rollout.DefaultHistoryPage, versions - rollout.DefaultHistoryPage + 1},
		{10, 10, versions - 9},
		{1, 1, versions},
		{rollout.MaxHistoryPage, versions, 0},
	} {
		before := svc.HistoryPointsHashed()
		page, next, err := svc.UserHistory(ctx, "big", "user-1", 0, tt.limit)
		if err != nil {
			t.Fatal(err)
		}
		hashed := int(svc.HistoryPointsHashed() - before)
		if len(page) != tt.wantLen || next != tt.wantNext {
			t.Errorf("UserHistory(limit %d) = %d versions, next %d; want %d, next %d", tt.limit, len(page), next, tt.wantLen, tt.wantNext)
		}
		// Each distinct point once: b0's grow by one a version.
		if limit := min(len(page)*(points+versions), points+versions); hashed == 0 || hashed > limit {
			t.Errorf("UserHistory(limit %d) hashed %d ring points, want 1 to %d", tt.limit, hashed, limit)
		}
	}
	for _, limit := range []int{-1, rollout.MaxHistoryPage + 1} {
		if _, _, err := svc.UserHistory(ctx, "big", "user-1", 0, limit); feature.ErrorCode(err) != feature.EInvalid {
			t.Errorf("UserHistory(limit %d) = %v, want an %s error", limit, err, feature.EInvalid)
		}
	}
	if _, _, err := svc.UserHistory(ctx, "nope", "user-1", 0, 0); feature.ErrorCode(err) != feature.ENotFound {
		t.Errorf("UserHistory of a missing feature = %v, want %s", err, feature.ENotFound)
	}
}

// TestHistoryReadsTakeTurns starts more history reads than there are turns
// and checks that no more than the turns run at once, whatever mix of user
// look-ups and version lists they are, while evaluation goes on.
func TestHistoryReadsTakeTurns(t *testing.T) {
	svc, _ := newService(t)
	ctx := context.Background()
	mustCreate(t, svc, abc("f"))
	slots := rollout.HistorySlots()
	if want := max(1, runtime.GOMAXPROCS(0)/2); slots != want {
		t.Fatalf("HistorySlots() = %d, want %d (half of GOMAXPROCS)", slots, want)
	}
	var inside, most atomic.Int64
	release := make(chan struct{})
	svc.SetHistoryHook(func() {
		n := inside.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		<-release
		inside.Add(-1)
	})
	const reads = 6
	var wg sync.WaitGroup
	for i := range reads {
		wg.Go(func() {
			var err error
			if i%2 == 0 {
				_, _, err = svc.UserHistory(ctx, "f", "u", 0, 0)
			} else {
				_, err = svc.Versions(ctx, "f", 0, 10)
			}
			if err != nil {
				t.Error(err)
			}
		})
	}
	// Wait until every read has its turn or waits for one.
	for inside.Load() <= int64(slots) && (inside.Load() != int64(slots) || svc.HistoryWaiting() != int64(reads-slots)) {
		runtime.Gosched()
	}
	if _, err := svc.Evaluate("f", "u"); err != nil {
		t.Errorf("Evaluate while history reads wait: %v", err)
	}
	close(release)
	wg.Wait()
	if m := most.Load(); m != int64(slots) {
		t.Errorf("%d history reads ran at once, want at most %d", m, slots)
	}

	// A read that gives up waiting for its turn says so.
	entered, full := make(chan struct{}), make(chan struct{})
	svc.SetHistoryHook(func() { entered <- struct{}{}; <-full })
	var hold sync.WaitGroup
	for range slots {
		hold.Go(func() { svc.Versions(ctx, "f", 0, 1) })
		<-entered
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := svc.Versions(cancelled, "f", 0, 1); feature.ErrorCode(err) != feature.EUnavailable {
		t.Errorf("Versions with every turn taken and its context ended = %v, want %s", err, feature.EUnavailable)
	}
	close(full)
	hold.Wait()
}
