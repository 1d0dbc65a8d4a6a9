//go:build !fakehw

package disk

import (
	"context"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/better-compute/better-compute/errs"
)

// Enumerate lists the machine's disks from /sys/block (under h.Dir): whole
// disks only, no loop, ram, zram, device-mapper, md, optical or floppy
// devices, no partitions, no empty media. Each disk is named by WWN, else
// serial; a disk with neither fails the enumeration with UNSUPPORTED rather
// than being left out of the inventory (and so out of the wipe).
func (h Host) Enumerate(ctx context.Context) ([]Disk, error) {
	return enumerateSys(ctx, h.root(), execRunner{})
}

func (h Host) root() string {
	if h.Dir == "" {
		return "/"
	}
	return h.Dir
}

func enumerateSys(ctx context.Context, root string, run runner) ([]Disk, error) {
	sysBlock := filepath.Join(root, "sys", "block")
	ents, err := os.ReadDir(sysBlock)
	if err != nil {
		return nil, errs.Wrap(errs.DriverError, err, "list block devices")
	}
	byID := wwnLinks(filepath.Join(root, "dev", "disk", "by-id"))
	var disks []Disk
	for _, e := range ents {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		kname := e.Name()
		if skipKernelName(kname) || exists(filepath.Join(sysBlock, kname, "partition")) {
			continue
		}
		d, ok, err := readSysDisk(ctx, root, kname, byID, run)
		if err != nil {
			return nil, err
		}
		if ok {
			disks = append(disks, d)
		}
	}
	sort.Slice(disks, func(i, j int) bool { return disks[i].Name < disks[j].Name })
	return disks, nil
}

func skipKernelName(n string) bool {
	for _, p := range []string{"loop", "ram", "zram", "dm-", "md", "sr", "fd", "nbd"} {
		if strings.HasPrefix(n, p) {
			return true
		}
	}
	return false
}

// readSysDisk reads one /sys/block entry; ok is false for empty media.
func readSysDisk(ctx context.Context, root, kname string, byID map[string]string, run runner) (Disk, bool, error) {
	dir := filepath.Join(root, "sys", "block", kname)
	sectors, _ := strconv.ParseInt(readAttr(dir, "size"), 10, 64)
	if sectors == 0 {
		return Disk{}, false, nil
	}
	d := Disk{
		SizeBytes:  sectors * 512, // /sys/block/X/size is always in 512-byte units
		Model:      firstAttr(dir, "device/model", "model"),
		Serial:     firstAttr(dir, "serial", "device/serial"),
		Rotational: readAttr(dir, "queue/rotational") == "1",
		Path:       filepath.Join(root, "dev", kname),
	}
	if d.Serial == "" {
		d.Serial = vpdSerial(filepath.Join(dir, "device", "vpd_pg80"))
	}
	d.WWN = wwnFromWWID(firstAttr(dir, "wwid", "device/wwid"))
	if d.WWN == "" {
		d.WWN = byID[kname]
	}
	d.Name = NameFor(d.WWN, d.Serial)
	if d.Name == "" {
		return Disk{}, false, errs.New(errs.Unsupported,
			"disk %s has neither a WWN nor a serial, so it cannot be named stably; remove it or fix its firmware", kname)
	}
	d.SupportsSecureErase, d.SupportsCryptoErase = probeErase(ctx, run, d.Path)
	return d, true, nil
}

// wwnFromWWID turns a sysfs wwid into a WWN: "naa.5000c500…" → "0x5000c500…",
// "eui.0025…" stays as it is; t10 and vendor ids are not WWNs.
func wwnFromWWID(w string) string {
	switch {
	case strings.HasPrefix(w, "naa."):
		return "0x" + strings.ToLower(w[4:])
	case strings.HasPrefix(w, "eui."):
		return strings.ToLower(w)
	}
	return ""
}

// wwnLinks maps kernel names to WWNs from udev's /dev/disk/by-id/wwn-* links.
func wwnLinks(dir string) map[string]string {
	m := map[string]string{}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		n := e.Name()
		if !strings.HasPrefix(n, "wwn-") || strings.Contains(n, "-part") {
			continue
		}
		if t, err := os.Readlink(filepath.Join(dir, n)); err == nil {
			m[filepath.Base(t)] = strings.TrimPrefix(n, "wwn-")
		}
	}
	return m
}

// vpdSerial reads the unit serial number VPD page (4-byte header, then ASCII).
func vpdSerial(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) <= 4 {
		return ""
	}
	return strings.TrimSpace(strings.TrimRight(string(b[4:]), "\x00"))
}

func readAttr(dir, name string) string {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func firstAttr(dir string, names ...string) string {
	for _, n := range names {
		if v := readAttr(dir, n); v != "" {
			return v
		}
	}
	return ""
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }
