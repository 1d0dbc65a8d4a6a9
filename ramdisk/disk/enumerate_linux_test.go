//go:build !fakehw

package disk

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/errs"
)

// sysTree writes a fake /sys and /dev under a temp root: files maps a path
// relative to root to its content; links maps a symlink to its target.
func sysTree(t *testing.T, files, links map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, c := range files {
		full := filepath.Join(root, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for l, target := range links {
		full := filepath.Join(root, l)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, full); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

func TestEnumerateSys(t *testing.T) {
	t.Parallel()
	root := sysTree(t, map[string]string{
		// SATA disk with a WWN from wwid, rotational
		"sys/block/sda/size":             "31251759104\n",
		"sys/block/sda/device/model":     "ST16000NM001G  \n",
		"sys/block/sda/device/wwid":      "naa.5000C500A1B2C3D4\n",
		"sys/block/sda/device/vpd_pg80":  "\x00\x80\x00\x08ZL2ABCDE",
		"sys/block/sda/queue/rotational": "1\n",
		"sys/block/sda/sda1/partition":   "1\n",
		// NVMe namespace with an EUI-64
		"sys/block/nvme0n1/size":             "7501476528\n",
		"sys/block/nvme0n1/wwid":             "eui.0025388b71b2c3d4\n",
		"sys/block/nvme0n1/device/serial":    "S4EWNX0R123456  \n",
		"sys/block/nvme0n1/device/model":     "SAMSUNG MZQL23T8HCLS\n",
		"sys/block/nvme0n1/queue/rotational": "0\n",
		// virtio disk: serial only
		"sys/block/vda/size":             "2097152\n",
		"sys/block/vda/serial":           "vm-disk-7\n",
		"sys/block/vda/queue/rotational": "1\n",
		// disk whose WWN only udev knows
		"sys/block/sdb/size":          "1953525168\n",
		"sys/block/sdb/device/wwid":   "t10.ATA     WDC WD10EZEX\n",
		"sys/block/sdb/device/serial": "WD-1\n",
		// skipped: virtual devices, empty media
		"sys/block/loop0/size": "2048\n", "sys/block/zram0/size": "2048\n", "sys/block/dm-0/size": "2048\n",
		"sys/block/ram0/size": "2048\n", "sys/block/sr0/size": "0\n", "sys/block/md127/size": "2048\n",
		"sys/block/sdc/size": "0\n",
	}, map[string]string{
		"dev/disk/by-id/wwn-0x50014ee2b1c2d3e4":       "../../sdb",
		"dev/disk/by-id/wwn-0x50014ee2b1c2d3e4-part1": "../../sdb1",
	})
	got, err := enumerateSys(context.Background(), root, noTools{})
	if err != nil {
		t.Fatalf("enumerateSys() = %v", err)
	}
	want := []Disk{
		{Name: "serial-vm-disk-7", Serial: "vm-disk-7", SizeBytes: 2097152 * 512, Path: root + "/dev/vda", Rotational: true},
		{Name: "wwn-0x5000c500a1b2c3d4", WWN: "0x5000c500a1b2c3d4", Serial: "ZL2ABCDE", Model: "ST16000NM001G",
			SizeBytes: 31251759104 * 512, Path: root + "/dev/sda", Rotational: true},
		{Name: "wwn-0x50014ee2b1c2d3e4", WWN: "0x50014ee2b1c2d3e4", Serial: "WD-1", SizeBytes: 1953525168 * 512, Path: root + "/dev/sdb"},
		{Name: "wwn-eui.0025388b71b2c3d4", WWN: "eui.0025388b71b2c3d4", Serial: "S4EWNX0R123456", Model: "SAMSUNG MZQL23T8HCLS",
			SizeBytes: 7501476528 * 512, Path: root + "/dev/nvme0n1"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("enumerateSys() mismatch (-want +got):\n%s", diff)
	}
}

func TestEnumerateSysUnnamedDisk(t *testing.T) {
	t.Parallel()
	root := sysTree(t, map[string]string{"sys/block/sdz/size": "2048\n"}, nil)
	_, err := enumerateSys(context.Background(), root, noTools{})
	if !errs.Is(err, errs.Unsupported) {
		t.Errorf("enumerateSys(disk without WWN or serial) = %v, want UNSUPPORTED", err)
	}
}

func TestHostEnumerateRealMachine(t *testing.T) {
	t.Parallel()
	// the machine running the tests: whatever it has, every disk is named
	disks, err := Host{}.Enumerate(context.Background())
	if err != nil {
		t.Skipf("Host{}.Enumerate() = %v (no sysfs here?)", err)
	}
	for _, d := range disks {
		if d.Name == "" || d.SizeBytes <= 0 {
			t.Errorf("Host{}.Enumerate() gave %+v, want a named disk with a size", d)
		}
	}
}
