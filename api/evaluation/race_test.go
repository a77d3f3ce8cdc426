//go:build race

package evaluation

// raceEnabled: the race detector allocates, and sync.Pool drops items at
// random, so allocation counts mean nothing under it.
const raceEnabled = true
