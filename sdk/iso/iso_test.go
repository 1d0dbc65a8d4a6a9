package iso_test

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/sdk/iso"
)

// cidata is the shape the autoinstall plugin writes.
var cidata = map[string][]byte{
	"user-data": []byte("#cloud-config\nautoinstall:\n  version: 1\n"),
	"meta-data": []byte("instance-id: node-1\n"),
}

func write(t testing.TB, volumeID string, files map[string][]byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := iso.Write(&buf, volumeID, files); err != nil {
		t.Fatalf("Write(%q, %d files) = %v, want nil", volumeID, len(files), err)
	}
	return buf.Bytes()
}

// readAll reads every file of files back from img and compares.
func readAll(t testing.TB, img []byte, files map[string][]byte) {
	t.Helper()
	for name, want := range files {
		got, err := iso.ReadFile(bytes.NewReader(img), name)
		if err != nil {
			t.Fatalf("ReadFile(%q) = %v, want its %d bytes", name, err, len(want))
		}
		if !bytes.Equal(got, want) {
			t.Errorf("ReadFile(%q) = %d bytes %q…, want %d bytes", name, len(got), truncate(got), len(want))
		}
	}
}

func truncate(b []byte) []byte { return b[:min(len(b), 40)] }

func TestRoundTrip(t *testing.T) {
	t.Parallel()
	many := map[string][]byte{}
	for i := range 120 { // more records than one directory sector holds
		many[fmt.Sprintf("file-%03d.txt", i)] = bytes.Repeat([]byte{byte(i)}, i*37)
	}
	for _, tt := range []struct {
		name  string
		files map[string][]byte
	}{
		{"cidata", cidata},
		{"none", map[string][]byte{}},
		{"empty file", map[string][]byte{"empty": {}, "x.y": []byte("x")}},
		{"a sector exactly and one byte more", map[string][]byte{"a": make([]byte, iso.SectorSize), "b": make([]byte, iso.SectorSize+1)}},
		{"a long name", map[string][]byte{strings.Repeat("n", 25) + ".ext": []byte("long")}},
		{"many", many},
	} {
		t.Run(tt.name, func(t *testing.T) {
			img := write(t, "cidata", tt.files)
			if len(img)%iso.SectorSize != 0 {
				t.Errorf("len(image) = %d, want a multiple of %d", len(img), iso.SectorSize)
			}
			readAll(t, img, tt.files)
			if again := write(t, "cidata", tt.files); !bytes.Equal(img, again) {
				t.Errorf("Write twice of the same files = different bytes, want the same image")
			}
		})
	}
}

func TestReadFileNames(t *testing.T) {
	t.Parallel()
	img := write(t, "cidata", cidata)
	for _, name := range []string{"user-data", "USER-DATA", "User-Data"} {
		if _, err := iso.ReadFile(bytes.NewReader(img), name); err != nil {
			t.Errorf("ReadFile(%q) = %v, want the file", name, err)
		}
	}
	if _, err := iso.ReadFile(bytes.NewReader(img), "vendor-data"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadFile(vendor-data) = %v, want fs.ErrNotExist", err)
	}
}

func TestReadFileNotISO(t *testing.T) {
	t.Parallel()
	img := write(t, "cidata", cidata)
	for name, b := range map[string][]byte{
		"empty":          {},
		"zeros":          make([]byte, 40*iso.SectorSize),
		"cut in the pvd": img[:16*iso.SectorSize+100],
	} {
		if _, err := iso.ReadFile(bytes.NewReader(b), "user-data"); !errors.Is(err, iso.ErrNotISO) {
			t.Errorf("ReadFile(%s) = %v, want ErrNotISO", name, err)
		}
	}
	cut := img[:len(img)-iso.SectorSize] // the last file's sector is gone
	var failed int
	for name := range cidata {
		if _, err := iso.ReadFile(bytes.NewReader(cut), name); err != nil {
			failed++
		}
	}
	if failed != 1 {
		t.Errorf("ReadFile of each file of an image missing its last sector failed %d times, want 1", failed)
	}
}

