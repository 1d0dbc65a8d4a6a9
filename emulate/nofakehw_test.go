//go:build !fakehw

package emulate

import (
	"context"
	"testing"

	"github.com/better-compute/better-compute/errs"
)

func TestStartNeedsFakeHW(t *testing.T) {
	t.Parallel()
	_, err := Start(context.Background(), Config{Dir: t.TempDir(), BootURL: "http://127.0.0.1:1"})
	if !errs.Is(err, errs.Unsupported) {
		t.Errorf("Start() without -tags fakehw = %v, want UNSUPPORTED", err)
	}
}
