package disk

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/sdk/iso"
)

func diskWith(t *testing.T, img []byte, size int64) Disk {
	t.Helper()
	p := filepath.Join(t.TempDir(), "d.img")
	if err := os.WriteFile(p, img, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, size); err != nil {
		t.Fatal(err)
	}
	return Disk{Name: "serial-SEED", Path: p, SizeBytes: size}
}

func seedISO(t *testing.T, userData string) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := iso.Write(&b, "cidata", map[string][]byte{"user-data": []byte(userData), "meta-data": []byte("instance-id: n\n")}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// TestWriteSeed: the seed lands in a cidata partition at the disk's end,
// the image's partition and bytes are untouched, both GPT headers are valid
// and cover the disk, and a second write replaces the first in place.
func TestWriteSeed(t *testing.T) {
	const size = 64 << 20
	img := GPTImage(8192, 2048, 6143) // a 4 MiB image, one partition
	d := diskWith(t, img, size)
	for _, userData := range []string{"#cloud-config\nhostname: a\n", "#cloud-config\nhostname: b\n"} {
		if err := WriteSeed(d, seedISO(t, userData)); err != nil {
			t.Fatalf("WriteSeed = %v, want nil", err)
		}
		b, err := ReadSeed(d)
		if err != nil {
			t.Fatalf("ReadSeed = %v", err)
		}
		if got, err := iso.ReadFile(bytes.NewReader(b), "user-data"); string(got) != userData {
			t.Errorf("user-data read back = %q, %v, want %q", got, err, userData)
		}
	}
	f, _ := os.Open(d.Path)
	defer f.Close()
	g, err := readGPT(&target{f: f, size: size}, d.Name)
	if err != nil {
		t.Fatalf("primary GPT after WriteSeed: %v", err)
	}
	le := binary.LittleEndian
	if alt, last := le.Uint64(g.hdr[32:]), le.Uint64(g.hdr[48:]); alt != size/512-1 || last != size/512-34 {
		t.Errorf("primary header alt, lastUsable = %d, %d, want %d, %d", alt, last, size/512-1, size/512-34)
	}
	if first, last := g.span(0); first != 2048 || last != 6143 || entryName(g.entry(0)) != "root" {
		t.Errorf("image partition = %s %d-%d, want root 2048-6143", entryName(g.entry(0)), first, last)
	}
	if i := g.named(SeedLabel); i != 1 {
		t.Errorf("cidata entries: first at %d, want one, at 1 (a rewrite reuses it)", i)
	}
	backup := make([]byte, 512)
	f.ReadAt(backup, size-512)
	if string(backup[:8]) != "EFI PART" || le.Uint32(backup[16:]) != headerCRC(backup[:92]) || le.Uint64(backup[72:]) != size/512-33 {
		t.Errorf("backup header at the disk's end is not a valid GPT header pointing at its entries")
	}
	got := make([]byte, 4096*512)
	f.ReadAt(got, 2048*512)
	if !bytes.Equal(got, img[2048*512:6144*512]) {
		t.Errorf("the image's partition changed")
	}
}

// TestWriteSeedRefuses: an image without a GPT, and a disk with no room
// after the image's partitions, are refused with nothing written.
func TestWriteSeedRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		img  []byte
		size int64
		kind errs.Kind
	}{
		"no GPT":  {make([]byte, 1<<20), 8 << 20, errs.Unsupported},
		"no room": {GPTImage(16384, 2048, 16383-34), 8 << 20, errs.InvalidState},
	} {
		d := diskWith(t, tc.img, tc.size)
		before, _ := os.ReadFile(d.Path)
		err := WriteSeed(d, seedISO(t, "#cloud-config\n"))
		if errs.KindOf(err) != tc.kind {
			t.Errorf("%s: WriteSeed = %v, want %s", name, err, tc.kind)
		}
		if after, _ := os.ReadFile(d.Path); !bytes.Equal(before, after) {
			t.Errorf("%s: the disk changed", name)
		}
	}
}

// TestWriteSeedKeepsPartitionsUnderStaleBackup: an image whose header puts
// its backup header inside one of its partitions (broken or crafted) keeps
// that partition's bytes: only a stale backup past the partitions is
// cleared.
func TestWriteSeedKeepsPartitionsUnderStaleBackup(t *testing.T) {
	const size = 64 << 20
	img := GPTImage(8192, 2048, 6143)
	le := binary.LittleEndian
	le.PutUint64(img[512+32:], 3000) // the backup header "at" sector 3000, inside root
	clear(img[512+16 : 512+20])
	le.PutUint32(img[512+16:], headerCRC(img[512:512+92]))
	copy(img[3000*512:], bytes.Repeat([]byte{0x5a}, 512))
	d := diskWith(t, img, size)
	if err := WriteSeed(d, seedISO(t, "#cloud-config\n")); err != nil {
		t.Fatalf("WriteSeed = %v, want nil", err)
	}
	got, _ := os.ReadFile(d.Path)
	if !bytes.Equal(got[2048*512:6144*512], img[2048*512:6144*512]) {
		t.Errorf("WriteSeed changed the image's partition (sector 3000 = %x…), want it untouched", got[3000*512:3000*512+4])
	}
}
