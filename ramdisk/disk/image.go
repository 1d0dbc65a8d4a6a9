package disk

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/ulikunitz/xz"

	"golang.org/x/sys/unix"

	"github.com/better-compute/better-compute/errs"
)

// ImageSpec describes an image as the catalog serves it.
type ImageSpec struct {
	Digest      string // "sha256:<64 hex>" of the stream as served (compressed bytes)
	Compression string // none (or ""), gzip, zstd, xz
	Format      string // raw (or "")
	Size        int64  // decompressed size when known (0: unknown); checked against the disk before writing
}

// ImageResult says what WriteImage did.
type ImageResult struct {
	Disk          string
	Digest        string // "sha256:<hex>" of the stream as received
	Verified      bool   // the stream's digest matched ImageSpec.Digest; only then are the bytes good
	ImageBytes    int64  // decompressed image size
	StreamBytes   int64  // bytes received
	BytesWritten  int64  // bytes written as data at or after resumeFrom
	BytesZeroed   int64  // bytes made zero without writing data (holes)
	BytesSkipped  int64  // bytes below resumeFrom that already matched and were not rewritten
	BytesRepaired int64  // bytes below resumeFrom that did not match and were rewritten
	Started       time.Time
	Finished      time.Time
	// Where the time went. WaitData is the writer waiting for decompressed
	// data (the decompressor, and the stream and its hash before it, were
	// slower than the disk); WriteTime is spent in writes, zeroing and
	// compare reads; SyncTime in fdatasync, background checkpoints included
	// (they overlap the writes, so the three need not add up to the whole).
	WaitData  time.Duration
	WriteTime time.Duration
	SyncTime  time.Duration
}

// SyncEvery is how often (in bytes of the image) WriteImage makes its
// writes durable and reports progress: a reported offset is always safe to
// resume from, and a write that breaks resumes from the last one, about
// SyncEvery below where it stopped. The crash tests derive their kill points
// and image sizes from it.
const SyncEvery = 512 << 20

// blockDev is the disk as WriteImage sees it; *target implements it, tests
// wrap it to count writes.
type blockDev interface {
	WriteAt(p []byte, off int64) (int, error)
	ReadAt(p []byte, off int64) (int, error)
	zeroRange(off, n int64) error
	Sync() error
}

// Sync makes the written data durable; the file's metadata (times) need not be.
func (t *target) Sync() error { return unix.Fdatasync(int(t.f.Fd())) }

// WriteImage streams src, an image as served, onto d: it hashes the bytes as
// received, decompresses them, and writes the image in 4 MiB blocks from
// offset 0, with O_DIRECT where the disk takes it (see openDirect). A run of
// all-zero blocks is not written: it is made zero in one call, a hole
// punched in a file, WRITE ZEROES on a device (see zeroRange), so the disk
// reads back as the image even where it held data before, and a sparse image
// costs its data and its decompression only.
//
// progress is called with durable offsets (made durable every SyncEvery
// bytes, in the background, so possibly from another goroutine) and with the
// image size at the end. resumeFrom is an offset a previous attempt reported
// through progress. Blocks below it are read and compared instead of
// written: a block that matches is skipped, one that differs is rewritten
// and counted in BytesRepaired, so a retry after a crash re-streams without
// rewriting what was written, and the final digest check covers the whole
// disk. Under the fakehw build a fake disk logs what each run wrote (see
// ImageWrites).
//
// When the stream ends, the rest of src is drained into the hash, the disk is
// fsynced, and the digest is compared: a mismatch is DRIVER_ERROR naming both
// digests, with Verified=false in the result. An image larger than the disk
// fails with INVALID_INPUT naming both sizes before anything past the end is
// written.
func WriteImage(ctx context.Context, src io.Reader, spec ImageSpec, d Disk, resumeFrom int64, progress func(written int64)) (ImageResult, error) {
	if err := spec.validate(); err != nil {
		return ImageResult{}, err
	}
	t, err := openTarget(d)
	if err != nil {
		return ImageResult{}, err
	}
	defer t.Close()
	t.openDirect()
	dev, closeLog, err := logWrites(t)
	if err != nil {
		return ImageResult{}, err
	}
	defer closeLog()
	return writeImage(ctx, src, sha256.New(), spec, dev, d.Name, t.size, resumeFrom, progress)
}

