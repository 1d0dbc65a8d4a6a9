package disk

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/testenv"
)

// loopDisk attaches a sparse file of size as a loop block device, so the
// block-device paths (fallocate on a device, sampled read-back) run for real.
// It needs root and losetup: elsewhere the test is skipped, and in CI it fails
// (testenv.Missing).
func loopDisk(t *testing.T, size int64) (Disk, string) {
	t.Helper()
	if os.Geteuid() != 0 {
		testenv.Missing(t, "root, to attach loop devices", "run the tests as root (CI does)")
	}
	if _, err := exec.LookPath("losetup"); err != nil {
		testenv.Missing(t, "losetup", "install util-linux's mount package (./run does: apt-get install mount)")
	}
	backing := t.TempDir() + "/loop.img"
	if err := os.WriteFile(backing, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(backing, size); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", backing).CombinedOutput()
	if err != nil {
		testenv.Missing(t, fmt.Sprintf("a free loop device (losetup --find --show: %v: %s)", err, bytes.TrimSpace(out)),
			"load the loop module and give the tests /dev/loop-control (a container needs --privileged or the loop devices)")
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "--detach", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup --detach %s: %v: %s", dev, err, out)
		}
	})
	return Disk{Name: "serial-LOOP", Serial: "LOOP", SizeBytes: size, Path: dev}, backing
}

func TestLoopDeviceQuickWipe(t *testing.T) {
	t.Parallel()
	d, backing := loopDisk(t, 512<<20)
	scribble(t, d, 0, 150<<20, 350<<20, d.SizeBytes)
	res, err := Wipe(context.Background(), d, Quick, nil)
	if err != nil {
		t.Fatalf("Wipe(loop, quick) = %v", err)
	}
	if !res.Verified || res.BytesRead < 2*edgeBytes || !strings.Contains(res.ZeroCheck, "samples") {
		t.Errorf("Wipe(loop, quick) = %+v, want verified over head, tail and samples", res)
	}
	t.Logf("quick wipe of a 512 MiB loop device: %s in %v", res.ZeroCheck, res.Finished.Sub(res.Started))
	b, err := os.ReadFile(backing)
	if err != nil {
		t.Fatal(err)
	}
	if i := firstNonzero(b, make([]byte, blockSize)); i >= 0 {
		t.Errorf("backing file of the wiped loop device has a nonzero byte at %d", i)
	}
	if _, err := Wipe(context.Background(), d, SecureErase, nil); !errs.Is(err, errs.Unsupported) {
		t.Errorf("Wipe(loop, secure-erase) = %v, want UNSUPPORTED", err)
	}
}

func TestLoopDeviceWriteImage(t *testing.T) {
	t.Parallel()
	d, backing := loopDisk(t, 64<<20)
	scribble(t, d, 0, 8<<20, 16<<20, 24<<20) // junk where the image has zero blocks
	raw := testImage(7, 4096, 0, 3, 6)
	stream := compress(t, raw, "zstd")
	res, err := WriteImage(context.Background(), bytes.NewReader(stream),
		ImageSpec{Digest: digestOf(stream), Compression: "zstd"}, d, 0, nil)
	if err != nil || !res.Verified {
		t.Fatalf("WriteImage(loop) = %+v, %v; want verified", res, err)
	}
	got, err := os.ReadFile(backing)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got[:len(raw)], raw) {
		t.Errorf("WriteImage(loop): device contents differ from the image")
	}
}
