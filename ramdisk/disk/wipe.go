package disk

import (
	"context"
	"errors"
	"io/fs"
	"time"

	"github.com/better-compute/better-compute/errs"
)

const (
	// edgeBytes is how much of the head and the tail a quick wipe writes with
	// zeros: partition tables (GPT has a backup at the end), RAID and LVM
	// metadata live there.
	edgeBytes = 64 << 20
	blockSize = 4 << 20 // unit of reads and writes
)

// Wipe erases d in the given mode and reads it back, and says what the
// read-back proved. It is safe to call again after a crash: every mode starts
// over and ends with a fresh read-back.
//
// A read-back that finds a nonzero byte, or cannot read, is not an error: the
// Result says Verified=false and why (Failure), and the caller attests to that.
// Errors are for a wipe that could not run: the disk cannot be opened, the
// mode is not supported by the disk (UNSUPPORTED, naming disk and mode), the
// erase command failed (DRIVER_ERROR), ctx ended.
//
// Regular files (fake disks) are erased by punching holes; secure-erase and
// crypto-erase are emulated when the sidecar says the disk supports them
// (crypto-erase also replaces the sidecar's media key), and then the whole
// logical disk is verified by reading every data extent (holes read as zero).
// Block devices: quick writes zeros over the head and tail and zeroes the rest
// cheaply, then verifies head, tail and samples across the disk; secure-erase
// and crypto-erase run the drive's own erase (hdparm, nvme-cli) and then read
// every byte back.
func Wipe(ctx context.Context, d Disk, mode Mode, progress func(Progress)) (Result, error) {
	return wipe(ctx, d, mode, progress, execRunner{})
}

func wipe(ctx context.Context, d Disk, mode Mode, progress func(Progress), run runner) (Result, error) {
	if _, err := ParseMode(string(mode)); err != nil {
		return Result{}, err
	}
	if progress == nil {
		progress = func(Progress) {}
	}
	t, err := openTarget(d)
	if err != nil {
		return Result{}, err
	}
	defer t.Close()
	res := Result{Disk: d.Name, Mode: mode, SizeBytes: t.size, Started: time.Now().UTC()}

	var fault Fault
	if t.isDev {
		err = eraseDevice(ctx, t, d, mode, progress, run)
	} else {
		fault, err = eraseFile(ctx, t, d, mode, progress)
	}
	if err != nil {
		return Result{}, err
	}
	if err := t.f.Sync(); err != nil {
		return Result{}, errs.Wrap(errs.DriverError, err, "flush disk %s after %s", d.Name, mode)
	}
	v := verifier{t: t, fault: fault, progress: progress}
	if t.isDev && mode == Quick {
		err = v.sampled(ctx)
	} else {
		err = v.full(ctx)
	}
	if err != nil {
		return Result{}, err
	}
	res.BytesVerified, res.BytesRead = v.verified, v.read
	res.Verified, res.Failure, res.ZeroCheck = v.failure == "", v.failure, v.summary()
	res.Finished = time.Now().UTC()
	return res, nil
}

// eraseFile erases a fake disk: every mode punches the whole file; the
// sidecar decides which modes the disk supports and which fault it has.
func eraseFile(ctx context.Context, t *target, d Disk, mode Mode, progress func(Progress)) (Fault, error) {
	sc, err := readSidecar(d.Path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return Fault{}, err
	}
	if err := supports(d.Name, mode, sc.SecureErase, sc.CryptoErase); err != nil {
		return Fault{}, err
	}
	progress(Progress{Disk: d.Name, Phase: "erase", Total: t.size})
	if err := ctx.Err(); err != nil {
		return Fault{}, err
	}
	if err := t.punch(0, t.size); err != nil {
		return Fault{}, errs.Wrap(errs.DriverError, err, "erase fake disk %s", d.Name)
	}
	if mode == CryptoErase {
		sc.CryptoKey = newKey()
		if err := writeSidecar(d.Path, sc); err != nil {
			return Fault{}, err
		}
	}
	if f := sc.Fault; f.LeaveNonzero {
		if err := leaveNonzero(t, f.NonzeroAt); err != nil {
			return Fault{}, err
		}
	}
	progress(Progress{Disk: d.Name, Phase: "erase", Done: t.size, Total: t.size})
	return sc.Fault, nil
}

// leaveNonzero is the LeaveNonzero fault: one 4 KiB block of 0xa5 survives.
func leaveNonzero(t *target, at int64) error {
	const n = 4096
	at = max(0, min(at, t.size-n)) &^ (n - 1)
	b := make([]byte, n)
	for i := range b {
		b[i] = 0xa5
	}
	if _, err := t.f.WriteAt(b, at); err != nil {
		return errs.Wrap(errs.DriverError, err, "inject nonzero block into fake disk %s", t.name)
	}
	return nil
}

// eraseDevice erases a block device.
func eraseDevice(ctx context.Context, t *target, d Disk, mode Mode, progress func(Progress), run runner) error {
	if mode != Quick {
		if err := supports(d.Name, mode, d.SupportsSecureErase, d.SupportsCryptoErase); err != nil {
			return err
		}
		progress(Progress{Disk: d.Name, Phase: "erase", Total: t.size})
		if err := hwErase(ctx, run, d, mode); err != nil {
			return err
		}
		progress(Progress{Disk: d.Name, Phase: "erase", Done: t.size, Total: t.size})
		return nil
	}
	edge := min(int64(edgeBytes), t.size/2) &^ 511
	steps := []struct {
		what    string
		off, n  int64
		cheaply bool
	}{
		{"head", 0, edge, false},
		{"tail", t.size - edge, edge, false},
		{"middle", edge, t.size - 2*edge, true},
	}
	var done int64
	for _, s := range steps {
		if err := ctx.Err(); err != nil {
			return err
		}
		var err error
		if s.cheaply {
			err = t.zeroRange(s.off, s.n)
		} else {
			err = writeZeros(t, s.off, s.n)
		}
		if err != nil {
			return errs.Wrap(errs.DriverError, err, "quick wipe of disk %s: zero the %s (%d bytes at %d)", d.Name, s.what, s.n, s.off)
		}
		done += s.n
		progress(Progress{Disk: d.Name, Phase: "erase", Done: done, Total: t.size})
	}
	return nil
}

// writeZeros writes real zeros over [off, off+n).
func writeZeros(t *target, off, n int64) error {
	z := make([]byte, min(n, blockSize))
	for n > 0 {
		k := min(n, int64(len(z)))
		if _, err := t.f.WriteAt(z[:k], off); err != nil {
			return err
		}
		off, n = off+k, n-k
	}
	return nil
}

// supports fails with UNSUPPORTED, naming the disk and the mode, when the disk
// does not report the erase the mode needs.
// Supports reports whether the disk can be wiped in mode.
func (d Disk) Supports(mode Mode) bool {
	return supports(d.Name, mode, d.SupportsSecureErase, d.SupportsCryptoErase) == nil
}

func supports(name string, mode Mode, secure, crypto bool) error {
	switch {
	case mode == SecureErase && !secure:
		return errs.New(errs.Unsupported, "disk %s does not support secure-erase (no ATA security erase or NVMe format, or the drive is frozen); use quick", name)
	case mode == CryptoErase && !crypto:
		return errs.New(errs.Unsupported, "disk %s does not support crypto-erase (no NVMe cryptographic erase); use secure-erase or quick", name)
	}
	return nil
}
