//go:build fakehw

package disk

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/better-compute/better-compute/errs"
)

// Enumerate lists the fake disks in h.Dir: every <name>.img with its
// <name>.json sidecar (see CreateFakeDisk), sorted by name.
func (h Host) Enumerate(ctx context.Context) ([]Disk, error) {
	if h.Dir == "" {
		return nil, errs.Invalid("fakehw.dir", "the fakehw build needs the directory of its fake disks")
	}
	imgs, err := filepath.Glob(filepath.Join(h.Dir, "*"+fakeExt))
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "list fake disks in %s", h.Dir)
	}
	var disks []Disk
	for _, img := range imgs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		sc, err := readSidecar(img)
		if err != nil {
			return nil, err
		}
		st, err := os.Stat(img)
		if err != nil {
			return nil, errs.Wrap(errs.DriverError, err, "stat fake disk %s", img)
		}
		d := fakeDiskFromSidecar(img, st.Size(), sc)
		if want := NameFor(sc.WWN, sc.Serial); want != d.Name {
			return nil, errs.New(errs.DriverError, "fake disk %s: file name does not match its WWN/serial (want %s)", img, want)
		}
		disks = append(disks, d)
	}
	sort.Slice(disks, func(i, j int) bool { return strings.Compare(disks[i].Name, disks[j].Name) < 0 })
	return disks, nil
}
