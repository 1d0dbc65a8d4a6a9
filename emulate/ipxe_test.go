package emulate

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseScript(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		in      string
		want    script
		wantErr bool
	}{
		{"ramdisk", "#!ipxe\nkernel http://10.0.0.1:8080/ramdisk/vmlinuz initrd=initrd.img bc.site=https://10.0.0.1:8443 console=ttyS0\ninitrd http://10.0.0.1:8080/ramdisk/initrd.img\nboot\n",
			script{Kernel: "http://10.0.0.1:8080/ramdisk/vmlinuz", Cmdline: "initrd=initrd.img bc.site=https://10.0.0.1:8443 console=ttyS0", Initrd: "http://10.0.0.1:8080/ramdisk/initrd.img"}, false},
		{"exit", "#!ipxe\nexit\n", script{}, false},
		{"comments and options", "#!ipxe\r\n# kernel http://no/\r\nkernel --name vmlinuz http://b/k a=1\r\n", script{Kernel: "http://b/k", Cmdline: "a=1"}, false},
		{"not ipxe", "<html>", script{}, true},
		{"empty", "", script{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseScript(tt.in)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parseScript(%q) = %v, want error %v", tt.in, err, tt.wantErr)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("parseScript(%q) mismatch (-want +got):\n%s", tt.in, d)
			}
		})
	}
	if got := (script{Kernel: "http://10.0.0.1:8080/ramdisk/vmlinuz"}).bootURL(); got != "http://10.0.0.1:8080" {
		t.Errorf("bootURL() = %q, want http://10.0.0.1:8080", got)
	}
}
