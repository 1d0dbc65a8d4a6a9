package store_test

import (
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/testpg"
	"github.com/better-compute/better-compute/store"
)

func TestMain(m *testing.M) { os.Exit(testpg.Main(m)) }

// ignoreCreated leaves the database's clock out of comparisons.
var ignoreCreated = cmp.FilterPath(func(p cmp.Path) bool {
	f, ok := p.Last().(cmp.StructField)
	return ok && f.Name() == "CreatedAt"
}, cmp.Ignore())

// newTenants returns a migrated store with tenants "a" and "b".
func newTenants(t testing.TB) *store.Store {
	t.Helper()
	s := testpg.New(t)
	for _, id := range []string{"a", "b"} {
		if err := s.EnsureTenant(t.Context(), id); err != nil {
			t.Fatalf("EnsureTenant(%q) = %v", id, err)
		}
	}
	return s
}

// byID sorts xs by their id, the order lists come in: ids sort by creation time
// only to the millisecond, so objects made in one millisecond come in any order.
func byID[T any](id func(T) string, xs ...T) []T {
	slices.SortFunc(xs, func(a, b T) int { return strings.Compare(id(a), id(b)) })
	return xs
}

func siteID(x store.Site) string   { return x.ID }
func poolID(x store.Pool) string   { return x.ID }
func imageID(x store.Image) string { return x.ID }

// wantKind fails the test unless err has kind k.
func wantKind(t *testing.T, call string, err error, k errs.Kind) {
	t.Helper()
	if !errs.Is(err, k) {
		t.Fatalf("%s = %v, want %s", call, err, k)
	}
}

// concurrently runs f n times at once and returns the results in order.
func concurrently[T any](n int, f func(i int) (T, error)) ([]T, []error) {
	out := make([]T, n)
	errOut := make([]error, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			out[i], errOut[i] = f(i)
		})
	}
	close(start)
	wg.Wait()
	return out, errOut
}
