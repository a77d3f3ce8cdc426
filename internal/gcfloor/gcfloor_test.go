package gcfloor

import (
	"runtime"
	"testing"
	"time"
)

func TestPercent(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		floor, live uint64
		want        int
	}{
		{32 * mib, 0, 0},             // no collection yet
		{32 * mib, 3 * mib, 966},     // rollout's heap at rest: a goal of 32 MiB
		{32 * mib, 16 * mib, 100},    // half the floor: Go's default already reaches it
		{32 * mib, 12 * mib, 166},    // 12 MiB × 2.66 = 32 MiB
		{32 * mib, 500 * mib, 100},   // a big heap is left as Go would
		{32 * mib, 1024, MaxPercent}, // a nearly empty one is bounded
	} {
		if got := Percent(c.floor, c.live); got != c.want {
			t.Errorf("Percent(%d, %d) = %d, want %d", c.floor, c.live, got, c.want)
		}
	}
}

func TestWanted(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	if !Wanted(getenv) {
		t.Error("no GOGC nor GOMEMLIMIT: want the floor")
	}
	env["GOGC"] = "100"
	if Wanted(getenv) {
		t.Error("GOGC=100 is the operator's choice: want no floor")
	}
	delete(env, "GOGC")
	env["GOMEMLIMIT"] = "1GiB"
	if Wanted(getenv) {
		t.Error("GOMEMLIMIT is the operator's choice: want no floor")
	}
}

// retained keeps a live heap for TestFloor.
var retained [][]*int

// TestFloor starts the floor in this process: after a collection of a small
// live heap the percentage rises so that the heap goal reaches the floor;
// a live heap above half the floor gets Go's default back at the next
// collection; stopping restores the percentage there was.
func TestFloor(t *testing.T) {
	before := int(read(gogc))
	const floor = 64 << 20
	stop := Start(floor)
	runtime.GC()
	waitFor(t, "the goal to reach the floor", func() bool {
		return read("/gc/heap/goal:bytes") >= floor*95/100 && int(read(gogc)) > 100
	})

	// A live heap of 48 MiB: more than half the floor.
	for range 48 {
		retained = append(retained, make([]*int, 1<<17)) // 1 MiB each
	}
	runtime.GC()
	waitFor(t, "Go's default for a big live heap", func() bool {
		runtime.GC()
		return int(read(gogc)) == 100
	})
	retained = nil

	// Overlapping starts: the last stop restores.
	stop2 := Start(floor / 2)
	stop()
	stop() // a second call of one stop changes nothing
	runtime.GC()
	waitFor(t, "the floor to stay while one start is in force", func() bool {
		runtime.GC()
		return int(read(gogc)) > 100
	})
	stop2()
	if got := int(read(gogc)); got != before {
		t.Errorf("after the last stop GOGC is %d, want %d as before", got, before)
	}
}

// waitFor waits up to 10 s for cond, collecting meanwhile: cleanups run
// after a collection, on a goroutine of their own.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited 10s for %s: GOGC %d, live heap %d, goal %d", what, read(gogc), read(liveHeap), read("/gc/heap/goal:bytes"))
		}
		time.Sleep(10 * time.Millisecond)
	}
}
