package ipmi

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/types"
	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/bmc/ipmi/ipmisim"
	"github.com/better-compute/better-compute/errs"
)

func TestProductUUID(t *testing.T) {
	t.Parallel()
	sim, _ := hex.DecodeString(simGUID)
	tests := []struct {
		raw  []byte
		want string
		kind errs.Kind
	}{
		{sim, simUUID, ""},
		{[]byte{0x33, 0x22, 0x11, 0x00, 0x55, 0x44, 0x77, 0x66, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd, 0xee, 0xff}, "00112233-4455-6677-8899-aabbccddeeff", ""},
		{make([]byte, 16), "", ""},                   // unset
		{[]byte(strings.Repeat("\xff", 16)), "", ""}, // unset
		{sim[:15], "", errs.InvalidInput},            // short answer
		{append(sim, 0), "", errs.InvalidInput},      // long answer
	}
	for _, tt := range tests {
		got, err := productUUID(tt.raw)
		if got != tt.want || errs.KindOf(err) != tt.kind {
			t.Errorf("productUUID(%x) = %q, %v, want %q, kind %q", tt.raw, got, err, tt.want, tt.kind)
		}
	}
}

func TestFirmwareVersion(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		major, minor uint8
		want         string
	}{{2, 15, "2.15"}, {1, 5, "1.05"}, {0x81, 0, "1.00"}} { // bit 7 of the major is "device available"
		if got := firmwareVersion(tt.major, tt.minor); got != tt.want {
			t.Errorf("firmwareVersion(%d, %d) = %q, want %q", tt.major, tt.minor, got, tt.want)
		}
	}
}

// fruWith builds FRU data with the given areas (nil: absent), placed one
// after the other behind the common header.
func fruWith(chassis, board, product []byte) []byte {
	h := &types.FRUCommonHeader{FormatVersion: types.FRUFormatVersion}
	out := make([]byte, 8)
	for _, a := range []struct {
		data []byte
		off  *uint8
	}{{chassis, &h.ChassisOffset8B}, {board, &h.BoardOffset8B}, {product, &h.ProductOffset8B}} {
		if a.data != nil {
			*a.off = uint8(len(out) / 8)
			out = append(out, a.data...)
		}
	}
	hdr := h.Pack()
	var sum byte
	for _, b := range hdr[:7] {
		sum += b
	}
	hdr[7] = -sum
	copy(out, hdr)
	return out
}

func ascii(s string) (types.TypeLength, []byte) { return types.TypeLength(0xc0 | len(s)), []byte(s) }

func TestDecodeFRU(t *testing.T) {
	t.Parallel()
	board := &types.FRUBoardInfoArea{}
	board.ManufacturerTypeLength, board.Manufacturer = ascii("Board Inc")
	board.ProductNameTypeLength, board.ProductName = ascii("X11DPi")
	board.SerialNumberTypeLength, board.SerialNumber = ascii("BSN-1")
	chassis := &types.FRUChassisInfoArea{ChassisType: 0x17}
	chassis.SerialNumberTypeLength, chassis.SerialNumber = ascii("CSN-9")
	noSerial := &types.FRUProductInfoArea{}
	noSerial.ManufacturerTypeLength, noSerial.Manufacturer = ascii("ACME")
	noSerial.NameTypeLength, noSerial.Name = ascii(" Box 1 \x01")
	binary := &types.FRUProductInfoArea{NameTypeLength: types.TypeLength(0x04), Name: []byte{0xde, 0xad, 0xbe, 0xef}}
	product := ipmisim.FRU("ACME Co", "R640-EMU", "SN12345")[8:]
	badSum := ipmisim.FRU("A", "B", "C")
	badSum[7]++
	tests := []struct {
		name string
		raw  []byte
		want fruInfo
		kind errs.Kind
	}{
		{"product", fruWith(nil, nil, product), fruInfo{"ACME Co", "R640-EMU", "SN12345"}, ""},
		{"product over board", fruWith(nil, board.Pack(), product), fruInfo{"ACME Co", "R640-EMU", "SN12345"}, ""},
		{"board only", fruWith(nil, board.Pack(), nil), fruInfo{"Board Inc", "X11DPi", "BSN-1"}, ""},
		{"chassis serial", fruWith(chassis.Pack(), board.Pack(), noSerial.Pack()), fruInfo{"ACME", "Box 1", "CSN-9"}, ""},
		{"binary name", fruWith(nil, nil, binary.Pack()), fruInfo{}, ""},
		{"header only", fruWith(nil, nil, nil), fruInfo{}, ""},
		{"bad checksum", badSum, fruInfo{}, errs.InvalidInput},
		{"short", []byte{1, 0, 0}, fruInfo{}, errs.InvalidInput},
		{"area past the end", fruWith(nil, nil, product)[:20], fruInfo{}, errs.InvalidInput},
		{"version 2", append([]byte{2, 0, 0, 0, 0, 0, 0, 0xfe}, product...), fruInfo{}, errs.InvalidInput},
		{"go-ipmi panics", []byte(goIPMIPanics), fruInfo{}, errs.InvalidInput},
	}
	for _, tt := range tests {
		got, err := decodeFRU(tt.raw)
		if errs.KindOf(err) != tt.kind {
			t.Errorf("decodeFRU(%s) error = %v, want kind %q", tt.name, err, tt.kind)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("decodeFRU(%s) (-want +got):\n%s", tt.name, diff)
		}
	}
}

