package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/better-compute/better-compute/api"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/store"
)

// ensureRootToken creates a root API token on first start and writes it to
// path with mode 0600. A token file that is there and known is kept; one
// the database does not know (a new database) is replaced.
func ensureRootToken(ctx context.Context, s *store.Store, path string) error {
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if _, _, err := s.LookupAPIToken(ctx, pki.HashToken(strings.TrimSpace(string(b)))); err == nil {
			return os.Chmod(path, 0o600)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("read root token %s: %w", path, err)
	}
	plain, hash := pki.NewToken("api")
	if _, err := s.CreateAPIToken(ctx, api.RootTenant, "root (created by serve)", hash); err != nil {
		return err
	}
	return writeSecret(path, []byte(string(plain)+"\n"))
}

// writeSecret writes b to path with mode 0600, atomically.
func writeSecret(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
