package tserver

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// releaseLeaked closes this process's sockets listening on ports, except
// those in keep, and returns how many it closed. They are what a failed
// start of the Temporal server left behind: the server builds its services
// one after the other, each binding its gRPC port as it is built (history,
// matching, frontend, then worker), and a bind that fails panics out of the
// build, abandoning the services built before it with their listeners open
// and unreachable. A fixed frontend port (serve's 7233) stays taken by that
// leftover, so every later attempt would fail "already in use". keep holds
// what listened on ports before the attempt (listening): never the
// attempt's.
//
// Nothing serves those listeners (the server never started), so their file
// descriptors are taken over, not closed: /dev/null is duplicated onto each,
// which closes the socket, and the abandoned listener's own close, should it
// ever come, closes only that duplicate, never a descriptor opened since.
func releaseLeaked(ports []int, keep map[string]bool) (int, error) {
	socks, err := listening(ports)
	if err != nil || len(socks) == 0 {
		return 0, err
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, err
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		return 0, err
	}
	defer null.Close()
	n := 0
	for _, e := range fds {
		fd, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		link, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name()))
		if err != nil || !socks[link] || keep[link] {
			continue
		}
		if err := unix.Dup2(int(null.Fd()), fd); err != nil {
			return n, fmt.Errorf("release the listener of fd %d on ports %v: %w", fd, ports, err)
		}
		n++
	}
	return n, nil
}

// listening returns the sockets (any process's) listening on ports, named
// as the links of /proc/self/fd name them ("socket:[inode]").
func listening(ports []int) (map[string]bool, error) {
	const listen = "0A" // TCP_LISTEN in /proc/net/tcp's st column
	socks := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(f)
		sc.Scan() // the header
		for sc.Scan() {
			// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
			fields := strings.Fields(sc.Text())
			if len(fields) < 10 || fields[3] != listen {
				continue
			}
			_, hexPort, ok := strings.Cut(fields[1], ":")
			if p, err := strconv.ParseUint(hexPort, 16, 16); !ok || err != nil || !slices.Contains(ports, int(p)) {
				continue
			}
			socks["socket:["+fields[9]+"]"] = true
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return nil, err
		}
	}
	return socks, nil
}