func (s ImageSpec) validate() error {
	hexDigest, ok := strings.CutPrefix(s.Digest, "sha256:")
	if b, err := hex.DecodeString(hexDigest); !ok || err != nil || len(b) != sha256.Size {
		return errs.Invalid("image.digest", "digest %q is not sha256:<64 hex digits>", s.Digest)
	}
	switch s.Compression {
	case "", "none", "gzip", "zstd", "xz":
	default:
		return errs.Invalid("image.compression", "unknown compression %q: use none, gzip, zstd or xz", s.Compression)
	}
	if s.Format != "" && s.Format != "raw" {
		return errs.New(errs.Unsupported, "image format %q cannot be streamed to a disk; convert it to raw", s.Format)
	}
	if s.Size < 0 {
		return errs.Invalid("image.size", "size %d is negative", s.Size)
	}
	return nil
}

// imageWriter holds one WriteImage run.
type imageWriter struct {
	dev      blockDev
	name     string
	size     int64
	resume   int64
	progress func(int64)
	res      ImageResult
	cmp      []byte
	zeros    []byte
	// zeroOff, zeroN is the run of zero blocks not yet made zero on the
	// disk: it grows while zero blocks follow each other and is zeroed in one
	// call before the next data write, a checkpoint, or the end.
	zeroOff, zeroN int64
}

// zeroCmp is how much of a block is compared with zeros at a time: small
// enough that the zeros stay in the CPU's cache.
const zeroCmp = 64 << 10

// writeImage is WriteImage onto dev, with h the hash of the stream as served
// (sha256: the benchmarks swap in one that skips the hashing, to time it).
func writeImage(ctx context.Context, src io.Reader, h hash.Hash, spec ImageSpec, dev blockDev, name string, size, resumeFrom int64, progress func(int64)) (ImageResult, error) {
	if spec.Size > size {
		return ImageResult{}, errs.Invalid("image.size", "image of %d bytes does not fit disk %s of %d bytes", spec.Size, name, size)
	}
	if resumeFrom < 0 || resumeFrom > size {
		return ImageResult{}, errs.Invalid("resumeFrom", "resume offset %d is outside disk %s of %d bytes", resumeFrom, name, size)
	}
	if progress == nil {
		progress = func(int64) {}
	}
	w := &imageWriter{dev: dev, name: name, size: size, resume: resumeFrom &^ (blockSize - 1), progress: progress,
		zeros: make([]byte, zeroCmp)}
	w.res = ImageResult{Disk: name, Started: time.Now().UTC()}
	counted := &countingReader{r: src, h: h}
	buffered := streamBuf(counted)
	dec, closeDec, err := decompressor(buffered, spec.Compression)
	if err != nil {
		return ImageResult{}, err
	}
	if err := w.copyBlocks(ctx, dec, closeDec); err != nil {
		return ImageResult{}, err
	}
	// Every block was taken: the decompressor reads no more of buffered.
	buffered.Reset(nil)
	streamBufs.put(buffered)
	if _, err := io.Copy(io.Discard, counted); err != nil { // the digest covers the whole stream as served
		return ImageResult{}, errs.Wrap(errs.DriverError, err, "read the rest of the image stream")
	}
	synced := time.Now()
	if err := dev.Sync(); err != nil {
		return ImageResult{}, errs.Wrap(errs.DriverError, err, "flush disk %s", name)
	}
	w.res.SyncTime += time.Since(synced)
	w.res.StreamBytes = counted.n
	w.res.Digest = "sha256:" + hex.EncodeToString(h.Sum(nil))
	w.res.Finished = time.Now().UTC()
	if w.res.Digest != spec.Digest {
		return w.res, errs.New(errs.DriverError, "digest mismatch on disk %s: the catalog says %s, the stream was %s; the disk's contents are not good",
			name, spec.Digest, w.res.Digest)
	}
	w.res.Verified = true
	progress(w.res.ImageBytes)
	return w.res, nil
}

