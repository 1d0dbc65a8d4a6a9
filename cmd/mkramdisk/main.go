// Command mkramdisk builds the PXE ramdisk (vmlinuz and initrd.img) from an
// extracted Debian kernel package and a static bcd; `task ramdisk` runs it.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/better-compute/better-compute/ramdisk/initramfs"
)

func main() {
	var cfg initramfs.Config
	flag.StringVar(&cfg.PackageRoot, "package-root", "", "where linux-image-<release> was extracted (dpkg-deb -x)")
	flag.StringVar(&cfg.BCD, "bcd", "", "a static bcd (CGO_ENABLED=0), the ramdisk's /init")
	flag.StringVar(&cfg.Out, "out", "build/ramdisk", "where vmlinuz and initrd.img are written")
	flag.Parse()
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		os.Exit(1)
	}
}

func run(cfg initramfs.Config) error {
	if cfg.PackageRoot == "" || cfg.BCD == "" {
		return fmt.Errorf("give --package-root and --bcd")
	}
	res, err := initramfs.Build(cfg)
	if err != nil {
		return err
	}
	fmt.Printf("ramdisk in %s: kernel %s %s (%.1f MiB); %s %.1f MiB zstd (%.1f MiB cpio: bcd and %d modules)\n",
		cfg.Out, res.Release, initramfs.KernelFile, mib(res.KernelBytes), filepath.Join(cfg.Out, initramfs.InitrdFile),
		mib(res.InitrdBytes), mib(res.CpioBytes), res.Modules)
	return nil
}

func mib(n int64) float64 { return float64(n) / (1 << 20) }
