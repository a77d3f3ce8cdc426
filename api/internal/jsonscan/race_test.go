//go:build race

package jsonscan

// raceEnabled: the race detector allocates, and sync.Pool drops items at
// random, so allocation counts mean nothing under it.
const raceEnabled = true
