package ipmibmc

// chassisScript is ipmi_sim's chassis_control program: it keeps the power
// (0 or 1) and the boot device ipmi_sim passes on (none, pxe, default for
// the hard disk, cdrom, bios) in files of its directory, logs every set, and
// lands power changes after the seconds in the file delay (0 when absent),
// as real machines do. A reset, and a power-on once its power has landed,
// append the boot device to boots, which the BMC's watcher turns into the
// machine's boot (watch.go). The order matters: the rack's machine stops
// its ramdisk when it finds its power off (emulate's onPowerOff, which
// looks at the power file), so a boot seen before the power file said on
// was stopped at once, and the machine stayed off with its BMC on. The
// Redfish BMC, too, sets the power before it calls its boot hook
// (powerOnLocked).
// ipmi_sim does not tell it when a boot-once override is consumed, so a
// machine boots from the device last set until another is set. power and
// boot are replaced by rename, never rewritten in place: ipmi_sim reads
// them through this script while a late change lands, and a read between
// truncate and write would find them empty.
const chassisScript = `#!/bin/sh
dir=$(dirname "$0")
shift # the MC address
op=$1; shift
delay=$(cat "$dir/delay" 2>/dev/null || echo 0)
put() { # put FILE VALUE: replace the file whole
	t=$(mktemp "$dir/.$1.XXXXXX") && echo "$2" > "$t" && mv -f "$t" "$dir/$1"
}
power() { # power VALUE: now or after the delay, in the background
	dev= # a power-on boots the device set now, once the power has landed
	if [ "$1" = 1 ] && [ "$(cat "$dir/power")" = 0 ]; then dev=$(cat "$dir/boot"); fi
	if [ "$delay" = 0 ]; then land "$1" "$dev"; return; fi
	( sleep "$delay"; land "$1" "$dev" ) >/dev/null 2>&1 &
}
land() { # land VALUE DEVICE: the power, then the boot from DEVICE if any
	put power "$1"
	if [ -n "$2" ]; then echo "$2" >> "$dir/boots"; fi
}
case $op in
get)
	for p in "$@"; do
		case $p in
		power) echo "power:$(cat "$dir/power")" ;;
		boot) echo "boot:$(cat "$dir/boot")" ;;
		*) echo "unknown parameter $p"; exit 1 ;;
		esac
	done ;;
set)
	echo "$*" >> "$dir/log"
	while [ $# -ge 2 ]; do
		case $1 in
		power) power "$2" ;;
		shutdown) power 0 ;;
		reset) cat "$dir/boot" >> "$dir/boots" ;;
		boot) put boot "$2" ;;
		*) echo "unknown parameter $1"; exit 1 ;;
		esac
		shift 2
	done ;;
*) exit 1 ;;
esac
`
