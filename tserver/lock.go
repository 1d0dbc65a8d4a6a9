package tserver

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/better-compute/better-compute/errs"
)

// LockFile is the file in Config.DataDir that one running server holds locked.
const LockFile = "temporal.lock"

// lockDataDir takes an exclusive lock on dir/temporal.lock, so that two
// servers never share one database (each would claim the history shard and
// they would fence each other off). The lock goes with the process; the file
// holds the owner's pid for the error message.
func lockDataDir(dir string) (*os.File, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, errs.Wrap(errs.Internal, err, "cannot create the data directory %s", dir)
	}
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "cannot open lock file %s", path)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		owner, _ := os.ReadFile(path)
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errs.New(errs.InvalidState,
				"the Temporal data in %s is in use by another server (pid %s): stop it or use another data directory",
				dir, strings.TrimSpace(string(owner)))
		}
		return nil, errs.Wrap(errs.Internal, err, "cannot lock %s", path)
	}
	if err := f.Truncate(0); err == nil {
		f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return f, nil
}

// CheckDataDirFree fails with INVALID_STATE, naming the owner's pid, when a
// running server holds dir's Temporal data (lockDataDir); nil when none does
// or dir holds none. For a caller about to remove dir (the demo's wipe).
func CheckDataDirFree(dir string) error {
	if _, err := os.Stat(filepath.Join(dir, LockFile)); os.IsNotExist(err) {
		return nil
	}
	f, err := lockDataDir(dir)
	if err != nil {
		return err
	}
	return f.Close() // the lock goes with the descriptor
}
