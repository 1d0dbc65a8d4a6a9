package ipmibmc

import (
	"context"
	"net"
	"strings"
	"time"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
)

// poll is how often the watcher reads the chassis script's boots and power
// files: ipmi_sim runs the script, which cannot call back into this
// process, so the files are the coupling and a short poll the hook.
const poll = 100 * time.Millisecond

// watch calls OnBoot for each line the chassis script appends to boots, and
// OnPowerOff when the power it writes goes from on to off. Boots that land
// between two polls become one boot from the last device: the machine
// restarted more than once in 100 ms, and only the last counts; an off and
// on again between two polls is a boot, not a power-off.
func (b *BMC) watch() {
	defer close(b.done)
	seen := len(b.Lines("boots"))
	on := b.Power() == bmc.On
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		select {
		case <-b.stop:
			return
		case <-t.C:
		}
		if boots := b.Lines("boots"); len(boots) > seen {
			seen = len(boots)
			dev := deviceOf(boots[len(boots)-1])
			b.cfg.Logger.Info("emulated IPMI BMC: the machine boots", "device", string(dev))
			if b.cfg.OnBoot != nil {
				b.cfg.OnBoot(dev)
			}
		}
		switch b.Power() {
		case bmc.On:
			on = true
		case bmc.Off:
			if on && b.cfg.OnPowerOff != nil {
				b.cfg.OnPowerOff()
			}
			on = false
		}
	}
}

// deviceOf maps the boot device ipmi_sim passes to chassis_control to a
// boot device; no override (none) boots the machine's default, its disk.
func deviceOf(s string) bmc.BootDevice {
	switch s {
	case "pxe":
		return bmc.BootPXE
	case "cdrom":
		return bmc.BootCD
	case "bios":
		return bmc.BootBIOS
	}
	return bmc.BootDisk // default (the hard disk) and none
}

// asfPing is an RMCP ASF Presence Ping (DSP0136 3.2.4.1): RMCP version 6,
// sequence 0xff (no ack), class ASF, then the ASF IANA number 4542, type
// 0x80 (ping), tag 0, reserved, no data.
var asfPing = []byte{0x06, 0x00, 0xff, 0x06, 0x00, 0x00, 0x11, 0xbe, 0x80, 0x00, 0x00, 0x00}

// ping sends presence pings to 127.0.0.1:port until a pong (type 0x40)
// comes back or within has passed; it needs no session, so it says only
// that ipmi_sim listens.
func ping(ctx context.Context, port int, within time.Duration) error {
	c, err := net.DialUDP("udp", nil, &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: port})
	if err != nil {
		return errs.Wrap(errs.Internal, err, "dial the BMC")
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	buf := make([]byte, 64)
	for ctx.Err() == nil {
		if _, err := c.Write(asfPing); err == nil {
			_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			if n, err := c.Read(buf); err == nil && n >= 9 && buf[8] == 0x40 {
				return nil
			}
		}
		time.Sleep(20 * time.Millisecond) // a refused write returns at once
	}
	return errs.New(errs.Unavailable, "no presence pong in %s", within)
}

// guidOf returns the system GUID ipmi_sim's configuration takes (32 hex
// digits) for a product UUID: the bytes in SMBIOS order (bmc.SwapUUID), as
// bmc/ipmi decodes them.
func guidOf(uuid string) (string, error) {
	g, err := bmc.SwapUUID(uuid)
	return strings.ReplaceAll(g, "-", ""), err
}
