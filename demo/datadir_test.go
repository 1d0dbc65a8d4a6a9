package demo

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/tserver"
)

// TestPrepareDataDirWipesOnlyAnIdleDemoDir: the demo wipes its data dir at
// start, so --data-dir naming a directory that is not a demo's, or a demo's
// that a running demo holds, is refused with nothing removed. Before, a
// second demo on a running one's data dir removed its PostgreSQL cluster,
// temporal.db and root token, then failed on the ports.
func TestPrepareDataDirWipesOnlyAnIdleDemoDir(t *testing.T) {
	keep := func(t *testing.T, dir string) string {
		t.Helper()
		f := filepath.Join(dir, "keep")
		if err := os.WriteFile(f, []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
		return f
	}
	t.Run("not a demo's", func(t *testing.T) {
		dir := t.TempDir()
		f := keep(t, dir)
		err := prepareDataDir(dir)
		if !errs.Is(err, errs.InvalidInput) || !strings.Contains(err.Error(), "data-dir") {
			t.Errorf("prepareDataDir(a directory of other files) = %v, want INVALID_INPUT naming data-dir", err)
		}
		if _, err := os.Stat(f); err != nil {
			t.Errorf("its file after the refusal: %v, want it kept", err)
		}
	})
	t.Run("a running demo's", func(t *testing.T) {
		dir := t.TempDir()
		if err := prepareDataDir(dir); err != nil {
			t.Fatal(err)
		}
		f := keep(t, dir)
		lock, err := os.OpenFile(filepath.Join(dir, tserver.LockFile), os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		defer lock.Close()
		if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			t.Fatal(err)
		}
		// A flock belongs to its open file: this one conflicts with the one
		// CheckDataDirFree opens, as a running demo's would.
		if err := prepareDataDir(dir); !errs.Is(err, errs.InvalidState) {
			t.Errorf("prepareDataDir(a demo's dir whose Temporal data is locked) = %v, want INVALID_STATE", err)
		}
		if _, err := os.Stat(f); err != nil {
			t.Errorf("its file after the refusal: %v, want it kept", err)
		}
	})
	t.Run("an idle demo's", func(t *testing.T) {
		dir := t.TempDir()
		if err := prepareDataDir(dir); err != nil {
			t.Fatal(err)
		}
		f := keep(t, dir)
		if err := prepareDataDir(dir); err != nil {
			t.Fatalf("prepareDataDir(an idle demo's dir) = %v, want it wiped", err)
		}
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("its file after the wipe: %v, want it gone", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "pki")); err != nil {
			t.Errorf("pki after the wipe: %v, want a fresh CA", err)
		}
	})
}
