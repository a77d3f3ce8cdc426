// Package readmostly is a map for keys that are looked up far more often
// than they are added, such as the label values of a metric counted on
// every request.
package readmostly

import (
	"maps"
	"sync"
	"sync/atomic"
)

// Map maps keys to values, creating a key's value on first use. A key that
// exists is found in an immutable map read through an atomic pointer: no
// lock and no write to memory shared between cores, which every lookup
// would otherwise contend on. New keys go to a locked map, which replaces
// the read map once lookups have missed as often as it holds keys, as in
// sync.Map, so that copying costs O(1) per key. Unlike sync.Map it is
// typed, and creates a missing value under its lock, once. Safe for
// concurrent use; create it with New.
type Map[K comparable, V any] struct {
	read   atomic.Pointer[map[K]V]
	mu     sync.Mutex
	dirty  map[K]V // when not nil, every key: read's and the new ones
	misses int     // lookups that missed read since it was replaced
	create func(K) V
}

// New returns an empty Map whose values create makes, called with the
// Map's lock held.
func New[K comparable, V any](create func(K) V) *Map[K, V] {
	return &Map[K, V]{create: create}
}

// Get returns the value of k, created on first use.
func (m *Map[K, V]) Get(k K) V {
	read := m.read.Load()
	if read != nil {
		if v, ok := (*read)[k]; ok {
			return v
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if read = m.read.Load(); read != nil {
		if v, ok := (*read)[k]; ok {
			return v
		}
	}
	if m.dirty == nil {
		m.dirty = map[K]V{}
		if read != nil {
			maps.Copy(m.dirty, *read)
		}
	}
	v, ok := m.dirty[k]
	if !ok {
		v = m.create(k)
		m.dirty[k] = v
	}
	if m.misses++; m.misses >= len(m.dirty) {
		all := m.dirty
		m.read.Store(&all)
		m.dirty, m.misses = nil, 0
	}
	return v
}

// DeleteIf forgets the keys del picks, so that the next Get of one creates
// its value again.
func (m *Map[K, V]) DeleteIf(del func(K) bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	all := m.dirty
	if all == nil {
		all = map[K]V{}
		if read := m.read.Load(); read != nil {
			maps.Copy(all, *read)
		}
	}
	maps.DeleteFunc(all, func(k K, _ V) bool { return del(k) })
	m.read.Store(&all)
	m.dirty, m.misses = nil, 0
}
