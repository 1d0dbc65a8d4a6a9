package boot

import (
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/better-compute/better-compute/kinds"
)

// TestChangesShareWrites: 64 boot entries set at once, against a disk that
// takes 5 ms a write, are each on disk when their SetEntry returns, in far
// fewer than 64 writes (each used to rewrite and fsync the whole table on
// its own, under the lock, one after the other), and a lookup answers while
// a write is in flight.
func TestChangesShareWrites(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "boot.json")
	tb, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	var writes atomic.Int32
	inWrite, release := make(chan struct{}), make(chan struct{})
	write := tb.write
	tb.write = func(b []byte) error {
		if writes.Add(1) == 1 {
			close(inWrite)
			<-release // the first write holds on until the lookup below answered
		}
		time.Sleep(5 * time.Millisecond)
		return write(b)
	}
	ids := func() map[string]bool {
		f := onDisk(t, path)
		got := map[string]bool{}
		for _, e := range f.Entries {
			got[e.NodeID] = true
		}
		return got
	}

	const n = 64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			id := fmt.Sprintf("node_%02d", i)
			if err := tb.SetEntry(kinds.BootEntry{NodeID: id, MACs: []string{fmt.Sprintf("52:54:00:00:01:%02x", i)}}); err != nil {
				t.Errorf("SetEntry(%s) = %v", id, err)
				return
			}
			if !ids()[id] {
				t.Errorf("SetEntry(%s) returned before its entry was on disk", id)
			}
		})
	}
	<-inWrite
	looked := make(chan struct{})
	go func() {
		tb.Lookup("52:54:00:00:01:00")
		close(looked)
	}()
	select {
	case <-looked:
	case <-time.After(10 * time.Second):
		t.Error("Lookup waited for a write in flight")
	}
	close(release)
	wg.Wait()
	if got := writes.Load(); got > n/4 {
		t.Errorf("%d writes for %d changes at once, want at most %d", got, n, n/4)
	}
	if got := len(ids()); got != n {
		t.Errorf("%d entries on disk, want %d", got, n)
	}
}
