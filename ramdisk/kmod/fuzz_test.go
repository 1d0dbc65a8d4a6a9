package kmod

import (
	"slices"
	"strings"
	"testing"
)

// FuzzLoadOrder: whatever modules.dep says, parsing and ordering never
// panic, and an order returned puts every module after its dependencies,
// each once.
func FuzzLoadOrder(f *testing.F) {
	for _, s := range []string{
		"a.ko: b.ko c.ko\nb.ko: c.ko\nc.ko:\n", "a.ko: a.ko\n", "a.ko: b.ko\nb.ko: a.ko\n", ":\n", "a.ko:: b.ko\n",
		"# comment\n\n x.ko :  y.ko \ny.ko:\n", "a-b.ko:\na_b.ko:\n", "a.ko: missing.ko\n", strings.Repeat("a.ko: ", 100),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseModulesDep(strings.NewReader(s))
		if err != nil {
			return
		}
		order, err := d.LoadOrder()
		if err != nil {
			return
		}
		for i, file := range order {
			if slices.Index(order, file) != i {
				t.Fatalf("LoadOrder() lists %s twice: %v", file, order)
			}
			for _, dep := range d[file] {
				if j := slices.Index(order, dep); j < 0 || j > i {
					t.Fatalf("LoadOrder() puts %s before its dependency %s: %v", file, dep, order)
				}
			}
		}
	})
}
