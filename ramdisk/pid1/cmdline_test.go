package pid1

import (
	"strings"
	"testing"
)

func TestBootMAC(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ cmdline, want, err string }{
		{"initrd=initrd.img bc.node=node_x BOOTIF=01-52-54-00-12-34-56 console=ttyS0", "52:54:00:12:34:56", ""},
		{"BOOTIF=01-52-54-00-AB-CD-EF", "52:54:00:ab:cd:ef", ""},
		{"console=ttyS0 bc.site=https://10.0.0.1:8443", "", ""},
		{"BOOTIF=52-54-00-12-34-56", "", "is not 01-"},
		{"BOOTIF=01-52-54-00-12-34", "", "is not 01-"},
		{"BOOTIF=01-${netX/mac:hexhyp}", "", "is not 01-"},
		{"BOOTIF=01-00-00-00-00-00-00-00-00-00-00-00-00-00-00-00-00-00-00-00-00", "", "is not 01-"},
		{"BOOTIF=01-52-54-00-12-34-56 BOOTIF=01-52-54-00-12-34-57", "", "twice"},
	} {
		mac, err := BootMAC(tt.cmdline)
		got := ""
		if mac != nil {
			got = mac.String()
		}
		if got != tt.want || (tt.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tt.err)) {
			t.Errorf("BootMAC(%q) = %q, %v; want %q, an error containing %q", tt.cmdline, got, err, tt.want, tt.err)
		}
	}
}
