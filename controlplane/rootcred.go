package controlplane

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/better-compute/better-compute/api"
	"github.com/better-compute/better-compute/internal/atomicfile"
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
	return atomicfile.Write(path, []byte(string(plain)+"\n"), 0o600)
}
