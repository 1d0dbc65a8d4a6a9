package disk

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/ulikunitz/xz"
	"golang.org/x/sys/unix"

	"github.com/better-compute/better-compute/errs"
)

// testImage returns a raw image of nblocks 4 MiB blocks plus a partial tail
// block; the blocks listed in data hold compressible pseudo-random bytes,
// the others are zero.
func testImage(nblocks int, tail int, data ...int) []byte {
	img := make([]byte, nblocks*blockSize+tail)
	r := rand.New(rand.NewPCG(1, 2))
	for _, b := range data {
		blk := img[b*blockSize : min(len(img), (b+1)*blockSize)]
		for i := 0; i < len(blk); i += 64 {
			v := byte(r.IntN(16)) // 4 bits of entropy per run: compresses, is never all zero
			for j := i; j < min(len(blk), i+64); j++ {
				blk[j] = v + 1
			}
		}
	}
	return img
}

func compress(t testing.TB, raw []byte, how string) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	var err error
	switch how {
	case "none":
		return raw
	case "gzip":
		w = gzip.NewWriter(&buf)
	case "zstd":
		w, err = zstd.NewWriter(&buf)
	case "xz":
		w, err = xz.NewWriter(&buf)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func digestOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// fillDisk writes nonzero junk over the whole (small) disk, so a hole in the
// image must be made, not found.
func fillDisk(t testing.TB, d Disk) {
	t.Helper()
	junk := bytes.Repeat([]byte{0xee}, int(d.SizeBytes))
	if err := os.WriteFile(d.Path, junk, 0o600); err != nil {
		t.Fatal(err)
	}
}

func readDisk(t testing.TB, d Disk, n int) []byte {
	t.Helper()
	b, err := os.ReadFile(d.Path)
	if err != nil {
		t.Fatal(err)
	}
	return b[:n]
}

// isHole reports whether [off, off+n) of the file has no data extent.
func isHole(t testing.TB, path string, off, n int64) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	next, err := unix.Seek(int(f.Fd()), off, unix.SEEK_DATA)
	if err == unix.ENXIO {
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return next >= off+n
}

func TestWriteImageCompressions(t *testing.T) {
	t.Parallel()
	raw := testImage(6, 512*3, 0, 2, 5, 6) // blocks 1, 3, 4 zero; a partial tail block with data
	for _, c := range []string{"none", "gzip", "zstd", "xz"} {
		t.Run(c, func(t *testing.T) {
			t.Parallel()
			d := newFakeDisk(t, Disk{Serial: "IMG-" + c, SizeBytes: 32 << 20})
			fillDisk(t, d)
			stream := compress(t, raw, c)
			var reported int64
			res, err := WriteImage(context.Background(), bytes.NewReader(stream),
				ImageSpec{Digest: digestOf(stream), Compression: c, Format: "raw"}, d, 0, func(n int64) { reported = n })
			if err != nil {
				t.Fatalf("WriteImage(%s) = %v", c, err)
			}
			if !res.Verified || res.ImageBytes != int64(len(raw)) || res.StreamBytes != int64(len(stream)) || reported != int64(len(raw)) {
				t.Errorf("WriteImage(%s) = %+v, progress %d; want verified, %d image bytes, %d stream bytes",
					c, res, reported, len(raw), len(stream))
			}
			if res.BytesZeroed != 3*blockSize || res.BytesWritten != int64(len(raw))-3*blockSize {
				t.Errorf("WriteImage(%s) zeroed %d written %d, want %d and %d", c, res.BytesZeroed, res.BytesWritten,
					3*blockSize, len(raw)-3*blockSize)
			}
			if got := readDisk(t, d, len(raw)); !bytes.Equal(got, raw) {
				t.Errorf("WriteImage(%s): disk contents differ from the image", c)
			}
			for _, b := range []int64{1, 3, 4} {
				if !isHole(t, d.Path, b*blockSize, blockSize) {
					t.Errorf("WriteImage(%s): zero block %d is not a hole", c, b)
				}
			}
			if isHole(t, d.Path, 2*blockSize, blockSize) {
				t.Errorf("WriteImage(%s): data block 2 is a hole", c)
			}
		})
	}
}

func TestWriteImageDigestMismatch(t *testing.T) {
	t.Parallel()
	d := newFakeDisk(t, Disk{Serial: "DM", SizeBytes: 16 << 20})
	raw := testImage(2, 0, 0)
	stream := compress(t, raw, "zstd")
	wrong := digestOf([]byte("another image"))
	res, err := WriteImage(context.Background(), bytes.NewReader(stream),
		ImageSpec{Digest: wrong, Compression: "zstd"}, d, 0, nil)
	if !errs.Is(err, errs.DriverError) || !strings.Contains(err.Error(), "digest mismatch") ||
		!strings.Contains(err.Error(), wrong) || !strings.Contains(err.Error(), digestOf(stream)) {
		t.Fatalf("WriteImage(wrong digest) = %v, want DRIVER_ERROR naming both digests", err)
	}
	if res.Verified {
		t.Errorf("WriteImage(wrong digest) result Verified = true, want false")
	}
}

// trailing bytes after the compressed stream are part of what was served:
// the digest covers them, so the catalog's digest of the file still matches.
func TestWriteImageHashesWholeStream(t *testing.T) {
	t.Parallel()
	d := newFakeDisk(t, Disk{Serial: "TR", SizeBytes: 16 << 20})
	raw := testImage(1, 0, 0)
	stream := compress(t, raw, "xz")
	stream = append(stream, make([]byte, 4096)...) // xz streams may carry zero padding
	res, err := WriteImage(context.Background(), bytes.NewReader(stream), ImageSpec{Digest: digestOf(stream), Compression: "xz"}, d, 0, nil)
	if err != nil || res.StreamBytes != int64(len(stream)) {
		t.Fatalf("WriteImage(padded xz) = %+v, %v; want verified over %d stream bytes", res, err, len(stream))
	}
}

// countingDev counts writes and zeroings below an offset.
type countingDev struct {
	blockDev
	below       int64
	writesBelow int
}

func (c *countingDev) WriteAt(p []byte, off int64) (int, error) {
	if off < c.below {
		c.writesBelow++
	}
	return c.blockDev.WriteAt(p, off)
}

func (c *countingDev) zeroRange(off, n int64) error {
	if off < c.below {
		c.writesBelow++
	}
	return c.blockDev.zeroRange(off, n)
}

func TestWriteImageResume(t *testing.T) {
	t.Parallel()
	raw := testImage(8, 0, 0, 1, 3, 4, 6, 7)
	stream := compress(t, raw, "gzip")
	spec := ImageSpec{Digest: digestOf(stream), Compression: "gzip"}
	const resume = 5 * blockSize
	tests := []struct {
		name         string
		alterAt      int64 // -1: leave the disk as the first attempt wrote it
		wantSkipped  int64
		wantRepaired int64
	}{
		{"intact head is not rewritten", -1, resume, 0},
		{"altered head block is repaired", 1<<20 + 3*blockSize, resume - blockSize, blockSize},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := newFakeDisk(t, Disk{Serial: "RS", SizeBytes: 64 << 20})
			if _, err := WriteImage(context.Background(), bytes.NewReader(stream), spec, d, 0, nil); err != nil {
				t.Fatal(err)
			}
			if tt.alterAt >= 0 {
				scribble(t, d, tt.alterAt)
			}
			tg, err := openTarget(d)
			if err != nil {
				t.Fatal(err)
			}
			defer tg.Close()
			dev := &countingDev{blockDev: tg, below: resume}
			res, err := writeImage(context.Background(), bytes.NewReader(stream), sha256.New(), spec, dev, d.Name, tg.size, resume, nil)
			if err != nil {
				t.Fatalf("writeImage(resume %d) = %v", resume, err)
			}
			wantWrites := int(tt.wantRepaired / blockSize)
			if dev.writesBelow != wantWrites || res.BytesSkipped != tt.wantSkipped || res.BytesRepaired != tt.wantRepaired {
				t.Errorf("writeImage(resume %d) = %d writes below, skipped %d, repaired %d; want %d, %d, %d",
					resume, dev.writesBelow, res.BytesSkipped, res.BytesRepaired, wantWrites, tt.wantSkipped, tt.wantRepaired)
			}
			if got := readDisk(t, d, len(raw)); !bytes.Equal(got, raw) {
				t.Errorf("writeImage(resume %d): disk differs from the image", resume)
			}
		})
	}
}

