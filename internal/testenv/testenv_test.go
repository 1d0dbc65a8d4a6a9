package testenv

import (
	"fmt"
	"strings"
	"testing"
)

// recorder is a testing.TB that records how it was ended instead of ending
// the calling goroutine.
type recorder struct {
	testing.TB
	skipped, failed string
}

func (r *recorder) Helper()                        {}
func (r *recorder) Skipf(format string, a ...any)  { r.skipped = fmt.Sprintf(format, a...) }
func (r *recorder) Fatalf(format string, a ...any) { r.failed = fmt.Sprintf(format, a...) }

func TestMissing(t *testing.T) {
	for _, tt := range []struct {
		ci       string
		wantFail bool
	}{
		{"", false}, {"0", false}, {"false", false}, {"1", true}, {"true", true},
	} {
		t.Run("CI="+tt.ci, func(t *testing.T) {
			t.Setenv("CI", tt.ci)
			r := &recorder{}
			Missing(r, "root, for loop devices", "run the tests as root")
			got, other := r.skipped, r.failed
			if tt.wantFail {
				got, other = r.failed, r.skipped
			}
			if !strings.Contains(got, "root, for loop devices") || !strings.Contains(got, "run the tests as root") || other != "" {
				t.Errorf("Missing(CI=%q) skipped %q, failed %q; want it to %s naming the need and the fix",
					tt.ci, r.skipped, r.failed, map[bool]string{false: "skip", true: "fail"}[tt.wantFail])
			}
		})
	}
}