// TestBootFlags spells out the boot flags parameter (IPMI 2.0 table 28-14):
// byte 1 bit 7 valid, bit 6 persistent, bit 5 EFI; byte 2 bits 5:2 device.
func TestBootFlags(t *testing.T) {
	t.Parallel()
	tests := []struct {
		sel        types.BootDeviceSelector
		persistent bool
		efi        bool
		want       []byte
	}{
		{types.BootDeviceSelectorForcePXE, false, true, []byte{0xa0, 0x04, 0, 0, 0}},
		{types.BootDeviceSelectorForceHardDrive, true, true, []byte{0xe0, 0x08, 0, 0, 0}},
		{types.BootDeviceSelectorForceCDROM, false, false, []byte{0x80, 0x14, 0, 0, 0}},
		{types.BootDeviceSelectorForceBIOSSetup, true, false, []byte{0xc0, 0x18, 0, 0, 0}},
	}
	for _, tt := range tests {
		if got := bootFlags(tt.sel, tt.persistent, tt.efi).Pack(); !cmp.Equal(got, tt.want) {
			t.Errorf("bootFlags(%s, persistent %t, efi %t) = % x, want % x", tt.sel, tt.persistent, tt.efi, got, tt.want)
		}
	}
}

// TestClassifyGoIPMIErrors pins how go-ipmi v0.9.1's errors read, as
// Connect and the lan interface build them, to our kinds.
func TestClassifyGoIPMIErrors(t *testing.T) {
	t.Parallel()
	connect := func(cause error) error { // Connect20 joins each suite's failure with %v
		return fmt.Errorf("connect20 failed after try all cipher suite ids ([3]), errs: \n%v",
			errors.Join(fmt.Errorf("cmd: rakp1 failed with cipher suite id (3), err: %w", cause)))
	}
	const busy, unreachable = bmc.ReasonBusy, bmc.ReasonUnreachable
	tests := []struct {
		err    error
		kind   errs.Kind
		says   string
		reason string // what the site's BMC gate acts on
	}{
		{connect(fmt.Errorf("RAKP2 authentication code mismatch: %w", client.ErrRAKPAuthentication)), errs.Unauthenticated, "password does not match", ""},
		{connect(types.NewRmcpStatusError(types.RmcpStatusCodeUnauthorizedName)), errs.Unauthenticated, "no such user", ""},
		{connect(types.NewRmcpStatusError(types.RmcpStatusCodeInvalidIntegrityCheckValue)), errs.Unauthenticated, "password does not match", ""},
		{connect(types.NewRmcpStatusError(types.RmcpStatusCodeUnauthorizedRoleOfPriLevel)), errs.PermissionDenied, "administrator", ""},
		{connect(types.NewRmcpStatusError(types.RmcpStatusCodeNoCipherSuiteMatch)), errs.Unsupported, "cipher suite", ""},
		{connect(types.NewRmcpStatusError(types.RmcpStatusCodeNoResToCreateSess)), errs.DriverError, "no free session", busy},
		{connect(types.NewRmcpStatusError(types.RmcpStatusCodeNoResToCreateSessAtRole)), errs.DriverError, "no free session", busy},
		{fmt.Errorf("IPMI LAN: no matching IPMI response before UDP read deadline after 3 attempt(s): %w", errors.New("x")), errs.DriverError, "did not answer in time", unreachable},
		{fmt.Errorf("udp: %w", context.DeadlineExceeded), errs.DriverError, "did not answer in time", unreachable},
		{fmt.Errorf("udp: %w", syscall.ECONNREFUSED), errs.DriverError, "cannot reach", unreachable},
		{fmt.Errorf("cmd failed: %w", types.NewResponseError(types.CodeInsufficientPrivilege, "")), errs.PermissionDenied, "privilege", ""},
		{fmt.Errorf("cmd failed: %w", types.NewResponseError(types.CodeNodeBusy, "")), errs.DriverError, "0xc0", busy},
		{fmt.Errorf("cmd failed: %w", types.NewResponseError(types.CodeCannotProvideResponseBMCInitialize, "")), errs.DriverError, "0xd2", busy},
		{fmt.Errorf("cmd failed: %w", types.NewResponseError(types.CodeOutOfSpace, "")), errs.DriverError, "0xc4", ""},
		{errors.New("something else"), errs.DriverError, "cannot use", ""},
	}
	oneLine := regexp.MustCompile(`^[^\n]*$`)
	for _, tt := range tests {
		e := classify("bmc-1:623", "ops", flat{tt.err})
		if e.Kind != tt.kind || !strings.Contains(e.Error(), tt.says) || !strings.Contains(e.Error(), "bmc-1:623") || !oneLine.MatchString(e.Error()) {
			t.Errorf("classify(%q) = %s, want %s saying %q and naming the BMC, on one line", tt.err, e, tt.kind, tt.says)
		}
		if e.Reason != tt.reason {
			t.Errorf("classify(%q).Reason = %q, want %q", tt.err, e.Reason, tt.reason)
		}
	}
}

