package kmod

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func fixture(t *testing.T) Deps {
	t.Helper()
	f, err := os.Open("testdata/modules.dep")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d, err := ParseModulesDep(f)
	if err != nil {
		t.Fatalf("ParseModulesDep(testdata/modules.dep) = %v", err)
	}
	return d
}

func TestModName(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"kernel/drivers/nvme/host/nvme-core.ko":    "nvme_core",
		"kernel/drivers/block/virtio_blk.ko":       "virtio_blk",
		"kernel/drivers/scsi/sd_mod.ko.xz":         "sd_mod",
		"kernel/drivers/ata/libahci.ko.zst":        "libahci",
		"kernel/drivers/net/ethernet/e1000e.ko.gz": "e1000e",
	} {
		if got := ModName(in); got != want {
			t.Errorf("ModName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestLoadOrder checks that every module comes after everything it needs,
// each once, and only what was asked for and its dependencies.
func TestLoadOrder(t *testing.T) {
	t.Parallel()
	d := fixture(t)
	for _, tt := range []struct {
		want []string
		got  []string
	}{
		{[]string{"virtio_net"}, []string{
			"kernel/net/core/failover.ko", "kernel/drivers/net/net_failover.ko", "kernel/drivers/virtio/virtio.ko",
			"kernel/drivers/virtio/virtio_ring.ko", "kernel/drivers/net/virtio_net.ko"}},
		{[]string{"nvme", "nvme-core"}, []string{"kernel/drivers/nvme/host/nvme-core.ko", "kernel/drivers/nvme/host/nvme.ko"}},
		{[]string{"e1000e", "virtio_blk"}, []string{
			"kernel/drivers/pps/pps_core.ko", "kernel/drivers/ptp/ptp.ko", "kernel/drivers/net/ethernet/intel/e1000e/e1000e.ko",
			"kernel/drivers/virtio/virtio.ko", "kernel/drivers/virtio/virtio_ring.ko", "kernel/drivers/block/virtio_blk.ko"}},
	} {
		got, err := d.LoadOrder(tt.want...)
		if err != nil {
			t.Fatalf("LoadOrder(%v) = %v", tt.want, err)
		}
		if diff := cmp.Diff(tt.got, got); diff != "" {
			t.Errorf("LoadOrder(%v) mismatch (-want +got):\n%s", tt.want, diff)
		}
	}
}

// TestLoadOrderAll loads everything: each module once, after its dependencies.
func TestLoadOrderAll(t *testing.T) {
	t.Parallel()
	d := fixture(t)
	order, err := d.LoadOrder()
	if err != nil {
		t.Fatalf("LoadOrder() = %v", err)
	}
	if len(order) != len(d) {
		t.Errorf("LoadOrder() has %d modules, want %d (each once): %v", len(order), len(d), order)
	}
	for i, f := range order {
		for _, dep := range d[f] {
			if j := slices.Index(order, dep); j < 0 || j > i {
				t.Errorf("LoadOrder(): %s at %d comes before its dependency %s (at %d)", f, i, dep, j)
			}
		}
	}
}

func TestLoadOrderErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name, dep, want string
		ask             []string
	}{
		{"unknown module", "a.ko:\n", "module zz is not in modules.dep", []string{"zz"}},
		{"missing dependency", "a.ko: b.ko\n", "module b.ko (needed by a.ko) is not in modules.dep", nil},
		{"cycle", "a.ko: b.ko\nb.ko: a.ko\n", "dependency cycle", nil},
	} {
		d, err := ParseModulesDep(strings.NewReader(tt.dep))
		if err != nil {
			t.Fatalf("%s: ParseModulesDep = %v", tt.name, err)
		}
		if _, err := d.LoadOrder(tt.ask...); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: LoadOrder(%v) = %v, want an error containing %q", tt.name, tt.ask, err, tt.want)
		}
	}
}

func TestParseModulesDepErrors(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"a.ko\n":         "line 1",
		"a.ko:\na.ko:\n": "listed twice",
		"\n: b.ko\n":     "line 2",
	} {
		if _, err := ParseModulesDep(strings.NewReader(in)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseModulesDep(%q) = %v, want an error containing %q", in, err, want)
		}
	}
}

func TestParseModinfo(t *testing.T) {
	t.Parallel()
	b := []byte("license=GPL\x00description=Virtio network driver\x00depends=net_failover,virtio,virtio-ring\x00" +
		"retpoline=Y\x00intree=Y\x00name=virtio_net\x00vermagic=6.1.0-57-amd64 SMP preempt mod_unload modversions \x00\x00")
	want := Modinfo{Name: "virtio_net", Depends: []string{"net_failover", "virtio", "virtio_ring"}}
	if diff := cmp.Diff(want, ParseModinfo(b)); diff != "" {
		t.Errorf("ParseModinfo() mismatch (-want +got):\n%s", diff)
	}
	if got := ParseModinfo([]byte("depends=\x00name=virtio\x00")); got.Depends != nil {
		t.Errorf("ParseModinfo(depends=) = %v, want no dependencies", got.Depends)
	}
}

// TestResolve follows .modinfo dependencies the way the build does and
// writes the modules.dep the ramdisk loads from; reading it back gives the
// same dependencies.
func TestResolve(t *testing.T) {
	t.Parallel()
	files := map[string]string{"virtio_net": "n/virtio_net.ko", "net_failover": "n/net_failover.ko", "failover": "c/failover.ko",
		"virtio": "v/virtio.ko", "virtio_ring": "v/virtio_ring.ko", "nvme": "h/nvme.ko", "nvme_core": "h/nvme-core.ko", "unused": "u/unused.ko"}
	info := map[string][]string{"n/virtio_net.ko": {"net_failover", "virtio", "virtio_ring"}, "n/net_failover.ko": {"failover"},
		"v/virtio_ring.ko": {"virtio"}, "h/nvme.ko": {"nvme-core"}}
	read := func(f string) (Modinfo, error) { return Modinfo{Name: ModName(f), Depends: info[f]}, nil }
	d, err := resolve(files, []string{"virtio_net", "nvme"}, read)
	if err != nil {
		t.Fatalf("resolve() = %v", err)
	}
	want := Deps{"n/virtio_net.ko": {"v/virtio_ring.ko", "v/virtio.ko", "n/net_failover.ko", "c/failover.ko"},
		"n/net_failover.ko": {"c/failover.ko"}, "c/failover.ko": {}, "v/virtio.ko": {}, "v/virtio_ring.ko": {"v/virtio.ko"},
		"h/nvme.ko": {"h/nvme-core.ko"}, "h/nvme-core.ko": {}}
	if diff := cmp.Diff(want, d); diff != "" {
		t.Errorf("resolve() mismatch (-want +got):\n%s", diff)
	}
	var buf bytes.Buffer
	if err := d.Format(&buf); err != nil {
		t.Fatal(err)
	}
	back, err := ParseModulesDep(&buf)
	if err != nil {
		t.Fatalf("ParseModulesDep(Format()) = %v", err)
	}
	if diff := cmp.Diff(d, back); diff != "" {
		t.Errorf("ParseModulesDep(Format()) mismatch (-want +got):\n%s", diff)
	}
	if _, err := resolve(files, []string{"e1000e"}, read); err == nil || !strings.Contains(err.Error(), "e1000e") {
		t.Errorf("resolve(e1000e) = %v, want an error naming e1000e", err)
	}
}