func TestWriteImageTooBig(t *testing.T) {
	t.Parallel()
	raw := testImage(5, 0, 0, 4)
	stream := compress(t, raw, "zstd")
	tests := []struct {
		name string
		size int64 // ImageSpec.Size
	}{
		{"size known up front", int64(len(raw))},
		{"size found while streaming", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := newFakeDisk(t, Disk{Serial: "TB", SizeBytes: 16 << 20})
			_, err := WriteImage(context.Background(), bytes.NewReader(stream),
				ImageSpec{Digest: digestOf(stream), Compression: "zstd", Size: tt.size}, d, 0, nil)
			if !errs.Is(err, errs.InvalidInput) || !strings.Contains(err.Error(), "16777216") {
				t.Fatalf("WriteImage(20 MiB image, 16 MiB disk) = %v, want INVALID_INPUT naming the disk size", err)
			}
			if tt.size > 0 && !strings.Contains(err.Error(), "20971520") {
				t.Errorf("WriteImage() = %v, want it to name the image size 20971520", err)
			}
			if st, _ := os.Stat(d.Path); st.Size() != d.SizeBytes {
				t.Errorf("disk file size after refusal = %d, want %d (nothing past the end)", st.Size(), d.SizeBytes)
			}
		})
	}
}

func TestWriteImageBadInput(t *testing.T) {
	t.Parallel()
	d := newFakeDisk(t, Disk{Serial: "BI", SizeBytes: 16 << 20})
	good := digestOf(nil)
	one := testImage(1, 0, 0)
	truncZstd := compress(t, one, "zstd")[:1000]
	truncGzip := compress(t, one, "gzip")[:1000]
	truncXz := compress(t, one, "xz")[:1000]
	tests := []struct {
		name   string
		spec   ImageSpec
		stream []byte
		want   errs.Kind
	}{
		{"digest without algorithm", ImageSpec{Digest: strings.TrimPrefix(good, "sha256:")}, nil, errs.InvalidInput},
		{"short digest", ImageSpec{Digest: "sha256:abcd"}, nil, errs.InvalidInput},
		{"unknown compression", ImageSpec{Digest: good, Compression: "bzip2"}, nil, errs.InvalidInput},
		{"qcow2", ImageSpec{Digest: good, Format: "qcow2"}, nil, errs.Unsupported},
		{"not gzip", ImageSpec{Digest: digestOf([]byte("plain text")), Compression: "gzip"}, []byte("plain text"), errs.DriverError},
		{"truncated zstd", ImageSpec{Digest: digestOf(truncZstd), Compression: "zstd"}, truncZstd, errs.DriverError},
		{"truncated gzip", ImageSpec{Digest: digestOf(truncGzip), Compression: "gzip"}, truncGzip, errs.DriverError},
		{"truncated xz", ImageSpec{Digest: digestOf(truncXz), Compression: "xz"}, truncXz, errs.DriverError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := WriteImage(context.Background(), bytes.NewReader(tt.stream), tt.spec, d, 0, nil)
			if k := errs.KindOf(err); k != tt.want || strings.Contains(err.Error(), "digest mismatch") {
				t.Errorf("WriteImage(%+v) = %v (kind %q), want kind %q and no digest mismatch", tt.spec, err, k, tt.want)
			}
		})
	}
}

