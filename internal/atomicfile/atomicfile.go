// Package atomicfile owns the one way better-compute writes state files: a
// synced temporary file in the same directory renamed over the target, so a
// crash (kill -9, power loss) leaves the old file or the new one, never half.
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
	return nil
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