// copyBlocks takes the decompressed image in 4 MiB blocks from the
// read-ahead goroutine and puts each on disk, with background syncs that
// report durable progress every SyncEvery bytes.
func (w *imageWriter) copyBlocks(ctx context.Context, dec io.Reader, closeDec func()) error {
	blocks, recycle, release := readAhead(dec, closeDec)
	defer release()
	sy := startSyncer(w.dev, w.progress)
	err := w.consume(ctx, blocks, recycle, sy)
	took, serr := sy.finish()
	w.res.SyncTime += took
	if err == nil && serr != nil {
		err = errs.Wrap(errs.DriverError, serr, "flush disk %s", w.name)
	}
	return err
}

func (w *imageWriter) consume(ctx context.Context, blocks <-chan chunk, recycle func([]byte), sy *syncer) error {
	var off, checked int64
	for {
		waited := time.Now()
		c, ok := <-blocks
		w.res.WaitData += time.Since(waited)
		if !ok {
			break
		}
		if ctxDone(ctx) {
			return ctx.Err()
		}
		if c.n > 0 {
			if off+int64(c.n) > w.size {
				return errs.Invalid("image.size", "image is larger than disk %s of %d bytes (at least %d bytes)", w.name, w.size, off+int64(c.n))
			}
			if err := w.putBlock(c.buf[:c.n], c.zero, c.trailing, off); err != nil {
				return err
			}
			off += int64(c.n)
			w.res.ImageBytes = off
		}
		if off-checked >= SyncEvery || c.err == io.EOF {
			if err := w.flushZeros(); err != nil {
				return err
			}
		}
		if off-checked >= SyncEvery {
			sy.checkpoint(off)
			checked = off
		}
		switch {
		case c.err == io.EOF:
			if c.buf != nil {
				recycle(c.buf)
			}
			return nil
		case c.err != nil:
			return errs.Wrap(errs.DriverError, c.err, "read image stream at image offset %d", off)
		}
		recycle(c.buf)
	}
	return errs.New(errs.Internal, "image read-ahead ended without end of stream")
}

// putBlock puts one block at off: compared and skipped below the resume
// point, added to the pending zero run when all zero (zero; b's contents are
// then not the block's), written otherwise (after the zero run before it, so
// the disk is written in order). A block that ends in zeros, at least
// zeroSplit bytes of them, is written up to its data (to the next 4 KiB)
// and the rest starts the pending zero run: a filesystem image's block often
// holds a little data and then nothing, and writing and syncing the zeros
// cost more than making them zero (an 8 MiB image with 1 MiB of data wrote
// 4 MiB).
func (w *imageWriter) putBlock(b []byte, zero bool, trailing int, off int64) error {
	started := time.Now()
	defer func() { w.res.WriteTime += time.Since(started) }()
	n := int64(len(b))
	if off < w.resume {
		if w.cmp == nil {
			w.cmp = alignedBuf(blockSize) // only a resumed write compares
		}
		k, err := w.dev.ReadAt(w.cmp[:n], off)
		if int64(k) == n && (zero && firstNonzero(w.cmp[:n], w.zeros) < 0 || !zero && bytes.Equal(w.cmp[:n], b)) {
			w.res.BytesSkipped += n
			return nil
		}
		if err != nil && int64(k) < n && !errors.Is(err, io.EOF) {
			return errs.Wrap(errs.DriverError, err, "read disk %s at %d to resume", w.name, off)
		}
		w.res.BytesRepaired += n
	}
	if zero {
		if w.zeroN > 0 && w.zeroOff+w.zeroN != off {
			if err := w.flushZeros(); err != nil {
				return err
			}
		}
		if w.zeroN == 0 {
			w.zeroOff = off
		}
		w.zeroN += n
		return nil
	}
	if err := w.flushZeros(); err != nil {
		return err
	}
	data := len(b)
	if trailing >= zeroSplit {
		data = min(len(b), (len(b)-trailing+zeroAlign-1)/zeroAlign*zeroAlign)
	}
	if err := w.write(b[:data], off); err != nil {
		return err
	}
	if data < len(b) {
		w.zeroOff, w.zeroN = off+int64(data), int64(len(b)-data)
	}
	return nil
}

