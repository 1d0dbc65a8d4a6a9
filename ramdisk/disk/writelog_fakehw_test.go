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

// TestImageWritesZeroRunSplitAtCheckpoint: a run of zero blocks is zeroed
// in one call, but never across a checkpoint: the offset a checkpoint
// reports as durable has its zeros made before the fdatasync, so a resumed
// stream may trust everything below it.
func TestImageWritesZeroRunSplitAtCheckpoint(t *testing.T) {
	t.Parallel()
	const s = SyncEvery / blockSize
	data := make([]bool, s+5)
	data[0], data[s+2] = true, true
	image := zeroRunImage(data, 3*512)
	end := int64(len(data))*blockSize + 3*512
	d := newFakeDisk(t, Disk{Serial: "ZS", SizeBytes: end + blockSize})
	src, digest := streamOf(t, image, "zstd")
	if _, err := WriteImage(context.Background(), src, ImageSpec{Digest: digest, Compression: "zstd"}, d, 0, nil); err != nil {
		t.Fatalf("WriteImage() = %v", err)
	}
	const b = blockSize
	want := [][]Extent{{
		{0, b, false}, {b, SyncEvery - b, true}, {SyncEvery, 2 * b, true},
		{(s + 2) * b, b, false}, {(s + 3) * b, end - (s+3)*b, true},
	}}
	runs, err := ImageWrites(d.Path)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, runs); diff != "" {
		t.Errorf("ImageWrites (-want +got):\n%s", diff)
	}
}
