package disk

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/better-compute/better-compute/errs"
)

func TestNameFor(t *testing.T) {
	t.Parallel()
	tests := []struct{ wwn, serial, want string }{
		{"0x5000C500A1B2C3D4", "S1", "wwn-0x5000c500a1b2c3d4"},
		{"", "WD-WX31A", "serial-WD-WX31A"},
		{"  ", " Z1 2/3 ", "serial-Z1_2_3"},
		{"eui.0025388b71b2c3d4", "", "wwn-eui.0025388b71b2c3d4"},
		{"", "", ""},
	}
	for _, tt := range tests {
		if got := NameFor(tt.wwn, tt.serial); got != tt.want {
			t.Errorf("NameFor(%q, %q) = %q, want %q", tt.wwn, tt.serial, got, tt.want)
		}
	}
}

func TestParseMode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    Mode
		wantErr bool
	}{
		{"quick", Quick, false},
		{"secure-erase", SecureErase, false},
		{"crypto-erase", CryptoErase, false},
		{"none", "", true},
		{"", "", true},
		{"Quick", "", true},
		{"secure_erase", "", true},
	}
	for _, tt := range tests {
		got, err := ParseMode(tt.in)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ParseMode(%q) = %q, %v; want %q, error %t", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !errs.Is(err, errs.InvalidInput) {
			t.Errorf("ParseMode(%q) error kind = %q, want INVALID_INPUT", tt.in, errs.KindOf(err))
		}
	}
}

func FuzzParseMode(f *testing.F) {
	for _, s := range []string{"quick", "secure-erase", "crypto-erase", "none", "", "quick\x00", "QUICK", " quick"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		m, err := ParseMode(s)
		if err == nil && string(m) != s {
			t.Fatalf("ParseMode(%q) = %q, want the input back", s, m)
		}
		if err == nil && m != Quick && m != SecureErase && m != CryptoErase {
			t.Fatalf("ParseMode(%q) = %q, not a known mode", s, m)
		}
		if err != nil && !errs.Is(err, errs.InvalidInput) {
			t.Fatalf("ParseMode(%q) error = %v, want INVALID_INPUT", s, err)
		}
	})
}

func TestCreateFakeDisk(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	d := Disk{WWN: "0x5000c500a1b2c3d4", Model: "FAKE", SizeBytes: 1 << 40, SupportsCryptoErase: true}
	if err := CreateFakeDisk(dir, d); err != nil {
		t.Fatalf("CreateFakeDisk() = %v", err)
	}
	if err := CreateFakeDisk(dir, d); !errs.Is(err, errs.AlreadyExists) {
		t.Errorf("CreateFakeDisk() again = %v, want ALREADY_EXISTS", err)
	}
	img := filepath.Join(dir, "wwn-0x5000c500a1b2c3d4.img")
	st, err := os.Stat(img)
	if err != nil || st.Size() != 1<<40 {
		t.Fatalf("stat(%s) = %v, %v; want a 1 TiB file", img, st, err)
	}
	if alloc, _ := allocatedBytes(img); alloc != 0 {
		t.Errorf("allocated bytes of a new fake disk = %d, want 0 (sparse)", alloc)
	}
	if k, err := FakeKey(Disk{Path: img}); err != nil || len(k) != 64 {
		t.Errorf("FakeKey() = %q, %v; want a 32-byte hex key", k, err)
	}
	for _, bad := range []Disk{{SizeBytes: 512}, {Serial: "S", SizeBytes: 100}, {Serial: "S", Name: "other", SizeBytes: 512}} {
		if err := CreateFakeDisk(dir, bad); !errs.Is(err, errs.InvalidInput) {
			t.Errorf("CreateFakeDisk(%+v) = %v, want INVALID_INPUT", bad, err)
		}
	}
}

// newFakeDisk creates a fake disk of size in a temp dir and returns it as
// Enumerate would. A filesystem that cannot hold size (ext4 stops 4 KiB short
// of 16 TiB) gets the largest MiB-aligned size below it instead.
func newFakeDisk(t testing.TB, d Disk) Disk {
	t.Helper()
	dir := t.TempDir()
	want := d.SizeBytes
	for {
		err := CreateFakeDisk(dir, d)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EFBIG) || d.SizeBytes < 2<<20 {
			t.Fatalf("CreateFakeDisk(%d bytes) = %v", d.SizeBytes, err)
		}
		d.SizeBytes -= 1 << 20
		os.Remove(filepath.Join(dir, NameFor(d.WWN, d.Serial)+fakeExt))
	}
	if d.SizeBytes != want {
		t.Logf("filesystem limit: fake disk is %d bytes, not %d", d.SizeBytes, want)
	}
	img := filepath.Join(dir, NameFor(d.WWN, d.Serial)+fakeExt)
	sc, err := readSidecar(img)
	if err != nil {
		t.Fatal(err)
	}
	return fakeDiskFromSidecar(img, d.SizeBytes, sc)
}
