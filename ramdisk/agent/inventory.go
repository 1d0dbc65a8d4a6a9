package agent

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
)

// NIC, Inventory and InventoryDisk are inventory.refresh's result, which
// the control plane's workflows read too (kinds).
type (
	NIC           = kinds.NIC
	Inventory     = kinds.Inventory
	InventoryDisk = kinds.InventoryDisk
)

// inventory is inventory.refresh.
func (a *agent) inventory(ctx context.Context, _ kinds.Command, _ *tracker) (any, error) {
	disks, err := a.cfg.Disks.Enumerate(ctx)
	if err != nil {
		return nil, err
	}
	inv := Inventory{NodeID: a.nodeID, ProductUUID: a.cfg.ProductUUID, Disks: []InventoryDisk{}, CPUs: a.cfg.CPUs, MemoryBytes: a.cfg.MemoryBytes}
	for _, d := range disks {
		inv.Disks = append(inv.Disks, InventoryDisk{Name: d.Name, WWN: d.WWN, Serial: d.Serial, Model: d.Model,
			SizeBytes: d.SizeBytes, Rotational: d.Rotational, SupportsSecureErase: d.SupportsSecureErase,
			SupportsCryptoErase: d.SupportsCryptoErase})
	}
	if inv.NICs = a.cfg.NICs; inv.NICs == nil {
		if inv.NICs, err = systemNICs(); err != nil {
			return nil, err
		}
	}
	if inv.CPUs == 0 {
		inv.CPUs = runtime.NumCPU()
	}
	if inv.MemoryBytes == 0 {
		if inv.MemoryBytes, err = memTotal(filepath.Join(a.cfg.Root, "proc/meminfo")); err != nil {
			return nil, err
		}
	}
	if inv.ProductUUID == "" {
		b, _ := os.ReadFile(filepath.Join(a.cfg.Root, "sys/class/dmi/id/product_uuid")) // absent on some machines: left empty
		inv.ProductUUID = strings.ToLower(strings.TrimSpace(string(b)))
	}
	return inv, nil
}

// systemNICs lists the interfaces with an Ethernet hardware address.
func systemNICs() ([]NIC, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, errs.Wrap(errs.DriverError, err, "list network interfaces")
	}
	nics := []NIC{}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 || len(i.HardwareAddr) != 6 {
			continue
		}
		nics = append(nics, NIC{Name: i.Name, MAC: i.HardwareAddr.String()})
	}
	return nics, nil
}

// memTotal reads MemTotal from a meminfo file, in bytes.
func memTotal(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, errs.Wrap(errs.DriverError, err, "read memory size")
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemTotal:")
		if !ok {
			continue
		}
		fs := strings.Fields(rest)
		if len(fs) == 2 && fs[1] == "kB" {
			if kb, err := strconv.ParseInt(fs[0], 10, 64); err == nil {
				return kb * 1024, nil
			}
		}
		return 0, errs.New(errs.DriverError, "%s: cannot read MemTotal line %q", path, sc.Text())
	}
	return 0, errs.New(errs.DriverError, "%s has no MemTotal line", path)
}