// zeroRunImage is an image of whole 4 MiB blocks, data where data[i] is
// true and zero elsewhere, then tail zero bytes; it is generated as it is
// read, so a zero run may span a checkpoint (SyncEvery) without a 512 MiB
// buffer.
func zeroRunImage(data []bool, tail int64) func() io.Reader {
	blk := testImage(1, 0, 0)
	return func() io.Reader {
		var rs []io.Reader
		for _, d := range data {
			if d {
				rs = append(rs, bytes.NewReader(blk))
			} else {
				rs = append(rs, io.LimitReader(zeroReader{}, blockSize))
			}
		}
		return io.MultiReader(append(rs, io.LimitReader(zeroReader{}, tail))...)
	}
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

// TestWriteImageZeroRunsOverOldData: zero runs are not written but made
// zero in one call each (split at the checkpoint they span, the last one
// ending in a tail that is not 4 KiB-aligned), and a disk that held data
// everywhere the image is zero reads back as the image, byte for byte,
// with nothing past the image's end touched.
func TestWriteImageZeroRunsOverOldData(t *testing.T) {
	t.Parallel()
	const s = SyncEvery / blockSize
	data := make([]bool, s+5)
	data[0], data[s+2] = true, true // zero runs: blocks 1..s+1 (across the checkpoint), s+3..s+4 and the tail
	const tail = 3 * 512
	image := zeroRunImage(data, tail)
	imageLen := int64(len(data))*blockSize + tail
	zeroLen := imageLen - 2*blockSize
	for _, tc := range []struct {
		name, c string
		opts    []zstd.EOption
	}{
		{"none", "none", nil},
		{"zstd", "zstd", nil},
		{"zstd-best", "zstd", []zstd.EOption{zstd.WithEncoderLevel(zstd.SpeedBestCompression)}}, // zero blocks as RLE blocks
	} {
		c := tc.c
		t.Run(tc.name, func(t *testing.T) {
			d := newFakeDisk(t, Disk{Serial: "ZR-" + tc.name, SizeBytes: imageLen + 64<<20})
			junk := []int64{0, blockSize + 100, SyncEvery - 512<<10, SyncEvery + blockSize, (s + 3) * blockSize, imageLen - 1024}
			scribble(t, d, junk...)
			src, digest := streamOf(t, image, c, tc.opts...)
			var reported []int64
			res, err := WriteImage(context.Background(), src, ImageSpec{Digest: digest, Compression: c}, d, 0,
				func(n int64) { reported = append(reported, n) })
			if err != nil || !res.Verified {
				t.Fatalf("WriteImage(%s) = %+v, %v; want verified", c, res, err)
			}
			if res.BytesZeroed != zeroLen || res.BytesWritten != 2*blockSize || res.ImageBytes != imageLen {
				t.Errorf("WriteImage(%s) zeroed %d, written %d, image %d; want %d, %d, %d",
					c, res.BytesZeroed, res.BytesWritten, res.ImageBytes, zeroLen, 2*blockSize, imageLen)
			}
			if want := []int64{SyncEvery, imageLen}; !slices.Equal(reported, want) {
				t.Errorf("WriteImage(%s) progress = %v, want %v", c, reported, want)
			}
			if off, ok := firstDifference(t, d.Path, image(), imageLen); ok {
				t.Errorf("WriteImage(%s): disk differs from the image at offset %d (the disk held data there)", c, off)
			}
			if b := readDisk(t, d, int(imageLen)+1)[imageLen]; b == 0 {
				t.Errorf("WriteImage(%s): the byte after the image was zeroed, want the old data left", c)
			}
		})
	}
}

// TestWriteImageBlockEndingInZeros: a block with data and then a zero run of
// at least zeroSplit is written up to its data (rounded up to 4 KiB) and the
// run is made zero with the zero blocks after it; a shorter run is written.
// Over a disk that held data everywhere, the disk reads back as the image and
// the long run and the zero block after it are a hole.
func TestWriteImageBlockEndingInZeros(t *testing.T) {
	t.Parallel()
	const (
		head  = 1<<20 + 100      // block 0: data, then blockSize-head zeros (≥ zeroSplit)
		short = blockSize - 4096 // block 2: data, then 4 KiB of zeros (< zeroSplit)
		tailN = 3 * 512          // a last, partial block of data
	)
	raw := testImage(4, tailN, 0, 2, 4) // block 1 and 3 zero
	clear(raw[head:blockSize])
	clear(raw[2*blockSize+short : 3*blockSize])
	headWritten := int64((head + zeroAlign - 1) / zeroAlign * zeroAlign)
	wantWritten := headWritten + blockSize + tailN
	for _, c := range []string{"none", "zstd"} {
		t.Run(c, func(t *testing.T) {
			t.Parallel()
			d := newFakeDisk(t, Disk{Serial: "TZ-" + c, SizeBytes: 32 << 20})
			fillDisk(t, d)
			stream := compress(t, raw, c)
			res, err := WriteImage(context.Background(), bytes.NewReader(stream), ImageSpec{Digest: digestOf(stream), Compression: c}, d, 0, nil)
			if err != nil || !res.Verified {
				t.Fatalf("WriteImage(%s) = %+v, %v; want verified", c, res, err)
			}
			if res.BytesWritten != wantWritten || res.BytesZeroed != int64(len(raw))-wantWritten {
				t.Errorf("WriteImage(%s) wrote %d, zeroed %d; want %d and %d", c, res.BytesWritten, res.BytesZeroed,
					wantWritten, int64(len(raw))-wantWritten)
			}
			if got := readDisk(t, d, len(raw)); !bytes.Equal(got, raw) {
				t.Errorf("WriteImage(%s): disk contents differ from the image", c)
			}
			if !isHole(t, d.Path, headWritten, 2*blockSize-headWritten) {
				t.Errorf("WriteImage(%s): block 0's zero run and block 1 are not a hole", c)
			}
		})
	}
}

// streamOf returns the image as served with compression none or zstd (with
// the encoder's opts), and its digest, without holding the raw image in
// memory.
func streamOf(t *testing.T, image func() io.Reader, compression string, opts ...zstd.EOption) (io.Reader, string) {
	t.Helper()
	if compression == "none" {
		h := sha256.New()
		if _, err := io.Copy(h, image()); err != nil {
			t.Fatal(err)
		}
		return image(), "sha256:" + hex.EncodeToString(h.Sum(nil))
	}
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(w, image()); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return bytes.NewReader(buf.Bytes()), digestOf(buf.Bytes())
}

// firstDifference compares the first n bytes of the file at path with want.
func firstDifference(t *testing.T, path string, want io.Reader, n int64) (int64, bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, exp := make([]byte, blockSize), make([]byte, blockSize)
	for off := int64(0); off < n; off += blockSize {
		k := min(blockSize, n-off)
		if _, err := f.ReadAt(got[:k], off); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(want, exp[:k]); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got[:k], exp[:k]) {
			i := 0
			for got[i] == exp[i] {
				i++
			}
			return off + int64(i), true
		}
	}
	return 0, false
}