// zeroSplit is the shortest zero run at the end of a block that putBlock
// makes zero instead of writing; zeroAlign is where it starts the run (a
// 4 KiB boundary: O_DIRECT writes and hole punching both want one).
const (
	zeroSplit = 1 << 20
	zeroAlign = 4 << 10
)

func (w *imageWriter) write(b []byte, off int64) error {
	if _, err := w.dev.WriteAt(b, off); err != nil {
		return errs.Wrap(errs.DriverError, err, "write disk %s at %d", w.name, off)
	}
	if end := off + int64(len(b)); end > w.resume {
		w.res.BytesWritten += end - max(off, w.resume)
	}
	return nil
}

// flushZeros makes the pending zero run zero on the disk in one call; where
// the disk cannot (a file system without holes, a range not 512-aligned), it
// writes zeros.
func (w *imageWriter) flushZeros() error {
	off, n := w.zeroOff, w.zeroN
	w.zeroN = 0
	if n == 0 {
		return nil
	}
	started := time.Now()
	defer func() { w.res.WriteTime += time.Since(started) }()
	if err := w.dev.zeroRange(off, n); err == nil {
		w.res.BytesZeroed += n
		return nil
	}
	z := alignedBuf(int(min(n, blockSize)))
	for end := off + n; off < end; off += int64(len(z)) {
		if err := w.write(z[:min(int64(len(z)), end-off)], off); err != nil {
			return err
		}
	}
	return nil
}

// decompressor returns a reader of the decompressed image and its closer.
func decompressor(r io.Reader, compression string) (io.Reader, func(), error) {
	switch compression {
	case "", "none":
		return r, func() {}, nil
	case "gzip":
		g, err := gzip.NewReader(r)
		if err != nil {
			return nil, nil, errs.Wrap(errs.DriverError, err, "image stream is not gzip")
		}
		return g, func() { g.Close() }, nil
	case "zstd":
		// IgnoreChecksum: the frame's xxhash64 of the decompressed bytes was a
		// fifth of the CPU of a sparse image, and it proves nothing the sha256
		// of the stream as served does not: the same stream decompresses to
		// the same bytes.
		// rleToRaw: zero RLE blocks reach the decoder as raw blocks, which it
		// copies instead of expanding byte by byte, and long runs of them do
		// not reach it at all when the reader of the image takes them as a
		// count (zstdImage.cutZerosTo).
		z, err := newZstdImage(r)
		if err != nil {
			return nil, nil, errs.Wrap(errs.DriverError, err, "image stream is not zstd")
		}
		return z, z.Close, nil
	case "xz":
		x, err := xz.NewReader(r)
		if err != nil {
			return nil, nil, errs.Wrap(errs.DriverError, err, "image stream is not xz")
		}
		return x, func() {}, nil
	}
	return nil, nil, errs.Invalid("image.compression", "unknown compression %q", compression)
}

// streamBufs keeps the 1 MiB read buffers of image streams between image
// writes (see spares). A write that failed may leave its decompressor
// reading for a while: its buffer is not kept.
var streamBufs = make(spares[*bufio.Reader], 2)

func streamBuf(r io.Reader) *bufio.Reader {
	if b, ok := streamBufs.get(); ok {
		b.Reset(r)
		return b
	}
	return bufio.NewReaderSize(r, 1<<20)
}

// countingReader hashes and counts the bytes read through it.
type countingReader struct {
	r io.Reader
	h hash.Hash
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	return n, err
}
