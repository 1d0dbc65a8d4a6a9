package main

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "record testdata/<sample>.json from `go test -json ./testdata/<sample>` and rewrite testdata/<sample>.golden")

// TestReportGolden reads recorded `go test -json` streams and compares what
// the report prints with golden files: failed tests and their failed
// subtests, result line first, with their logs; no passing test's log; a
// panic's trace; a compiler error; the package lines; then the skipped
// tests with their reasons and the counts.
func TestReportGolden(t *testing.T) {
	for _, tt := range []struct {
		sample                string
		passed, failed, skips int
	}{
		{"sample", 3, 5, 2}, // TestPass, TestSubtests/ok, TestParallel/a pass
		{"panics", 1, 1, 0},
		{"broken", 0, 0, 0},
	} {
		t.Run(tt.sample, func(t *testing.T) {
			r, got := replay(t, tt.sample)
			golden := filepath.Join("testdata", tt.sample+".golden")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("report of testdata/%s.json (-golden +got):\n%s", tt.sample, diff)
			}
			if r.passed != tt.passed || r.failed != tt.failed || len(r.skipped) != tt.skips {
				t.Errorf("report of testdata/%s.json = %d passed, %d failed, %d skipped; want %d, %d, %d",
					tt.sample, r.passed, r.failed, len(r.skipped), tt.passed, tt.failed, tt.skips)
			}
		})
	}
}

// replay feeds testdata/<sample>.json (recorded anew with -update) to a
// report and returns what it printed, summary included.
func replay(t *testing.T, sample string) (*report, []byte) {
	t.Helper()
	stream := filepath.Join("testdata", sample+".json")
	if *update {
		// go test fails on these samples by design: only its output counts.
		out, _ := exec.Command("go", "test", "-count=1", "-json", "./testdata/"+sample).Output()
		if err := os.WriteFile(stream, out, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in, err := os.Open(stream)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	var out bytes.Buffer
	r := newReport(&out)
	if err := r.read(in, "./testdata/"+sample); err != nil {
		t.Fatalf("read(%s) = %v", stream, err)
	}
	r.summary([]string{"./testdata/" + sample})
	return r, out.Bytes()
}

func TestTestArgs(t *testing.T) {
	for _, tt := range []struct{ in, want []string }{
		{[]string{"-count=1", "./..."}, []string{"test", "-json", "-count=1", "./..."}},
		{[]string{"-C", "deploy/examples/autoinstall", "-count=1", "./..."}, []string{"test", "-C", "deploy/examples/autoinstall", "-json", "-count=1", "./..."}},
	} {
		if got := testArgs(tt.in); !cmp.Equal(got, tt.want) {
			t.Errorf("testArgs(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
