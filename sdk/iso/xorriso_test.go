package iso_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/internal/testenv"
	"github.com/better-compute/better-compute/sdk/iso"
)

// xorriso is the real peer: libisofs, which reads and writes ISO 9660 for
// most Linux distributions' image tools.
func xorriso(t *testing.T, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("xorriso"); err != nil {
		testenv.Missing(t, "xorriso", "apt-get install xorriso (./run installs it)")
	}
	out, err := exec.Command("xorriso", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("xorriso %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestXorrisoReadsWrite: xorriso loads our image, sees its volume id, and
// extracts every file with its content.
func TestXorrisoReadsWrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string][]byte{
		"user-data": cidata["user-data"],
		"meta-data": cidata["meta-data"],
		"big.bin":   bytes.Repeat([]byte("0123456789"), 1000),
		"empty":     {},
	}
	img := filepath.Join(dir, "cidata.iso")
	if err := os.WriteFile(img, write(t, "cidata", files), 0o600); err != nil {
		t.Fatal(err)
	}
	if out := xorriso(t, "-indev", img, "-pvd_info"); !strings.Contains(out, "Volume Id    : cidata\n") {
		t.Errorf("xorriso -pvd_info = %s, want Volume Id cidata", out)
	}
	out := filepath.Join(dir, "out")
	xorriso(t, "-osirrox", "on", "-indev", img, "-extract", "/", out)
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(out, strings.ToUpper(name)))
		if err != nil {
			t.Errorf("xorriso -extract: %v, want %s", err, strings.ToUpper(name))
			continue
		}
		if !bytes.Equal(got, want) {
			t.Errorf("xorriso -extract %s = %d bytes, want %d", name, len(got), len(want))
		}
	}
	entries, _ := os.ReadDir(out)
	if len(entries) != len(files) {
		t.Errorf("xorriso -extract made %d files, want %d", len(entries), len(files))
	}
}

// TestReadFileReadsXorriso: ReadFile reads an image xorriso wrote, by the
// files' Rock Ridge names.
func TestReadFileReadsXorriso(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	files := map[string][]byte{
		"user-data":           cidata["user-data"],
		"Meta.Data.With.Dots": []byte("dots"),
		"big":                 bytes.Repeat([]byte{7}, 5000),
	}
	args := []string{"-outdev", filepath.Join(dir, "x.iso"), "-volid", "cidata"}
	for name, data := range files {
		src := filepath.Join(dir, "src-"+name)
		if err := os.WriteFile(src, data, 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "-map", src, "/"+name)
	}
	xorriso(t, args...)
	img, err := os.ReadFile(filepath.Join(dir, "x.iso"))
	if err != nil {
		t.Fatal(err)
	}
	readAll(t, img, files)
	if _, err := iso.ReadFile(bytes.NewReader(img), "USER-DATA"); err == nil {
		t.Errorf("ReadFile(USER-DATA) of an image with Rock Ridge names = the file, want not found (the name is user-data)")
	}
}
