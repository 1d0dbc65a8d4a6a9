package redfish

import (
	"context"
	"math"
	"sort"
	"strings"

	"github.com/better-compute/better-compute/bmc"
	"github.com/stmcginnis/gofish/redfish"
)

// Inspect reads the system's identity, processors, memory and NIC MACs and the
// BMC's firmware version. It changes nothing.
func (d *Driver) Inspect(ctx context.Context) (bmc.Inventory, error) {
	const op = "inspect"
	cn, sys, err := d.connectSystem(ctx, op)
	if err != nil {
		return bmc.Inventory{}, err
	}
	defer cn.close()
	inv := bmc.Inventory{
		Manufacturer: strings.TrimSpace(sys.Manufacturer),
		Model:        strings.TrimSpace(sys.Model),
		Serial:       strings.TrimSpace(sys.SerialNumber),
		ProductUUID:  strings.ToLower(strings.TrimSpace(sys.UUID)),
		CPUCount:     sys.ProcessorSummary.Count,
		CPUThreads:   sys.ProcessorSummary.LogicalProcessorCount,
		MemoryBytes:  uint64(math.Round(float64(sys.MemorySummary.TotalSystemMemoryGiB) * (1 << 30))),
	}
	nics, err := sys.EthernetInterfaces()
	if err != nil {
		return bmc.Inventory{}, d.fail(op, err)
	}
	inv.MACs = macs(nics)
	fw, err := d.firmware(cn, sys)
	if err != nil {
		return bmc.Inventory{}, d.fail(op, err)
	}
	inv.BMCFirmware = fw
	return inv, nil
}

// macs returns the NICs' MACs (effective, else permanent) in lowercase colon
// form, sorted (gofish fetches collection members concurrently, so their order
// is not the BMC's), without duplicates (VLAN interfaces repeat their parent's)
// or zeros.
func macs(nics []*redfish.EthernetInterface) []string {
	var out []string
	seen := map[string]bool{}
	for _, n := range nics {
		raw := n.MACAddress
		if raw == "" {
			raw = n.PermanentMACAddress
		}
		mac, err := bmc.ParseMAC("macs", raw)
		if err != nil || mac == "00:00:00:00:00:00" || seen[mac] {
			continue
		}
		seen[mac] = true
		out = append(out, mac)
	}
	sort.Strings(out)
	return out
}

// firmware returns the FirmwareVersion of the system's BMC manager: the first
// manager of ManagedBy, else of the service.
func (d *Driver) firmware(cn *conn, sys *redfish.ComputerSystem) (string, error) {
	managers, err := sys.ManagedBy()
	if err != nil {
		return "", err
	}
	if len(managers) == 0 {
		if managers, err = cn.c.Service.Managers(); err != nil {
			return "", err
		}
	}
	for _, m := range managers {
		if m.FirmwareVersion != "" {
			return m.FirmwareVersion, nil
		}
	}
	return "", nil
}
