package codec

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/better-compute/better-compute/errs"
)

func TestLoadOrCreateKey(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "sub", "codec.key")
	k1, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatalf("LoadOrCreateKey(new) = %v", err)
	}
	if len(k1) != KeySize {
		t.Errorf("LoadOrCreateKey(new) length = %d, want %d", len(k1), KeySize)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != 0o600 {
		t.Errorf("key file mode = %v, want 0600", got)
	}
	k2, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatalf("LoadOrCreateKey(existing) = %v", err)
	}
	if !bytes.Equal(k1, k2) {
		t.Errorf("LoadOrCreateKey(existing) returned a different key")
	}
	other, err := LoadOrCreateKey(filepath.Join(t.TempDir(), "codec.key"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Equal(k1, other) {
		t.Errorf("two new keys are equal: not random")
	}
}

func TestLoadOrCreateKeyRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		content []byte
		mode    os.FileMode
	}{
		{"short", make([]byte, 16), 0o600},
		{"long", make([]byte, 33), 0o600},
		{"empty", nil, 0o600},
		{"world readable", make([]byte, KeySize), 0o644},
		{"group readable", make([]byte, KeySize), 0o640},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "codec.key")
			if err := os.WriteFile(path, tt.content, tt.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tt.mode); err != nil {
				t.Fatal(err)
			}
			key, err := LoadOrCreateKey(path)
			if !errs.Is(err, errs.InvalidInput) {
				t.Errorf("LoadOrCreateKey(%s) = %x, %v, want INVALID_INPUT", tt.name, key, err)
			}
			got, _ := os.ReadFile(path)
			if !bytes.Equal(got, tt.content) {
				t.Errorf("LoadOrCreateKey(%s) rewrote the file", tt.name)
			}
		})
	}
}
