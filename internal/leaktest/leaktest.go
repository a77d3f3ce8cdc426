// Package leaktest checks, in tests, that what a test opened and closed
// left no goroutine behind. It is for tests only.
package leaktest

import (
	"bytes"
	"runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// module marks the frames of this module's code in a goroutine's stack.
const module = "github.com/rollout/rollout/"

// Check notes the goroutines running now and returns a function, to defer,
// that fails t if goroutines started since are still running:
//
//   - at once, with no retry, any that runs the code of one of the packages
//     owners names (import paths; none means every package of this
//     module), or was started by it: its owner's Close should have waited
//     for it;
//   - after goleak's retries, any other: a library's goroutine that ends
//     soon after its owner is closed is given that time. So are an
//     http.Server's connection goroutines, whatever hooks of ours they
//     run: Shutdown closes idle connections without waiting for their
//     goroutines to return, and nothing else can wait for them.
func Check(t testing.TB, owners ...string) func() {
	t.Helper()
	before := map[string]bool{}
	for _, g := range stacks() {
		before[id(g)] = true
	}
	if len(owners) == 0 {
		owners = []string{module}
	}
	ignore := goleak.IgnoreCurrent()
	return func() {
		t.Helper()
		// A goroutine that is ending may still be listed for a moment
		// (net/http runs Shutdown's hooks in goroutines of their own):
		// look again, a little later each time, for about a second.
		var left []string
		for wait := time.Millisecond; ; wait *= 2 {
			left = left[:0]
			for _, g := range stacks() {
				if !before[id(g)] && !strings.Contains(g, "leaktest.stacks") && runs(g, owners) {
					left = append(left, g)
				}
			}
			if len(left) == 0 || wait > time.Second {
				break
			}
			time.Sleep(wait)
		}
		for _, g := range left {
			t.Errorf("a goroutine is still running after Close:\n%s", g)
		}
		goleak.VerifyNone(t, ignore)
	}
}

// runs reports whether the stack g holds a frame of one of the packages
// (or, ending in "/", the trees) owners names, its creator's included.
func runs(g string, owners []string) bool {
	if strings.Contains(g, "\ncreated by net/http.(*Server).Serve ") {
		return false
	}
	for _, o := range owners {
		if !strings.HasSuffix(o, "/") {
			o += "."
		}
		if strings.Contains(g, o) {
			return true
		}
	}
	return false
}

// stacks returns the stack of every goroutine, one string each.
func stacks() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for g := range bytes.SplitSeq(buf, []byte("\n\n")) {
		out = append(out, string(g))
	}
	return out
}

// id returns the "goroutine N" that starts a goroutine's stack.
func id(stack string) string {
	head, _, _ := strings.Cut(stack, " [")
	return head
}
