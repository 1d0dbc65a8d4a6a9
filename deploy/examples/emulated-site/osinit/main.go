// Command osinit is the /init of the emulated site's OS image (mkimage.sh):
// the whole "OS" a deployed machine boots from its disk. It says on the
// console that it runs, with the machine's SMBIOS UUID and the kernel's
// command line (so a reader can tell which machine and which boot), then
// stays up as PID 1 must.
package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"
)

// Marker starts the line the emulated site waits for on the console.
const Marker = "better-compute emulated-site OS: up"

func main() {
	_ = os.MkdirAll("/proc", 0o555)
	_ = os.MkdirAll("/sys", 0o555)
	_ = syscall.Mount("proc", "/proc", "proc", 0, "")
	_ = syscall.Mount("sysfs", "/sys", "sysfs", 0, "")
	console, err := os.OpenFile("/dev/console", os.O_WRONLY, 0)
	if err != nil {
		console = os.Stdout
	}
	uuid, _ := os.ReadFile("/sys/class/dmi/id/product_uuid")
	cmdline, _ := os.ReadFile("/proc/cmdline")
	for {
		fmt.Fprintf(console, "%s on %s (cmdline: %s)\n", Marker, strings.TrimSpace(string(uuid)), strings.TrimSpace(string(cmdline)))
		time.Sleep(30 * time.Second)
	}
}
