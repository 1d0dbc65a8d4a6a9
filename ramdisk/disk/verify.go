package disk

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"

	"github.com/better-compute/better-compute/errs"
)

// Sampling of a quick wipe's read-back on a block device: besides the whole
// head and tail, sampleCount blocks of sampleSize spread across the disk.
const (
	sampleCount = 1024
	sampleSize  = 64 << 10
)

// verifier reads a disk back and checks it is zero. The first nonzero byte or
// read error stops it and is recorded in failure.
type verifier struct {
	t        *target
	fault    Fault
	progress func(Progress)

	verified int64 // bytes proven zero (read, or a hole)
	read     int64 // bytes read
	extents  int   // data extents read (files)
	samples  int   // sampled blocks (devices, quick)
	failure  string
	buf      []byte
	zeros    []byte
}

// full proves the whole logical disk zero. On a file it reads only the data
// extents (SEEK_DATA/SEEK_HOLE) and counts holes as verified: the filesystem
// guarantees they read as zeros. On a device it reads every byte.
func (v *verifier) full(ctx context.Context) error {
	if v.injectedError() {
		return nil
	}
	size := v.t.size
	for off := int64(0); off < size && v.failure == ""; {
		ds, ok, err := v.t.nextData(off)
		if err != nil {
			return errs.Wrap(errs.DriverError, err, "read back disk %s: find data after %d", v.t.name, off)
		}
		if !ok {
			v.verified += size - off
			break
		}
		v.verified += ds - off // the hole before the extent
		he, err := v.t.nextHole(ds)
		if err != nil {
			return errs.Wrap(errs.DriverError, err, "read back disk %s: find hole after %d", v.t.name, ds)
		}
		v.extents++
		if err := v.check(ctx, ds, he-ds); err != nil {
			return err
		}
		off = he
	}
	return nil
}

// sampled checks head and tail whole and sampleCount blocks between them, at
// evenly spaced offsets shifted by a random jitter so that no fixed pattern
// of unerased ranges can hide between the samples run after run.
func (v *verifier) sampled(ctx context.Context) error {
	if v.injectedError() {
		return nil
	}
	size := v.t.size
	edge := min(int64(edgeBytes), size/2) &^ 511
	if err := v.check(ctx, 0, edge); err != nil || v.failure != "" {
		return err
	}
	if err := v.check(ctx, size-edge, edge); err != nil || v.failure != "" {
		return err
	}
	mid := size - 2*edge
	if mid < sampleSize {
		return v.check(ctx, edge, mid)
	}
	stride := mid / sampleCount
	for i := range int64(sampleCount) {
		off := edge + i*stride
		if span := stride - sampleSize; span > 0 {
			off += rand.Int64N(span+1) &^ 511
		}
		n := min(int64(sampleSize), size-edge-off)
		if err := v.check(ctx, off, n); err != nil || v.failure != "" {
			return err
		}
		v.samples++
	}
	return nil
}

// injectedError applies the ReadBackError fault: the read-back fails at once.
func (v *verifier) injectedError() bool {
	if v.fault.ReadBackError {
		v.failure = "read error at offset 0: injected I/O error (fakehw fault)"
	}
	return v.fault.ReadBackError
}

// check reads [off, off+n) and records the first nonzero byte or read error
// as the failure. It returns an error only when ctx ends.
func (v *verifier) check(ctx context.Context, off, n int64) error {
	if v.buf == nil {
		v.buf, v.zeros = make([]byte, blockSize), make([]byte, blockSize)
	}
	for end := off + n; off < end; {
		if err := ctx.Err(); err != nil {
			return err
		}
		b := v.buf[:min(int64(len(v.buf)), end-off)]
		k, err := v.t.f.ReadAt(b, off)
		v.read += int64(k)
		if i := firstNonzero(b[:k], v.zeros); i >= 0 {
			v.failure = fmt.Sprintf("nonzero byte at offset %d", off+int64(i))
			return nil
		}
		if err != nil && k < len(b) {
			v.failure = fmt.Sprintf("read error at offset %d: %v", off+int64(k), err)
			return nil
		}
		v.verified += int64(k)
		off += int64(k)
		v.progress(Progress{Disk: v.t.name, Phase: "verify", Done: off, Total: v.t.size})
	}
	return nil
}

// firstNonzero returns the index of the first nonzero byte of b, or -1.
// zeros is an all-zero buffer; comparing against it runs at memcmp speed.
func firstNonzero(b, zeros []byte) int {
	for base := 0; base < len(b); base += len(zeros) {
		c := b[base:min(len(b), base+len(zeros))]
		if bytes.Equal(c, zeros[:len(c)]) {
			continue
		}
		for i, x := range c {
			if x != 0 {
				return base + i
			}
		}
	}
	return -1
}

func (v *verifier) summary() string {
	switch {
	case v.t.isDev && v.samples > 0:
		return fmt.Sprintf("head and tail %d MiB each, %d samples of %d KiB: %d bytes read, all zero",
			min(int64(edgeBytes), v.t.size/2)>>20, v.samples, sampleSize>>10, v.read)
	case v.t.isDev:
		return fmt.Sprintf("every byte read: %d bytes", v.read)
	}
	return fmt.Sprintf("%d data extents (%d bytes read), holes %d bytes, of %d bytes",
		v.extents, v.read, v.verified-v.read, v.t.size)
}
