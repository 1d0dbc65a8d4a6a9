package siteagent

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/ramdisk/initramfs"
	"github.com/better-compute/better-compute/siteagent/internal/fakecp"
)

// TestStartRefusesBadRamdisk: a configured ramdisk dir whose kernel or
// initramfs is missing or corrupt stops the site agent at start, naming the
// file and the fix; good files let it start.
func TestStartRefusesBadRamdisk(t *testing.T) {
	t.Parallel()
	cp := fakecp.Start(t)
	kernel := make([]byte, 1024)
	kernel[0x1FE], kernel[0x1FF] = 0x55, 0xAA
	copy(kernel[0x202:], "HdrS")
	archive := []byte("070701" + strings.Repeat("0", 104))
	for _, tt := range []struct {
		name           string
		kernel, initrd []byte // nil: missing
		want           string // "" when Start must succeed
	}{
		{"missing kernel", nil, archive, "vmlinuz does not exist"},
		{"missing initrd", kernel, nil, "initrd.img does not exist"},
		{"kernel is not a bzImage", []byte("<html>404</html>"), archive, "vmlinuz is not a Linux kernel"},
		{"initrd is not an archive", kernel, []byte("\x28\xb5\x2f\xfd garbage"), "initrd.img is not an initramfs"},
		{"good files", kernel, archive, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t, cp)
			cfg.RamdiskDir = t.TempDir()
			for name, b := range map[string][]byte{initramfs.KernelFile: tt.kernel, initramfs.InitrdFile: tt.initrd} {
				if b != nil {
					if err := os.WriteFile(filepath.Join(cfg.RamdiskDir, name), b, 0o644); err != nil {
						t.Fatal(err)
					}
				}
			}
			a, err := Start(t.Context(), cfg)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Start(good ramdisk) = %v", err)
				}
				a.Stop()
				return
			}
			if err == nil {
				a.Stop()
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "./run ramdisk") {
				t.Errorf("Start(%s) = %v, want an error containing %q and the fix (./run ramdisk)", tt.name, err, tt.want)
			}
		})
	}
}
