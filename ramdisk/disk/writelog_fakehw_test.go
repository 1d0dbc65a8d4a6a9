//go:build fakehw

package disk

import (
	"bytes"
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestImageWritesLogsEachRun: the write log holds one run per WriteImage
// call with the blocks it put on the disk, so a resumed run shows that it
// wrote nothing below its resume offset.
func TestImageWritesLogsEachRun(t *testing.T) {
	t.Parallel()
	raw := testImage(6, 0, 0, 1, 2, 4, 5) // block 3 is a hole
	stream := compress(t, raw, "zstd")
	spec := ImageSpec{Digest: digestOf(stream), Compression: "zstd"}
	d := newFakeDisk(t, Disk{Serial: "WL", SizeBytes: 64 << 20})
	if runs, err := ImageWrites(d.Path); err != nil || runs != nil {
		t.Fatalf("ImageWrites(new disk) = %v, %v; want no runs", runs, err)
	}
	for _, from := range []int64{0, 2 * blockSize} {
		if _, err := WriteImage(context.Background(), bytes.NewReader(stream), spec, d, from, nil); err != nil {
			t.Fatalf("WriteImage(from %d) = %v", from, err)
		}
	}
	const b = blockSize
	want := [][]Extent{
		{{0, b, false}, {b, b, false}, {2 * b, b, false}, {3 * b, b, true}, {4 * b, b, false}, {5 * b, b, false}},
		// from 2 blocks: blocks 0 and 1 compared equal and were skipped
		{{2 * b, b, false}, {3 * b, b, true}, {4 * b, b, false}, {5 * b, b, false}},
	}
	runs, err := ImageWrites(d.Path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, runs); diff != "" {
		t.Errorf("ImageWrites after a run from 0 and one from %d (-want +got):\n%s", 2*b, diff)
	}
}
