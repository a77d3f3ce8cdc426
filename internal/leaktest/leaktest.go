// Package leaktest checks, in tests, that what a test opened and closed
// left no goroutine behind. It is for tests only.
package leaktest

import (
	"bytes"
	"runtime"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

// module marks the frames of this module's code in a goroutine's stack.
const module = "github.com/rollout/rollout/"

// Check notes the goroutines running now and returns a function, to defer,
// that fails t if goroutines started since are still running:
//
//   - at once, with no retry, any that runs this module's code or was
//     started by it: its owner's Close should have waited for it;
//   - after goleak's retries, any other (a library's goroutine that ends
//     soon after its owner is closed is given that time), except those
//     opts ignore.
func Check(t testing.TB, opts ...goleak.Option) func() {
	t.Helper()
	before := map[string]bool{}
	for _, g := range stacks() {
		before[id(g)] = true
	}
	opts = append(opts, goleak.IgnoreCurrent())
	return func() {
		t.Helper()
		for _, g := range stacks() {
			if !before[id(g)] && strings.Contains(g, module) && !strings.Contains(g, "leaktest.stacks") {
				t.Errorf("a goroutine of this module is still running after Close:\n%s", g)
			}
		}
		goleak.VerifyNone(t, opts...)
	}
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
