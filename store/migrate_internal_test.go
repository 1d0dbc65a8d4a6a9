package store

import (
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
)

func TestLoadMigrations(t *testing.T) {
	t.Parallel()
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	tests := []struct {
		name    string
		fsys    fstest.MapFS
		want    []int
		wantErr bool
	}{
		{"in order", fstest.MapFS{"m/0002_b.sql": file("B"), "m/0001_a.sql": file("A")}, []int{1, 2}, false},
		{"gap", fstest.MapFS{"m/0001_a.sql": file("A"), "m/0003_c.sql": file("C")}, nil, true},
		{"not from 1", fstest.MapFS{"m/0002_b.sql": file("B")}, nil, true},
		{"duplicate version", fstest.MapFS{"m/0001_a.sql": file("A"), "m/0001_b.sql": file("B")}, nil, true},
		{"bad name", fstest.MapFS{"m/1_a.sql": file("A")}, nil, true},
		{"not sql", fstest.MapFS{"m/0001_a.txt": file("A")}, nil, true},
		{"stray file", fstest.MapFS{"m/.keep": file("")}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ms, err := loadMigrations(tt.fsys, "m")
			if (err != nil) != tt.wantErr {
				t.Fatalf("loadMigrations(%s) = %v, want error %v", tt.name, err, tt.wantErr)
			}
			var got []int
			for _, m := range ms {
				got = append(got, m.version)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("loadMigrations(%s) versions (-want +got):\n%s", tt.name, diff)
			}
		})
	}
}

func TestEmbeddedMigrations(t *testing.T) {
	t.Parallel()
	ms, err := loadMigrations(migrationFiles, "migrations")
	if err != nil || len(ms) == 0 {
		t.Fatalf("loadMigrations(embedded) = %d migrations, %v; want some, nil", len(ms), err)
	}
}
