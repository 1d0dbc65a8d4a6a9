//go:build fakehw

package agent

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ramdisk/disk"
)

// TestLocateOSTakesTheDeployedHead: the fake kernel is the disk's first
// 64 KiB whatever is in them, and a disk whose first 64 KiB are zero (data
// after them does not count) is refused INVALID_STATE before anything is
// staged.
func TestLocateOSTakesTheDeployedHead(t *testing.T) {
	for _, tt := range []struct {
		name    string
		dataAt  int64 // where the disk's one data byte is
		wantErr errs.Kind
	}{
		{"data first", 0, ""},
		{"data last in the head", fakeKernelBytes - 1, ""},
		{"data after the head", fakeKernelBytes, errs.InvalidState},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "disk.img")
			f, err := os.Create(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := f.Truncate(4 << 20); err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte{0x5a}, tt.dataAt); err != nil {
				t.Fatal(err)
			}
			f.Close()
			tmp := t.TempDir()
			k, err := locateOS(context.Background(), disk.Disk{Name: "serial-OS-1", Path: path}, tmp)
			if tt.wantErr != "" {
				if !errs.Is(err, tt.wantErr) {
					t.Fatalf("locateOS = %+v, %v; want %s", k, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("locateOS = %v", err)
			}
			want := make([]byte, fakeKernelBytes)
			want[tt.dataAt] = 0x5a
			got, err := os.ReadFile(k.kernel)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("staged kernel: %d bytes, %v; want the disk's first %d bytes", len(got), err, fakeKernelBytes)
			}
			if k.cmdline != "root=serial-OS-1 ro" {
				t.Errorf("cmdline = %q", k.cmdline)
			}
		})
	}
}
