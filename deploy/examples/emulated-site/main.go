// Command emulated-site runs the emulated site (package esite): QEMU
// machines, legacy BIOS and UEFI, PXE-booted by bcd site on a bridge in
// network namespaces, enrolled by their emulated Redfish BMCs and taken to
// ready (two of them behind BMCs that report no MAC, found by PXE
// discovery; one behind ipmi_sim, whose chassis control drives QEMU). It prints each machine's progress and the time from power-on
// to the ramdisk joined; with -image, each machine enrolled by its MAC is
// then deployed with that image, seen running from its disk, and
// undeployed back to ready. Then, with -unplugged, a site of its own with
// a 20 s boot stall runs a machine whose link is down, whose enrollment
// fails naming where its boot stopped. Root; `task emulated-site` runs it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/better-compute/better-compute/deploy/examples/emulated-site/esite"
)

func main() {
	esite.Inner() // the run inside the site namespace, when this is it
	var cfg esite.Config
	flag.StringVar(&cfg.RamdiskDir, "ramdisk-dir", "build/ramdisk", "the ramdisk bcd site serves (./run ramdisk)")
	flag.StringVar(&cfg.Image, "image", "", "an OS image (mkimage.sh; task emulated-site-image) to deploy on each ready machine, see running, and undeploy")
	flag.StringVar(&cfg.Dir, "dir", "build/emulated-site", "the run's files: data dir, disks, consoles, logs (replaced)")
	flag.DurationVar(&cfg.ReadyTimeout, "ready-timeout", 6*time.Minute, "each machine's bound for enroll → ready")
	flag.BoolVar(&cfg.Verbose, "v", false, "print every process's log, not only into <dir>/site.log")
	bios := flag.Bool("bios-only", false, "one legacy BIOS machine only (no discovery, no unplugged machine)")
	unplugged := flag.Bool("unplugged", true, "then run a machine whose NIC's link is down, on a site with a 20s boot stall")
	flag.Parse()
	if *bios {
		cfg.Machines, *unplugged = esite.DefaultMachines()[:1], false
	}
	err := run(cfg)
	if *unplugged {
		u := cfg
		u.Machines, u.BootStall, u.Image, u.Dir = []esite.Spec{esite.UnpluggedMachine()}, 20*time.Second, "", cfg.Dir+"-unplugged"
		err = errors.Join(err, run(u))
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "emulated-site:", err)
		os.Exit(1)
	}
}

func run(cfg esite.Config) error {
	if need, fix := esite.Check(cfg); need != "" {
		return fmt.Errorf("missing %s; fix: %s", need, fix)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	res, err := esite.Run(ctx, cfg, os.Stdout)
	for _, m := range res.Machines {
		if m.EnrollToFailed > 0 {
			fmt.Printf("%-8s %-4s %-7s enroll → failed %5.1fs: %s\n", m.Name, m.Firmware, m.State, m.EnrollToFailed.Seconds(), m.LastError)
			continue
		}
		fmt.Printf("%-8s %-4s %-7s enroll → ready %5.1fs (power-on → ramdisk joined %5.1fs)", m.Name, m.Firmware, m.State,
			m.EnrollToReady.Seconds(), m.PowerOnToJoin.Seconds())
		if cfg.Image != "" {
			fmt.Printf("   deploy → OS up %5.1fs   undeploy → ready %5.1fs", m.DeployToOSUp.Seconds(), m.UndeployToReady.Seconds())
		}
		fmt.Printf("   disk wiped %v\n", m.DiskZero)
	}
	return err
}