// The read-ahead's blocks go back to a pool between writes and come out of
// it holding the last image's bytes: a write after another must still put
// its own zeros (within a block, and whole blocks) and its partial tail on
// the disk, not what a reused block held.
func TestWriteImageReusedBlocks(t *testing.T) {
	first := testImage(4, 0, 0, 1, 2, 3) // every block data: each pooled block is dirty
	second := testImage(3, 4096+512, 1, 3)
	copy(second[0:], bytes.Repeat([]byte{7}, 512)) // block 0: a few data bytes, then zeros
	for i, raw := range [][]byte{first, second, first, second} {
		d := newFakeDisk(t, Disk{Serial: fmt.Sprintf("REUSE-%d", i), SizeBytes: 24 << 20})
		fillDisk(t, d)
		stream := compress(t, raw, "zstd")
		if _, err := WriteImage(context.Background(), bytes.NewReader(stream),
			ImageSpec{Digest: digestOf(stream), Compression: "zstd", Format: "raw"}, d, 0, nil); err != nil {
			t.Fatalf("write %d: WriteImage = %v", i, err)
		}
		if got := readDisk(t, d, len(raw)); !bytes.Equal(got, raw) {
			t.Fatalf("write %d: the disk differs from the image at byte %d", i, firstDiff(got, raw))
		}
	}
}