// goIPMIPanics is a chassis area that makes go-ipmi v0.9.1's Unpack slice
// past its end (found by FuzzDecodeFRU): a BMC sending it must not crash the
// site agent.
const goIPMIPanics = "\x01\x00\x01\x00\x00\x000\xfe0\x010\x00A0A0"

// FuzzDecodeFRU: any FRU data decodes to printable fields or is refused
// with INVALID_INPUT, without a panic.
func FuzzDecodeFRU(f *testing.F) {
	f.Add([]byte(goIPMIPanics))
	f.Add(ipmisim.FRU("ACME Co", "R640-EMU", "SN12345"))
	f.Add(fruWith([]byte{1, 1, 0x17, 0xc1, 0, 0, 0, 0x26}, nil, nil))
	f.Add([]byte{1, 0, 0, 0, 1, 0, 0, 0xfe, 1, 0, 0})       // product area of length 0
	f.Add([]byte{1, 0, 0, 0, 1, 0, 0, 0xfe, 1, 1, 0, 0xff}) // field running past its area
	f.Add([]byte{1, 0, 0, 1, 0, 0, 0, 0xfe, 1, 1})          // board area cut short
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := decodeFRU(raw)
		if err != nil {
			if !errs.Is(err, errs.InvalidInput) {
				t.Fatalf("decodeFRU(% x) = %v, want INVALID_INPUT", raw, err)
			}
			return
		}
		for _, s := range []string{got.Manufacturer, got.Model, got.Serial} {
			if strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f || r == 0xfffd }) || s != strings.TrimSpace(s) {
				t.Fatalf("decodeFRU(% x) = %+v, holds control characters or padding", raw, got)
			}
		}
	})
}

// FuzzProductUUID: any GUID answer gives a canonical lowercase UUID, "" or
// INVALID_INPUT.
func FuzzProductUUID(f *testing.F) {
	sim, _ := hex.DecodeString(simGUID)
	f.Add(sim)
	f.Add(make([]byte, 16))
	f.Add([]byte{1})
	canonical := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	f.Fuzz(func(t *testing.T, raw []byte) {
		got, err := productUUID(raw)
		switch {
		case err != nil && !errs.Is(err, errs.InvalidInput):
			t.Fatalf("productUUID(% x) = %v, want INVALID_INPUT", raw, err)
		case err == nil && got != "" && !canonical.MatchString(got):
			t.Fatalf("productUUID(% x) = %q, not a canonical UUID", raw, got)
		case err == nil && len(raw) != 16:
			t.Fatalf("productUUID(% x) = %q, want a refusal of %d bytes", raw, got, len(raw))
		}
	})
}
