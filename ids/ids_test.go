package ids

import (
	"sort"
	"testing"
	"time"
)

func TestNewSortsByTimeAndValidates(t *testing.T) {
	t.Parallel()
	base := time.UnixMilli(1_700_000_000_000)
	var got []string
	for i := 0; i < 50; i++ {
		got = append(got, NewAt(Node, base.Add(time.Duration(i)*time.Millisecond)))
	}
	if !sort.StringsAreSorted(got) {
		t.Errorf("NewAt ids not sorted by time: %v", got)
	}
	for _, id := range got {
		if !Valid(Node, id) {
			t.Errorf("Valid(%q, %q) = false, want true", Node, id)
		}
	}
}

func TestValidRejects(t *testing.T) {
	t.Parallel()
	good := New(Site)
	for _, s := range []string{"", "site_", "pool" + good[4:], good + "x", good[:len(good)-1] + "U", "site_8" + good[6:]} {
		if Valid(Site, s) {
			t.Errorf("Valid(%q, %q) = true, want false", Site, s)
		}
	}
}
