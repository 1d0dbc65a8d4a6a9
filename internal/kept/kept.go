// Package kept keeps answers for a while: what a peer answered that stays
// good for a time to live (a BMC's service root, a resolved secret), so
// the next caller within it need not ask again.
package kept

import (
	"sync"
	"time"
)

// SweepAt is how many entries a Map holds before a Put drops the expired
// ones: a site agent asks thousands of BMCs, and an entry nobody asks for
// again would otherwise stay for the process's life.
const SweepAt = 1024

// Map keeps values by key for TTL from when each was fetched. The zero
// value with TTL set is ready; safe for concurrent use.
type Map[K comparable, V any] struct {
	TTL time.Duration
	Now func() time.Time // time.Now when nil; tests set a clock

	mu sync.Mutex
	m  map[K]entry[V]
}

type entry[V any] struct {
	v  V
	at time.Time
}

// Clock is the map's time: what a caller reads before it asks the peer,
// to Put the answer at.
func (m *Map[K, V]) Clock() time.Time {
	if m.Now == nil {
		return time.Now()
	}
	return m.Now()
}

// Get returns k's value if it was fetched less than TTL ago; an expired
// one is dropped.
func (m *Map[K, V]) Get(k K) (V, bool) {
	now := m.Clock()
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.m[k]
	if ok && now.Sub(e.at) >= m.TTL {
		delete(m.m, k)
		ok = false
	}
	return e.v, ok
}

// Put keeps v for k as fetched at at.
func (m *Map[K, V]) Put(k K, v V, at time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[K]entry[V]{}
	}
	if len(m.m) >= SweepAt {
		for old, e := range m.m {
			if at.Sub(e.at) >= m.TTL {
				delete(m.m, old)
			}
		}
	}
	m.m[k] = entry[V]{v, at}
}

// Forget drops k, so the next caller asks the peer again.
func (m *Map[K, V]) Forget(k K) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.m, k)
}

// Len is how many entries are held, expired ones not yet dropped included.
func (m *Map[K, V]) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.m)
}
