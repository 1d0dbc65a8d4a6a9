package ipmibmc

import "github.com/bougou/go-ipmi/pkg/types"

// FRU is FRU data with a product area (manufacturer, name, serial), as a
// server's FRU 0 has it.
func FRU(manufacturer, name, serial string) []byte {
	ascii := func(s string) (types.TypeLength, []byte) { return types.TypeLength(0xc0 | len(s)), []byte(s) }
	p := &types.FRUProductInfoArea{}
	p.ManufacturerTypeLength, p.Manufacturer = ascii(manufacturer)
	p.NameTypeLength, p.Name = ascii(name)
	p.SerialNumberTypeLength, p.SerialNumber = ascii(serial)
	h := (&types.FRUCommonHeader{FormatVersion: types.FRUFormatVersion, ProductOffset8B: 1}).Pack()
	var sum byte
	for _, b := range h[:7] {
		sum += b
	}
	h[7] = -sum
	return append(h, p.Pack()...)
}
