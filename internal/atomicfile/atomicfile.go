// Package atomicfile owns the one way better-compute writes state files: a
// synced temporary file in the same directory renamed over the target, so a
// crash (kill -9, power loss) leaves the old file or the new one, never half;
// and the directory synced after the rename, so once Write returns a power
// loss leaves the new one.
package atomicfile

import (
	"os"
	"path/filepath"

	"github.com/better-compute/better-compute/errs"
)

// Write writes data to path with mode, atomically.
func Write(path string, data []byte, mode os.FileMode) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return errs.Wrap(errs.Internal, err, "cannot write %s", path)
	}
	tmp := f.Name()
	err = writeSync(f, data, mode)
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return errs.Wrap(errs.Internal, err, "cannot write %s", path)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return errs.Wrap(errs.Internal, err, "wrote %s but cannot make the write durable (sync its directory)", path)
	}
	return nil
}

// syncDir is SyncDir; tests replace it.
var syncDir = SyncDir

// SyncDir syncs dir, so that a rename in it, or a file created in it, is on
// the disk: until then a power loss may bring the old file back or lose the
// new one (the name is a change to the directory, which the file's own sync
// does not write).
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

func writeSync(f *os.File, data []byte, mode os.FileMode) error {
	err := f.Chmod(mode)
	if err == nil {
		_, err = f.Write(data)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
