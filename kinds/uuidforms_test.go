package kinds

import (
	"slices"
	"testing"
)

func TestUUIDForms(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"4C4C4544-0042-3410-8057-B4C04F4D3332", []string{"4c4c4544-0042-3410-8057-b4c04f4d3332", "44454c4c-4200-1034-8057-b4c04f4d3332"}},
		{"node-7", []string{"node-7"}},
		{"4c4c4544-0042-3410-8057-b4c04f4d333", []string{"4c4c4544-0042-3410-8057-b4c04f4d333"}},
	} {
		if got := UUIDForms(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("UUIDForms(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
