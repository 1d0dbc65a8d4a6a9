//go:build !fakehw

package disk

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/testenv"
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

// TestHostEnumerateRealMachine enumerates the machine running the tests and
// checks the inventory against /sys/block read by another rule than
// Enumerate's name filter: a block device is a disk when it has a device link
// (hardware, or a VM's virtio disk; loop, ram, zram, dm, md and nbd devices
// have none) and media, and is not an optical drive (SCSI type 5) or a
// floppy. Every such disk must be in the inventory with its size, and nothing
// else. A machine with none has nothing to enumerate, so the test cannot pass
// on it by finding zero disks: it is skipped, and fails in CI.
func TestHostEnumerateRealMachine(t *testing.T) {
	t.Parallel()
	want := hardwareDisks(t, "/sys/block")
	if len(want) == 0 {
		testenv.Missing(t, "a disk in /sys/block (a block device with a device link and media)",
			"run on a machine or VM with a disk (CI's VM has one)")
	}
	disks, err := Host{}.Enumerate(context.Background())
	if errs.Is(err, errs.Unsupported) {
		testenv.Missing(t, fmt.Sprintf("disks named by WWN or serial (Host{}.Enumerate() = %v)", err),
			"give the machine's disks a serial (qemu: -device virtio-blk-pci,serial=…)")
	}
	if err != nil {
		t.Fatalf("Host{}.Enumerate() = %v", err)
	}
	got := map[string]int64{}
	for _, d := range disks {
		if d.Name == "" {
			t.Errorf("Host{}.Enumerate() gave %+v, want a named disk", d)
		}
		got[filepath.Base(d.Path)] = d.SizeBytes
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Host{}.Enumerate(): kernel name → bytes (-/sys/block's disks +inventory):\n%s", diff)
	}
}

// hardwareDisks reads the disks of sysBlock by device link, media and
// type (see TestHostEnumerateRealMachine): kernel name → bytes.
func hardwareDisks(t *testing.T, sysBlock string) map[string]int64 {
	t.Helper()
	ents, err := os.ReadDir(sysBlock)
	if err != nil {
		testenv.Missing(t, "sysfs at "+sysBlock, "run the tests on Linux with /sys mounted")
	}
	disks := map[string]int64{}
	for _, e := range ents {
		dir := filepath.Join(sysBlock, e.Name())
		sectors, _ := strconv.ParseInt(readAttr(dir, "size"), 10, 64)
		if !exists(filepath.Join(dir, "device")) || sectors == 0 ||
			readAttr(dir, "device/type") == "5" || strings.HasPrefix(e.Name(), "fd") {
			continue
		}
		disks[e.Name()] = sectors * 512
	}
	return disks
}
