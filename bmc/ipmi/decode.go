package ipmi

import (
	"fmt"
	"strings"

	"github.com/bougou/go-ipmi/pkg/types"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
)

// productUUID decodes a Get System GUID answer to the machine's SMBIOS
// system UUID in lowercase canonical form: the BMC sends the bytes in SMBIOS
// order (the first three fields least significant byte first), as dmidecode
// and Redfish show them. A GUID the BMC leaves unset (all zeros or all
// ones) is "". Anything but 16 bytes is INVALID_INPUT.
func productUUID(raw []byte) (string, error) {
	if len(raw) != 16 {
		return "", errs.Invalid("guid", "a system GUID is 16 bytes, the BMC sent %d", len(raw))
	}
	zeros, ones := true, true
	for _, b := range raw {
		zeros, ones = zeros && b == 0, ones && b == 0xff
	}
	if zeros || ones {
		return "", nil
	}
	return bmc.SwapUUID(fmt.Sprintf("%x-%x-%x-%x-%x", raw[0:4], raw[4:6], raw[6:8], raw[8:10], raw[10:16]))
}

// firmwareVersion prints Get Device ID's firmware revision as ipmitool
// does: the major revision (7 bits), a dot, the minor in two digits (go-ipmi
// has decoded its BCD).
func firmwareVersion(major, minor uint8) string {
	return fmt.Sprintf("%d.%02d", major&0x7f, minor)
}

// fruInfo is what an inspection takes from FRU device 0.
type fruInfo struct {
	Manufacturer, Model, Serial string
}

// decodeFRU reads the product, board and chassis areas of FRU data (IPMI
// Platform Management FRU Information Storage Definition v1.0): the
// product's manufacturer, name and serial, else the board's, and the
// chassis serial when the product has none. A header that is not version
// 1 with a valid checksum, or an area that does not fit, is INVALID_INPUT.
func decodeFRU(raw []byte) (fruInfo, error) {
	h := &types.FRUCommonHeader{}
	if len(raw) < int(types.FRUCommonHeaderSize) || h.Unpack(raw) != nil || h.FormatVersion != types.FRUFormatVersion || !h.Valid() {
		return fruInfo{}, errs.Invalid("fru", "the FRU data has no valid common header (version 1, checksum)")
	}
	var info fruInfo
	var board types.FRUBoardInfoArea
	var product types.FRUProductInfoArea
	var chassis types.FRUChassisInfoArea
	if err := unpackArea(raw, h.ProductOffset8B, "product", &product); err != nil {
		return fruInfo{}, err
	}
	if err := unpackArea(raw, h.BoardOffset8B, "board", &board); err != nil {
		return fruInfo{}, err
	}
	if err := unpackArea(raw, h.ChassisOffset8B, "chassis", &chassis); err != nil {
		return fruInfo{}, err
	}
	info.Manufacturer = first(field(product.ManufacturerTypeLength, product.Manufacturer), field(board.ManufacturerTypeLength, board.Manufacturer))
	info.Model = first(field(product.NameTypeLength, product.Name), field(board.ProductNameTypeLength, board.ProductName))
	info.Serial = first(field(product.SerialNumberTypeLength, product.SerialNumber),
		field(chassis.SerialNumberTypeLength, chassis.SerialNumber), field(board.SerialNumberTypeLength, board.SerialNumber))
	return info, nil
}

// area is a FRU info area go-ipmi decodes.
type area interface{ Unpack(msg []byte) error }

// unpackArea decodes the area at offset (in 8-byte units; 0 means absent)
// into a, after checking that its length byte keeps it inside raw. go-ipmi
// trusts its input, so a panic while decoding is caught and refused too.
func unpackArea(raw []byte, offset uint8, name string, a area) (err error) {
	if offset == 0 {
		return nil
	}
	start := int(offset) * 8
	if start+3 > len(raw) || raw[start+1] == 0 || start+int(raw[start+1])*8 > len(raw) {
		return errs.Invalid("fru", "the FRU %s area at byte %d does not fit in the %d bytes of FRU data", name, start, len(raw))
	}
	body := raw[start : start+int(raw[start+1])*8]
	defer func() {
		if r := recover(); r != nil {
			err = errs.Invalid("fru", "the FRU %s area at byte %d is malformed", name, start)
		}
	}()
	if err := a.Unpack(body); err != nil {
		return errs.Invalid("fru", "the FRU %s area at byte %d is malformed: %v", name, start, err)
	}
	return nil
}

// field decodes a FRU type/length field to printable text: control
// characters and padding are dropped, and binary fields are not text.
func field(tl types.TypeLength, data []byte) string {
	if len(data) == 0 || tl.TypeCode() == 0 { // binary or unspecified
		return ""
	}
	s := types.FRUFieldString(tl, data)
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == 0xfffd {
			return -1
		}
		return r
	}, s)
	return strings.TrimSpace(s)
}

func first(ss ...string) string {
	for _, s := range ss {
		if s != "" {
			return s
		}
	}
	return ""
}
