package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSiteRefusesBadNetworkBoot: `bcd site` with a network-boot flag that
// cannot work stops at start, naming the flag, the thing and the fix,
// before it joins or listens (the control plane here does not exist).
func TestSiteRefusesBadNetworkBoot(t *testing.T) {
	dir := t.TempDir()
	bios, efi := filepath.Join(dir, "undionly.kpxe"), filepath.Join(dir, "snponly.efi")
	for _, f := range []string{bios, efi} {
		if err := os.WriteFile(f, []byte("ipxe"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	missing := filepath.Join(dir, "none", "undionly.kpxe")
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"--pxe-interface", "bcpx-nope0", "--ipxe-bios", bios, "--ipxe-efi", efi},
			[]string{"pxe-interface", `"bcpx-nope0" does not exist`}},
		{[]string{"--pxe-interface", "lo", "--ipxe-bios", missing, "--ipxe-efi", efi},
			[]string{"ipxe-bios", missing, "apt-get install ipxe"}},
		{[]string{"--pxe-interface", "lo", "--ipxe-bios", bios, "--ipxe-efi", missing},
			[]string{"ipxe-efi", "apt-get install ipxe"}},
	}
	for _, tt := range tests {
		args := append([]string{"bcd", "site", "--control-plane", "https://127.0.0.1:9", "--ca-file", filepath.Join(dir, "ca.crt"),
			"--data-dir", filepath.Join(dir, "data"), "--boot-listen", "127.0.0.1:0", "--relay-listen", "127.0.0.1:0"}, tt.args...)
		err := app().RunContext(t.Context(), args)
		for _, w := range tt.want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("bcd site %s = %v, want an error saying %q", strings.Join(tt.args, " "), err, w)
			}
		}
	}
}
