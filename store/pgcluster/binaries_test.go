package pgcluster

import (
	"os"
	"path/filepath"
	"testing"
)

// fakeBin creates executable files named progs in dir.
func fakeBin(t *testing.T, dir string, progs ...string) string {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range progs {
		if err := os.WriteFile(filepath.Join(dir, p), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestFindBinaries(t *testing.T) {
	t.Parallel()
	all := []string{"initdb", "pg_ctl", "postgres"}
	root := t.TempDir()
	lib := filepath.Join(root, "lib")
	fakeBin(t, filepath.Join(lib, "9.6", "bin"), all...)
	fakeBin(t, filepath.Join(lib, "14", "bin"), all...)
	fakeBin(t, filepath.Join(lib, "16", "bin"), all...)
	fakeBin(t, filepath.Join(lib, "17", "bin"), "initdb") // incomplete
	onPath := fakeBin(t, filepath.Join(root, "path"), all...)
	partial := fakeBin(t, filepath.Join(root, "partial"), "initdb", "pg_ctl")
	linked := filepath.Join(root, "linked")
	if err := os.MkdirAll(linked, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(lib, "14", "bin", "initdb"), filepath.Join(linked, "initdb")); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path, want string
	}{
		{"on PATH", onPath, onPath},
		{"newest complete version", "", filepath.Join(lib, "16", "bin")},
		{"incomplete PATH entry skipped", partial, filepath.Join(lib, "16", "bin")},
		{"symlink stands for its directory", partial + ":" + linked, filepath.Join(lib, "14", "bin")},
	}
	for _, tt := range tests {
		got, err := findBinaries(tt.path, lib)
		if err != nil || got.dir != tt.want || got.postgres != filepath.Join(tt.want, "postgres") {
			t.Errorf("findBinaries(%s) = %+v, %v; want %s", tt.name, got, err, tt.want)
		}
	}
	if _, err := findBinaries(partial, filepath.Join(root, "nothing")); err == nil {
		t.Errorf("findBinaries(nothing complete) = nil error, want UNAVAILABLE")
	}
}

func TestReachable(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	// Open the test's own temporary directories to others; / and os.TempDir() are.
	for _, d := range []string{filepath.Dir(root), root} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	open := filepath.Join(root, "open", "inner")
	closed := filepath.Join(root, "closed", "inner")
	for _, d := range []string{open, closed} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Dir(closed), 0o700); err != nil {
		t.Fatal(err)
	}
	me, other := os.Getuid(), os.Getuid()+12345 // other owns none of them
	tests := []struct {
		dir  string
		uid  int
		want bool
	}{
		{open, other, true},
		{closed, other, false},
		{closed, me, true},
		{filepath.Join(root, "missing"), me, false},
	}
	for _, tt := range tests {
		if got := reachable(tt.dir, tt.uid, tt.uid); got != tt.want {
			t.Errorf("reachable(%s, uid %d) = %v, want %v", tt.dir, tt.uid, got, tt.want)
		}
	}
}