func TestWriteRefuses(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		volume string
		files  map[string][]byte
		want   string
	}{
		{"", cidata, "volume id"},
		{strings.Repeat("v", 33), cidata, "volume id"},
		{"ci data", cidata, "volume id"},
		{"cidata", map[string][]byte{"": nil}, "empty"},
		{"cidata", map[string][]byte{"dir/user-data": nil}, "holds '/'"},
		{"cidata", map[string][]byte{"a.b.c": nil}, "more than one '.'"},
		{"cidata", map[string][]byte{".": nil}, "no name"},
		{"cidata", map[string][]byte{strings.Repeat("n", 31): nil}, "longer than 30"},
		{"cidata", map[string][]byte{"User-Data": nil, "user-data": nil}, "the same name"},
		{"cidata", map[string][]byte{"é": nil}, "holds 'é'"},
	} {
		var buf bytes.Buffer
		err := iso.Write(&buf, tt.volume, tt.files)
		if err == nil || !strings.Contains(err.Error(), tt.want) || buf.Len() != 0 {
			t.Errorf("Write(%q, %v) = %v with %d bytes written, want an error saying %q and nothing written",
				tt.volume, keys(tt.files), err, buf.Len(), tt.want)
		}
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestRandomRoundTrip writes and reads back random sets of files.
func TestRandomRoundTrip(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(9, 9))
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-"
	for range 200 {
		files := map[string][]byte{}
		seen := map[string]bool{}
		for range rng.IntN(12) {
			name := make([]byte, 1+rng.IntN(20))
			for i := range name {
				name[i] = alphabet[rng.IntN(len(alphabet))]
			}
			if seen[string(name)] {
				continue
			}
			seen[string(name)] = true
			data := make([]byte, rng.IntN(3*iso.SectorSize))
			for i := range data {
				data[i] = byte(rng.Uint32())
			}
			files[string(name)] = data
		}
		img := write(t, "RANDOM", files)
		got := map[string][]byte{}
		for name := range files {
			b, err := iso.ReadFile(bytes.NewReader(img), name)
			if err != nil {
				t.Fatalf("ReadFile(%q) = %v", name, err)
			}
			got[name] = b
		}
		if diff := cmp.Diff(files, got); diff != "" {
			t.Fatalf("round trip of %v (-wrote +read):\n%s", keys(files), diff)
		}
	}
}

// FuzzReadFile: ReadFile of any bytes returns a file or an error, never
// panics, and never returns more than the image holds.
func FuzzReadFile(f *testing.F) {
	img := write(f, "cidata", cidata)
	f.Add(img, "user-data")
	f.Add(img[:17*iso.SectorSize], "meta-data")
	broken := bytes.Clone(img)
	broken[16*iso.SectorSize+156] = 200 // the root record's length
	f.Add(broken, "user-data")
	f.Fuzz(func(t *testing.T, b []byte, name string) {
		got, err := iso.ReadFile(bytes.NewReader(b), name)
		if err == nil && len(got) > len(b) {
			t.Errorf("ReadFile = %d bytes from an image of %d", len(got), len(b))
		}
	})
}

// FuzzRoundTrip: whatever Write accepts, ReadFile reads back the same.
func FuzzRoundTrip(f *testing.F) {
	f.Add("user-data", []byte("#cloud-config\n"), "meta-data", []byte{})
	f.Add("A.B", []byte{0}, "a_b", bytes.Repeat([]byte{1}, iso.SectorSize+1))
	f.Fuzz(func(t *testing.T, n1 string, d1 []byte, n2 string, d2 []byte) {
		files := map[string][]byte{n1: d1, n2: d2}
		var buf bytes.Buffer
		if err := iso.Write(&buf, "FUZZ", files); err != nil {
			if buf.Len() != 0 {
				t.Fatalf("Write = %v after writing %d bytes, want nothing written", err, buf.Len())
			}
			return
		}
		readAll(t, buf.Bytes(), files)
	})
}
