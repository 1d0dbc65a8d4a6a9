package bmc

import (
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/better-compute/better-compute/errs"
)

// SwapUUID converts a product UUID (SMBIOS system UUID, canonical
// 8-4-4-4-12 form, any case) between its two byte orders and returns it in
// lowercase: as written (dmidecode, Redfish, the API) and as SMBIOS and
// IPMI's Get System GUID carry it, the first three fields least
// significant byte first (firmwares also disagree on DHCP option 97's).
// It is its own inverse. Anything but a UUID is INVALID_INPUT.
func SwapUUID(u string) (string, error) {
	raw, err := hex.DecodeString(strings.ReplaceAll(u, "-", ""))
	if err != nil || len(raw) != 16 || !canonical(u) {
		return "", errs.Invalid("productUuid", "not a UUID: %q", u)
	}
	b := raw
	return fmt.Sprintf("%02x%02x%02x%02x-%02x%02x-%02x%02x-%x-%x",
		b[3], b[2], b[1], b[0], b[5], b[4], b[7], b[6], b[8:10], b[10:16]), nil
}

// canonical reports whether u has its dashes where a UUID has them.
func canonical(u string) bool {
	return len(u) == 36 && u[8] == '-' && u[13] == '-' && u[18] == '-' && u[23] == '-'
}
