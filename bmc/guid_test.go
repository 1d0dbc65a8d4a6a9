package bmc

import (
	"strings"
	"testing"

	"github.com/better-compute/better-compute/errs"
)

func TestSwapUUID(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ in, want string }{
		{"4c4c4544-0042-3410-8057-b4c04f4d3332", "44454c4c-4200-1034-8057-b4c04f4d3332"}, // a Dell's, dmidecode vs IPMI GUID
		{"00112233-4455-6677-8899-AABBCCDDEEFF", "33221100-5544-7766-8899-aabbccddeeff"},
		{"33221100-5544-7766-8899-aabbccddeeff", "00112233-4455-6677-8899-aabbccddeeff"},
	} {
		got, err := SwapUUID(tt.in)
		if got != tt.want || err != nil {
			t.Errorf("SwapUUID(%q) = %q, %v, want %q", tt.in, got, err, tt.want)
		}
		if back, _ := SwapUUID(got); back != strings.ToLower(tt.in) {
			t.Errorf("SwapUUID(SwapUUID(%q)) = %q, want it back in lowercase", tt.in, back)
		}
	}
	for _, in := range []string{"", "4c4c4544004234108057b4c04f4d3332", "4c4c4544-0042-3410-8057-b4c04f4d333", "4c4c454-40042-3410-8057-b4c04f4d3332",
		"4c4c4544-0042-3410-8057-b4c04f4d333g", "4c4c4544-0042-3410-8057-b4c04f4d3332-", "not-a-uuid"} {
		got, err := SwapUUID(in)
		if e, ok := err.(*errs.Error); !ok || e.Kind != errs.InvalidInput || e.Field != "productUuid" || got != "" {
			t.Errorf("SwapUUID(%q) = %q, %v, want INVALID_INPUT productUuid", in, got, err)
		}
	}
}
