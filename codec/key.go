package codec

import (
	"crypto/rand"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/better-compute/better-compute/errs"
)

// LoadOrCreateKey reads the 32-byte key at path, or, when the file does not
// exist, creates it with 32 random bytes and mode 0600 (its directory with
// 0700). A key file of another length, or one readable by group or others, is
// refused: losing or leaking it loses or leaks every payload in history.
func LoadOrCreateKey(path string) ([]byte, error) {
	key, err := readKey(path)
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	key = make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, errs.Wrap(errs.Internal, err, "cannot read random bytes for a new key")
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, errs.Wrap(errs.Internal, err, "cannot create the directory of key file %s", path)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		// Another process created it between our read and our create: use theirs.
		return readKey(path)
	}
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "cannot create key file %s", path)
	}
	if _, err := f.Write(key); err != nil {
		f.Close()
		os.Remove(path)
		return nil, errs.Wrap(errs.Internal, err, "cannot write key file %s", path)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return nil, errs.Wrap(errs.Internal, err, "cannot sync key file %s", path)
	}
	if err := f.Close(); err != nil {
		return nil, errs.Wrap(errs.Internal, err, "cannot close key file %s", path)
	}
	return key, nil
}

func readKey(path string) ([]byte, error) {
	st, err := os.Stat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, errs.Wrap(errs.Internal, err, "cannot stat key file %s", path)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return nil, errs.New(errs.InvalidInput,
			"key file %s has mode %v: it must not be readable by group or others (chmod 600 it)", path, st.Mode().Perm())
	}
	key, err := os.ReadFile(path)
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "cannot read key file %s", path)
	}
	if len(key) != KeySize {
		return nil, errs.New(errs.InvalidInput,
			"key file %s holds %d bytes, want %d: restore the right file; a new key cannot read old history", path, len(key), KeySize)
	}
	return key, nil
}
