package slotfile

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/errs"
)

func open(t *testing.T, path string) (*File, []byte) {
	t.Helper()
	f, b, err := Open(path, 0o600)
	if err != nil {
		t.Fatalf("Open(%s) = %v", path, err)
	}
	return f, b
}

func write(t *testing.T, f *File, data string) {
	t.Helper()
	if err := f.Write([]byte(data)); err != nil {
		t.Fatalf("Write(%q) = %v", data, err)
	}
}

// TestWritesTakeTurnsAndSurviveReopen: each write goes to the other slot,
// padded to 64 KiB, and a reopen reads the newest; an empty path reads nil.
func TestWritesTakeTurnsAndSurviveReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "table.json")
	f, b := open(t, path)
	if b != nil {
		t.Errorf("Open(nothing written) = %q, want nil", b)
	}
	write(t, f, "one")
	if _, err := os.Stat(path + ".1"); err != nil {
		t.Errorf("the first write is not in slot 1: %v", err)
	}
	write(t, f, "two")
	write(t, f, "three")
	for _, slot := range []string{path + ".0", path + ".1"} {
		st, err := os.Stat(slot)
		if err != nil || st.Size() != pad || st.Mode().Perm() != 0o600 {
			t.Errorf("slot %s = %v, %v; want %d bytes, mode 0600", slot, st, err, pad)
		}
	}
	if _, b := open(t, path); string(b) != "three" {
		t.Errorf("reopened = %q, want three", b)
	}
	big := strings.Repeat("x", pad+10)
	write(t, f, big)
	write(t, f, "small")
	if st, _ := os.Stat(path + ".1"); st.Size() != pad {
		t.Errorf("slot 1 after a big write then a small one: %d bytes, want %d (cut back)", st.Size(), pad)
	}
	if _, b := open(t, path); string(b) != "small" {
		t.Errorf("reopened = %q, want small", b)
	}
}

// TestTornWriteLeavesTheOneBefore: a slot whose data or header does not
// hold (a write cut short by a crash) is passed over for the other, and
// the next write goes into the torn one; both torn is an error naming them.
func TestTornWriteLeavesTheOneBefore(t *testing.T) {
	for name, tear := range map[string]func([]byte) []byte{
		"data":      func(b []byte) []byte { b[len("bc-slot")+200] ^= 0xff; return b },
		"cut short": func(b []byte) []byte { return b[:40] },
		"zeros":     func(b []byte) []byte { return make([]byte, len(b)) },
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "table.json")
			f, _ := open(t, path)
			write(t, f, "before")
			write(t, f, strings.Repeat("after ", 100))
			slot := path + ".0" // the second write's
			b, err := os.ReadFile(slot)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(slot, tear(b), 0o600); err != nil {
				t.Fatal(err)
			}
			f, b = open(t, path)
			if string(b) != "before" {
				t.Fatalf("Open with the newest slot torn = %q, want before", b)
			}
			write(t, f, "again")
			if seq, data, err := readSlot(slot); err != nil || seq != 2 || string(data) != "again" {
				t.Errorf("slot 0 after the next write = %d %q %v; want 2 again", seq, data, err)
			}
			if _, b := open(t, path); string(b) != "again" {
				t.Errorf("reopened = %q, want again", b)
			}
		})
	}
	path := filepath.Join(t.TempDir(), "table.json")
	f, _ := open(t, path)
	write(t, f, "one")
	write(t, f, "two")
	for _, slot := range []string{path + ".0", path + ".1"} {
		if err := os.WriteFile(slot, []byte("garbage\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := Open(path, 0o600); !errs.Is(err, errs.Internal) || !strings.Contains(err.Error(), "table.json.0") {
		t.Errorf("Open with both slots corrupt = %v, want INTERNAL naming the slots", err)
	}
}

// TestWholeFileBeforeSlots: a file written whole at path (before slots)
// is read when no slot was written, and removed by the first write.
func TestWholeFileBeforeSlots(t *testing.T) {
	path := filepath.Join(t.TempDir(), "table.json")
	if err := os.WriteFile(path, []byte("whole"), 0o600); err != nil {
		t.Fatal(err)
	}
	f, b := open(t, path)
	if string(b) != "whole" {
		t.Fatalf("Open = %q, want whole", b)
	}
	var synced []string
	defer func(old func(string) error) { syncDir = old }(syncDir)
	syncDir = func(dir string) error { synced = append(synced, dir); return nil }
	write(t, f, "slotted")
	if _, err := os.Stat(path); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the whole file after the first slot write: %v, want gone", err)
	}
	if len(synced) != 1 || synced[0] != filepath.Dir(path) {
		t.Errorf("directory syncs after creating a slot = %v, want one of %s", synced, filepath.Dir(path))
	}
	write(t, f, "again") // creates slot 0
	write(t, f, "and again")
	if len(synced) != 2 {
		t.Errorf("directory syncs after three writes = %d, want 2 (one per slot created)", len(synced))
	}
	if _, b := open(t, path); !bytes.Equal(b, []byte("and again")) {
		t.Errorf("reopened = %q, want and again", b)
	}
}