// TestWriteImageAfterBrokenStreams: decoders and read buffers go from one
// image write to the next, also after a stream that ended early or did not
// decode; each good write after them puts exactly its image on the disk.
func TestWriteImageAfterBrokenStreams(t *testing.T) {
	first := testImage(4, 0, 0, 1, 2, 3)
	second := testImage(3, 4096+512, 1, 3)
	good := map[string][]byte{"first": compress(t, first, "zstd"), "second": compress(t, second, "zstd")}
	raw := map[string][]byte{"first": first, "second": second}
	truncated := good["second"][:len(good["second"])/2]
	corrupt := bytes.Clone(good["first"])
	for i := len(corrupt) / 3; i < len(corrupt)/3+64; i++ {
		corrupt[i] ^= 0xa5
	}
	for i, w := range []struct {
		name   string
		stream []byte
	}{
		{"first", good["first"]}, {"truncated", truncated}, {"second", good["second"]},
		{"corrupt", corrupt}, {"first", good["first"]}, {"truncated", truncated}, {"second", good["second"]},
	} {
		d := newFakeDisk(t, Disk{Serial: fmt.Sprintf("BROKEN-%d", i), SizeBytes: 24 << 20})
		fillDisk(t, d)
		_, err := WriteImage(context.Background(), bytes.NewReader(w.stream),
			ImageSpec{Digest: digestOf(w.stream), Compression: "zstd", Format: "raw"}, d, 0, nil)
		want, isGood := raw[w.name]
		if !isGood {
			if err == nil {
				t.Fatalf("write %d (%s): WriteImage = nil, want an error", i, w.name)
			}
			continue
		}
		if err != nil {
			t.Fatalf("write %d (%s): WriteImage = %v", i, w.name, err)
		}
		if got := readDisk(t, d, len(want)); !bytes.Equal(got, want) {
			t.Fatalf("write %d (%s): the disk differs from the image at byte %d", i, w.name, firstDiff(got, want))
		}
	}
}
