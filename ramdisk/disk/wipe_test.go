package disk

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/errs"
)

const tib = int64(1) << 40

// scribble writes 1 MiB of nonzero bytes at each offset (clamped to the disk).
func scribble(t testing.TB, d Disk, offs ...int64) {
	t.Helper()
	f, err := os.OpenFile(d.Path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, 1<<20)
	for i := range b {
		b[i] = byte(i%251 + 1)
	}
	for _, off := range offs {
		if _, err := f.WriteAt(b, min(off, d.SizeBytes-int64(len(b)))); err != nil {
			t.Fatal(err)
		}
	}
}

func TestWipeQuick16TiB(t *testing.T) {
	t.Parallel()
	d := newFakeDisk(t, Disk{WWN: "0x5000c500a1b2c3d4", SizeBytes: 16 * tib})
	scribble(t, d, 0, 8*tib+12345*4096, d.SizeBytes) // head, middle, tail
	var last Progress
	res, err := Wipe(context.Background(), d, Quick, func(p Progress) { last = p })
	if err != nil {
		t.Fatalf("Wipe(quick) = %v", err)
	}
	if !res.Verified || res.BytesVerified != d.SizeBytes || res.Failure != "" {
		t.Errorf("Wipe(quick) = verified %t, %d bytes verified, failure %q; want verified, %d bytes",
			res.Verified, res.BytesVerified, res.Failure, d.SizeBytes)
	}
	if alloc, _ := allocatedBytes(d.Path); alloc != 0 {
		t.Errorf("allocated bytes after quick wipe = %d, want 0", alloc)
	}
	if last.Phase != "erase" && last.Phase != "verify" {
		t.Errorf("last progress = %+v, want an erase or verify report", last)
	}
	t.Logf("quick wipe of %d bytes: %s in %v", d.SizeBytes, res.ZeroCheck, res.Finished.Sub(res.Started))
}

func TestWipeModesOnFakeDisks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		disk         Disk
		mode         Mode
		wantKind     errs.Kind
		wantKeyTurns bool
	}{
		{"quick", Disk{Serial: "Q1"}, Quick, "", false},
		{"secure-erase supported", Disk{Serial: "S1", SupportsSecureErase: true}, SecureErase, "", false},
		{"secure-erase unsupported", Disk{Serial: "S2"}, SecureErase, errs.Unsupported, false},
		{"crypto-erase supported", Disk{Serial: "C1", SupportsCryptoErase: true}, CryptoErase, "", true},
		{"crypto-erase unsupported", Disk{Serial: "C2", SupportsSecureErase: true}, CryptoErase, errs.Unsupported, false},
		{"bad mode", Disk{Serial: "B1"}, Mode("none"), errs.InvalidInput, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.disk.SizeBytes = 64 << 30
			d := newFakeDisk(t, tt.disk)
			scribble(t, d, 0, 5<<30, d.SizeBytes)
			keyBefore, _ := FakeKey(d)
			res, err := Wipe(context.Background(), d, tt.mode, nil)
			if k := errs.KindOf(err); k != tt.wantKind {
				t.Fatalf("Wipe(%s) error = %v (kind %q), want kind %q", tt.mode, err, k, tt.wantKind)
			}
			if err != nil {
				if tt.wantKind == errs.Unsupported && (!strings.Contains(err.Error(), d.Name) || !strings.Contains(err.Error(), string(tt.mode))) {
					t.Errorf("Wipe(%s) error = %v, want it to name disk %s and the mode", tt.mode, err, d.Name)
				}
				return
			}
			if !res.Verified || res.BytesVerified != d.SizeBytes || res.Mode != tt.mode || res.Disk != d.Name {
				t.Errorf("Wipe(%s) = %+v, want verified over %d bytes", tt.mode, res, d.SizeBytes)
			}
			keyAfter, _ := FakeKey(d)
			if turned := keyAfter != keyBefore; turned != tt.wantKeyTurns {
				t.Errorf("Wipe(%s) changed the media key = %t, want %t", tt.mode, turned, tt.wantKeyTurns)
			}
		})
	}
}

func TestWipeFaultsReportUnverified(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		fault       Fault
		mode        Mode
		wantFailure string
	}{
		{"nonzero block survives quick", Fault{LeaveNonzero: true, NonzeroAt: 3 << 30}, Quick, "nonzero byte at offset 3221225472"},
		{"nonzero block survives secure-erase", Fault{LeaveNonzero: true, NonzeroAt: 10 << 30}, SecureErase, "nonzero byte at offset 10737418240"},
		{"nonzero block past the end is clamped", Fault{LeaveNonzero: true, NonzeroAt: 1 << 62}, Quick, "nonzero byte at offset"},
		{"read-back error", Fault{ReadBackError: true}, Quick, "injected I/O error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := newFakeDisk(t, Disk{Serial: "F1", SizeBytes: 16 << 30, SupportsSecureErase: true})
			if err := InjectFault(d, tt.fault); err != nil {
				t.Fatal(err)
			}
			res, err := Wipe(context.Background(), d, tt.mode, nil)
			if err != nil {
				t.Fatalf("Wipe() = %v, want a result", err)
			}
			if res.Verified || !strings.Contains(res.Failure, tt.wantFailure) || res.BytesVerified >= d.SizeBytes {
				t.Errorf("Wipe() = verified %t, failure %q, %d bytes verified; want unverified with %q",
					res.Verified, res.Failure, res.BytesVerified, tt.wantFailure)
			}
			// cleared fault: the next wipe verifies again
			if err := InjectFault(d, Fault{}); err != nil {
				t.Fatal(err)
			}
			if res, err := Wipe(context.Background(), d, tt.mode, nil); err != nil || !res.Verified {
				t.Errorf("Wipe() after clearing the fault = %+v, %v; want verified", res, err)
			}
		})
	}
}

func TestWipeCancelled(t *testing.T) {
	t.Parallel()
	d := newFakeDisk(t, Disk{Serial: "X1", SizeBytes: 1 << 30})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Wipe(ctx, d, Quick, nil); err == nil {
		t.Error("Wipe(cancelled ctx) = nil error, want context.Canceled")
	}
}

func TestWipeMissingDisk(t *testing.T) {
	t.Parallel()
	_, err := Wipe(context.Background(), Disk{Name: "wwn-0x1", Path: t.TempDir() + "/gone.img"}, Quick, nil)
	if !errs.Is(err, errs.DriverError) {
		t.Errorf("Wipe(missing disk) = %v, want DRIVER_ERROR", err)
	}
}
