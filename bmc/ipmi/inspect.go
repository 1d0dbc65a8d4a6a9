package ipmi

import (
	"context"

	"github.com/bougou/go-ipmi/pkg/types"

	"github.com/better-compute/better-compute/bmc"
)

// Inspect reads what IPMI can tell: the BMC's firmware revision (Get Device
// ID), the system GUID as the product UUID (Get System GUID) and FRU 0's
// manufacturer, model and serial. IPMI reports no NIC MACs, processors or
// memory: the ramdisk's inventory does. A BMC without a system GUID or FRU
// data leaves those fields empty, and so does FRU data that does not decode
// (logged); a failed exchange fails the inspection. It changes nothing.
func (d *Driver) Inspect(ctx context.Context) (bmc.Inventory, error) {
	const op = "inspect"
	s, ctx, err := d.open(ctx, op, d.timeout)
	if err != nil {
		return bmc.Inventory{}, err
	}
	defer s.close()
	var inv bmc.Inventory
	id, err := s.c.GetDeviceID(ctx)
	if err != nil {
		return bmc.Inventory{}, d.fail(op, err)
	}
	inv.BMCFirmware = firmwareVersion(id.MajorFirmwareRevision, id.MinorFirmwareRevision)
	if inv.ProductUUID, err = d.guid(ctx, s, op); err != nil {
		return bmc.Inventory{}, err
	}
	fru, err := d.fru(ctx, s, op)
	if err != nil {
		return bmc.Inventory{}, err
	}
	inv.Manufacturer, inv.Model, inv.Serial = fru.Manufacturer, fru.Model, fru.Serial
	return inv, nil
}

// guid reads the system GUID; "" when the BMC has none.
func (d *Driver) guid(ctx context.Context, s *session, op string) (string, error) {
	res, err := s.c.GetSystemGUID(ctx)
	if absent(err) {
		d.log.Info("ipmi: the BMC reports no system GUID", "err", err)
		return "", nil
	}
	if err != nil {
		return "", d.fail(op, err)
	}
	u, err := productUUID(res.GUID[:])
	if err != nil {
		return "", d.fail(op, err)
	}
	return u, nil
}

// fru reads and decodes FRU device 0; empty when there is none or it does
// not decode.
func (d *Driver) fru(ctx context.Context, s *session, op string) (fruInfo, error) {
	raw, err := s.c.GetFRUData(ctx, 0)
	if absent(err) {
		d.log.Info("ipmi: the BMC reports no FRU 0", "err", err)
		return fruInfo{}, nil
	}
	if err != nil {
		return fruInfo{}, d.fail(op, err)
	}
	info, err := decodeFRU(raw)
	if err != nil {
		d.log.Warn("ipmi: FRU 0 does not decode; the inventory has no serial or model from it", "err", err)
		return fruInfo{}, nil
	}
	return info, nil
}

// absent reports a command the BMC answered with "not supported" or "not
// present" rather than failing to answer.
func absent(err error) bool {
	cc, ok := completionCode(err)
	if !ok {
		return false
	}
	switch cc {
	case types.CodeInvalidCommand, types.CodeRequestedDataNotPresent, types.CodeNotSupported,
		types.CodeRequestDataFieldInvalid, types.CodeParameterOutOfRange:
		return true
	}
	return false
}
