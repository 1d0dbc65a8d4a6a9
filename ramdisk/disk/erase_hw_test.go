package disk

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/errs"
)

// noTools is a runner on a ramdisk without hdparm and nvme.
type noTools struct{}

func (noTools) Run(_ context.Context, name string, _ ...string) ([]byte, error) {
	return nil, errs.New(errs.Unsupported, "%s is not installed", name)
}

// recordingRunner records commands and answers with out / err.
type recordingRunner struct {
	calls [][]string
	err   error
}

func (r *recordingRunner) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	r.calls = append(r.calls, append([]string{name}, args...))
	return nil, r.err
}

func TestHwEraseCommands(t *testing.T) {
	t.Parallel()
	nvme := Disk{Name: "wwn-eui.1", Path: "/dev/nvme0n1", SupportsSecureErase: true, SupportsCryptoErase: true}
	ata := Disk{Name: "wwn-0x5", Path: "/dev/sda", SupportsSecureErase: true}
	tests := []struct {
		name      string
		d         Disk
		mode      Mode
		wantCalls []string // commands with the one-time password replaced by PASS
		wantKind  errs.Kind
	}{
		{"nvme secure", nvme, SecureErase, []string{"nvme format /dev/nvme0n1 --ses=1 --force"}, ""},
		{"nvme crypto", nvme, CryptoErase, []string{"nvme format /dev/nvme0n1 --ses=2 --force"}, ""},
		{"ata secure", ata, SecureErase, []string{
			"hdparm --user-master u --security-set-pass PASS /dev/sda",
			"hdparm --user-master u --security-erase PASS /dev/sda"}, ""},
		{"ata crypto", ata, CryptoErase, nil, errs.Unsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := &recordingRunner{}
			err := hwErase(context.Background(), r, tt.d, tt.mode)
			if k := errs.KindOf(err); k != tt.wantKind {
				t.Fatalf("hwErase(%s, %s) = %v, want kind %q", tt.d.Path, tt.mode, err, tt.wantKind)
			}
			var got []string
			for _, c := range r.calls {
				if len(c) > 5 && strings.HasPrefix(c[3], "--security") {
					c[4] = "PASS"
				}
				got = append(got, strings.Join(c, " "))
			}
			if diff := cmp.Diff(tt.wantCalls, got); diff != "" {
				t.Errorf("hwErase(%s, %s) commands (-want +got):\n%s", tt.d.Path, tt.mode, diff)
			}
		})
	}
}

func TestHwEraseFailures(t *testing.T) {
	t.Parallel()
	d := Disk{Name: "wwn-eui.1", Path: "/dev/nvme0n1", SupportsSecureErase: true}
	if err := hwErase(context.Background(), noTools{}, d, SecureErase); !errs.Is(err, errs.Unsupported) || !strings.Contains(err.Error(), d.Name) {
		t.Errorf("hwErase(no nvme tool) = %v, want UNSUPPORTED naming the disk", err)
	}
	r := &recordingRunner{err: errs.New(errs.DriverError, "format failed")}
	if err := hwErase(context.Background(), r, d, SecureErase); !errs.Is(err, errs.DriverError) {
		t.Errorf("hwErase(failing nvme) = %v, want DRIVER_ERROR", err)
	}
}

func TestParseNVMeIDCtrl(t *testing.T) {
	t.Parallel()
	tests := []struct {
		out                    string
		wantSecure, wantCrypto bool
	}{
		{`{"vid":5197,"oacs":95,"fna":4}`, true, true}, // format + crypto erase
		{`{"oacs":2,"fna":0}`, true, false},
		{`{"oacs":4,"fna":4}`, false, false}, // no format support
		{`not json`, false, false},
	}
	for _, tt := range tests {
		s, c := parseNVMeIDCtrl([]byte(tt.out))
		if s != tt.wantSecure || c != tt.wantCrypto {
			t.Errorf("parseNVMeIDCtrl(%s) = %t, %t; want %t, %t", tt.out, s, c, tt.wantSecure, tt.wantCrypto)
		}
	}
}

func TestParseHdparmSecurity(t *testing.T) {
	t.Parallel()
	const head = "/dev/sda:\n\nATA device, with non-removable media\n\tModel Number:       ST16000NM001G\nSecurity: \n\tMaster password revision code = 65534\n"
	tests := []struct {
		name, out string
		want      bool
	}{
		{"supported, not frozen", head + "\t\tsupported\n\tnot\tenabled\n\tnot\tlocked\n\tnot\tfrozen\n\tnot\texpired: security count\n\t\tsupported: enhanced erase\nLogical Unit WWN Device Identifier: 5000c500a1b2c3d4\n", true},
		{"frozen", head + "\t\tsupported\n\tnot\tenabled\n\tnot\tlocked\n\t\tfrozen\n", false},
		{"not supported", head + "\tnot\tsupported\n\tnot\tfrozen\n", false},
		{"no security section", "/dev/sda:\n\tModel Number: X\n", false},
	}
	for _, tt := range tests {
		if got := parseHdparmSecurity([]byte(tt.out)); got != tt.want {
			t.Errorf("parseHdparmSecurity(%s) = %t, want %t", tt.name, got, tt.want)
		}
	}
}
