package demo

import (
	"os"
	"path/filepath"
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
	demoDir := func(t *testing.T, dir string) {
		if err := prepareDataDir(dir); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		want  errs.Kind // "": wiped and prepared
	}{
		{"not a demo's", func(*testing.T, string) {}, errs.InvalidInput},
		{"a running demo's", func(t *testing.T, dir string) {
			demoDir(t, dir)
			// A flock belongs to its open file: this one conflicts with the
			// one CheckDataDirFree opens, as a running demo's would.
			lock, err := os.OpenFile(filepath.Join(dir, tserver.LockFile), os.O_RDWR|os.O_CREATE, 0o600)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { lock.Close() })
			if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
				t.Fatal(err)
			}
		}, errs.InvalidState},
		{"an idle demo's", demoDir, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			tc.setup(t, dir)
			kept := filepath.Join(dir, "kept")
			if err := os.WriteFile(kept, []byte("x"), 0o600); err != nil {
				t.Fatal(err)
			}
			err := prepareDataDir(dir)
			_, stat := os.Stat(kept)
			switch {
			case tc.want == "" && (err != nil || !os.IsNotExist(stat)):
				t.Errorf("prepareDataDir = %v, its file after: %v; want it wiped", err, stat)
			case tc.want != "" && (!errs.Is(err, tc.want) || stat != nil):
				t.Errorf("prepareDataDir = %v, its file after: %v; want %s with nothing removed", err, stat, tc.want)
			}
		})
	}
}
