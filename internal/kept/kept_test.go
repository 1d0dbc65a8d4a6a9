package kept

import (
	"fmt"
	"testing"
	"time"
)

// TestMap: a value is kept for TTL from when it was fetched, forgotten on
// demand, and once SweepAt are held a Put drops the expired ones.
func TestMap(t *testing.T) {
	now := time.Unix(0, 0)
	m := Map[string, int]{TTL: time.Minute, Now: func() time.Time { return now }}
	if _, ok := m.Get("a"); ok {
		t.Fatal("Get on an empty map found a value")
	}
	m.Put("a", 1, now)
	now = now.Add(59 * time.Second)
	if v, ok := m.Get("a"); !ok || v != 1 {
		t.Errorf("Get 59s after = %v, %v; want 1, true", v, ok)
	}
	now = now.Add(time.Second)
	if _, ok := m.Get("a"); ok || m.Len() != 0 {
		t.Errorf("Get a minute after found the value (%d held); want it expired and dropped", m.Len())
	}
	m.Put("b", 2, now)
	m.Forget("b")
	if _, ok := m.Get("b"); ok {
		t.Error("Get after Forget found the value")
	}
	for i := range SweepAt {
		m.Put(fmt.Sprint(i), i, now)
	}
	now = now.Add(time.Minute)
	m.Put("fresh", 0, now)
	if m.Len() != 1 {
		t.Errorf("%d held after a Put at SweepAt, want 1 (the expired ones dropped)", m.Len())
	}
}
