package cache

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/kinds"
)

// TestEnsureCounts: concurrent ensures of an absent image are misses whose
// bytes add up to one download; an ensure of a present image is a hit that
// fetched nothing; a refused image counts nothing.
func TestEnsureCounts(t *testing.T) {
	t.Parallel()
	img := []byte("counted image bytes")
	src := startSource(t, img, 100*time.Millisecond)
	c, _ := newCache(t)
	var mu sync.Mutex
	got := map[bool]int{}
	var fetched int64
	c.Count = func(hit bool, n int64) {
		mu.Lock()
		defer mu.Unlock()
		got[hit]++
		fetched += n
	}
	in := kinds.EnsureImageInput{Source: src.srv.URL + "/img", Digest: digest(img), Size: int64(len(img))}
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() {
			if _, err := c.Ensure(context.Background(), in, nil); err != nil {
				t.Errorf("Ensure() = %v", err)
			}
		})
	}
	wg.Wait()
	if _, err := c.Ensure(context.Background(), in, nil); err != nil {
		t.Fatal(err)
	}
	bad := kinds.EnsureImageInput{Source: src.srv.URL + "/img", Digest: digest([]byte("other")), Size: int64(len(img))}
	if _, err := c.Ensure(context.Background(), bad, nil); err == nil {
		t.Fatal("Ensure(wrong digest) = nil, want an error")
	}
	if diff := cmp.Diff(map[bool]int{false: 3, true: 1}, got); diff != "" {
		t.Errorf("lookups by hit (-want +got):\n%s", diff)
	}
	if fetched != int64(len(img)) {
		t.Errorf("fetched = %d bytes, want %d (one download)", fetched, len(img))
	}
}
