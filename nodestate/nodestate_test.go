package nodestate

import (
	"strings"
	"testing"
)

// TestTableIsClosed walks the whole table: every target is a state, retired
// is final, and every state but retired can still reach retired.
func TestTableIsClosed(t *testing.T) {
	t.Parallel()
	for _, from := range States() {
		for _, to := range States() {
			got := CanTransition(from, to)
			want := false
			for _, x := range transitions[from] {
				want = want || x == to
			}
			if to == Failed {
				want = from.Active()
			}
			if got != want {
				t.Errorf("CanTransition(%s, %s) = %v, want %v", from, to, got, want)
			}
			if (Check(from, to) == nil) != got {
				t.Errorf("Check(%s, %s) disagrees with CanTransition", from, to)
			}
		}
	}
	for _, s := range States() {
		if s != Retired && !reaches(s, Retired, map[State]bool{}) {
			t.Errorf("state %s cannot reach retired", s)
		}
	}
	if len(transitions[Retired]) != 0 || CanTransition(Retired, Failed) {
		t.Errorf("retired is not final")
	}
}

func reaches(from, to State, seen map[State]bool) bool {
	if from == to {
		return true
	}
	seen[from] = true
	next := append([]State{}, transitions[from]...)
	if from.Active() {
		next = append(next, Failed)
	}
	for _, n := range next {
		if !seen[n] && reaches(n, to, seen) {
			return true
		}
	}
	return false
}

func TestLifecyclePath(t *testing.T) {
	t.Parallel()
	path := []State{Enrolling, Inspecting, Cleaning, Ready, Deploying, Deployed, Releasing, Cleaning, Ready, Retiring, Retired}
	for i := 1; i < len(path); i++ {
		if !CanTransition(path[i-1], path[i]) {
			t.Errorf("CanTransition(%s, %s) = false, want true", path[i-1], path[i])
		}
	}
}

func TestDiagramNamesEveryState(t *testing.T) {
	t.Parallel()
	d := Diagram()
	for _, s := range States() {
		if !strings.Contains(d, string(s)) {
			t.Errorf("Diagram() misses %s", s)
		}
	}
}
