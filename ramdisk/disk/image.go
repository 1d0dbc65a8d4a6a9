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
	"github.com/klauspost/compress/zstd"
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

func (t *target) WriteAt(p []byte, off int64) (int, error) { return t.f.WriteAt(p, off) }
func (t *target) ReadAt(p []byte, off int64) (int, error)  { return t.f.ReadAt(p, off) }

// Sync makes the written data durable; the file's metadata (times) need not be.
func (t *target) Sync() error { return unix.Fdatasync(int(t.f.Fd())) }

// WriteImage streams src, an image as served, onto d: it hashes the bytes as
// received, decompresses them, and writes the image in 4 MiB blocks from
// offset 0; an all-zero block becomes a hole (punched on a file, zeroed on a
// device) instead of a write.
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
	dev, closeLog, err := logWrites(t)
	if err != nil {
		return ImageResult{}, err
	}
	defer closeLog()
	return writeImage(ctx, src, spec, dev, d.Name, t.size, resumeFrom, progress)
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
}

func writeImage(ctx context.Context, src io.Reader, spec ImageSpec, dev blockDev, name string, size, resumeFrom int64, progress func(int64)) (ImageResult, error) {
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
		cmp: make([]byte, blockSize), zeros: make([]byte, blockSize)}
	w.res = ImageResult{Disk: name, Started: time.Now().UTC()}
	h := sha256.New()
	counted := &countingReader{r: src, h: h}
	dec, closeDec, err := decompressor(bufio.NewReaderSize(counted, 1<<20), spec.Compression)
	if err != nil {
		return ImageResult{}, err
	}
	if err := w.copyBlocks(ctx, dec, closeDec); err != nil {
		return ImageResult{}, err
	}
	if _, err := io.Copy(io.Discard, counted); err != nil { // the digest covers the whole stream as served
		return ImageResult{}, errs.Wrap(errs.DriverError, err, "read the rest of the image stream")
	}
	if err := dev.Sync(); err != nil {
		return ImageResult{}, errs.Wrap(errs.DriverError, err, "flush disk %s", name)
	}
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
	blocks, recycle, stop := readAhead(dec, closeDec)
	defer stop()
	sy := startSyncer(w.dev, w.progress)
	err := w.consume(ctx, blocks, recycle, sy)
	if serr := sy.finish(); err == nil && serr != nil {
		err = errs.Wrap(errs.DriverError, serr, "flush disk %s", w.name)
	}
	return err
}

func (w *imageWriter) consume(ctx context.Context, blocks <-chan chunk, recycle func([]byte), sy *syncer) error {
	var off, checked int64
	for c := range blocks {
		if ctxDone(ctx) {
			return ctx.Err()
		}
		if c.n > 0 {
			if off+int64(c.n) > w.size {
				return errs.Invalid("image.size", "image is larger than disk %s of %d bytes (at least %d bytes)", w.name, w.size, off+int64(c.n))
			}
			if err := w.putBlock(c.buf[:c.n], off); err != nil {
				return err
			}
			off += int64(c.n)
			w.res.ImageBytes = off
		}
		if off-checked >= SyncEvery {
			sy.checkpoint(off)
			checked = off
		}
		switch {
		case c.err == io.EOF:
			return nil
		case c.err != nil:
			return errs.Wrap(errs.DriverError, c.err, "read image stream at image offset %d", off)
		}
		recycle(c.buf)
	}
	return errs.New(errs.Internal, "image read-ahead ended without end of stream")
}

// putBlock writes one block at off: compared and skipped below the resume
// point, a hole when all zero, a write otherwise.
func (w *imageWriter) putBlock(b []byte, off int64) error {
	n := int64(len(b))
	if off < w.resume {
		k, err := w.dev.ReadAt(w.cmp[:n], off)
		if int64(k) == n && bytes.Equal(w.cmp[:n], b) {
			w.res.BytesSkipped += n
			return nil
		}
		if err != nil && int64(k) < n && !errors.Is(err, io.EOF) {
			return errs.Wrap(errs.DriverError, err, "read disk %s at %d to resume", w.name, off)
		}
		w.res.BytesRepaired += n
	}
	if bytes.Equal(b, w.zeros[:n]) {
		if err := w.dev.zeroRange(off, n); err == nil {
			w.res.BytesZeroed += n
			return nil
		}
		// a device that cannot zero this range cheaply (or unaligned): write the zeros
	}
	if _, err := w.dev.WriteAt(b, off); err != nil {
		return errs.Wrap(errs.DriverError, err, "write disk %s at %d", w.name, off)
	}
	if off >= w.resume {
		w.res.BytesWritten += n
	}
	return nil
}

// readBlock fills b from r. Unlike io.ReadFull it returns io.EOF (with the
// bytes read) only when r itself ended cleanly, so a decompressor's
// io.ErrUnexpectedEOF on a truncated stream stays an error.
func readBlock(r io.Reader, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		k, err := r.Read(b[n:])
		n += k
		if err != nil {
			return n, err
		}
	}
	return n, nil
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
		z, err := zstd.NewReader(r, zstd.WithDecoderLowmem(false), zstd.WithDecoderMaxWindow(1<<31))
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
