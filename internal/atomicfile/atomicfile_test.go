package atomicfile

import (
	"os"
	"path/filepath"
	"testing"
)

// TestWriteReplacesAndSyncsDirectory: Write replaces the file with its mode
// and leaves no temporary file; it syncs the directory after the rename (the
// new contents are in place when it does), so a power loss after Write
// returns cannot bring the old file back.
func TestWriteReplacesAndSyncsDirectory(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "table.json")
	if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	var synced []string
	prev := syncDir
	syncDir = func(d string) error {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Errorf("syncDir(%s): read %s: %v", d, path, err)
		}
		synced = append(synced, d+": "+string(b))
		return prev(d)
	}
	t.Cleanup(func() { syncDir = prev })

	if err := Write(path, []byte("new"), 0o600); err != nil {
		t.Fatalf("Write = %v", err)
	}
	if want := dir + ": new"; len(synced) != 1 || synced[0] != want {
		t.Errorf("directory syncs = %q, want one of %s after the rename (%q)", synced, dir, want)
	}
	b, err := os.ReadFile(path)
	if err != nil || string(b) != "new" {
		t.Errorf("%s = %q, %v; want \"new\"", path, b, err)
	}
	if st, err := os.Stat(path); err != nil {
		t.Error(err)
	} else if st.Mode().Perm() != 0o600 {
		t.Errorf("mode of %s = %v, want 0600", path, st.Mode().Perm())
	}
	ents, err := os.ReadDir(dir)
	if err != nil || len(ents) != 1 {
		t.Errorf("directory holds %v, %v; want only table.json", ents, err)
	}
}
