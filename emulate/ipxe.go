package emulate

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/better-compute/better-compute/errs"
)

// script is what an iPXE script asks of the machine.
type script struct {
	Kernel  string // the kernel URL; "" means boot from the next device
	Cmdline string // the kernel's arguments
	Initrd  string // the initrd URL, if any
}

// bootURL is the scheme and host of the kernel URL: the site's boot listener.
func (s script) bootURL() string {
	u, err := url.Parse(s.Kernel)
	if err != nil || u.Host == "" {
		return ""
	}
	return u.Scheme + "://" + u.Host
}

// fetchScript does what iPXE does after DHCP: GET
// <bootURL>/ipxe?mac=<mac>&uuid=<uuid>, the machine's UUID standing for the
// DHCP option 97 a real one sends, which the site records for an unknown MAC.
func fetchScript(ctx context.Context, client *http.Client, bootURL, mac, uuid string) (script, error) {
	q := url.Values{"mac": {mac}, "uuid": {uuid}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(bootURL, "/")+"/ipxe?"+q.Encode(), nil)
	if err != nil {
		return script{}, errs.Invalid("bootUrl", "%q is not a URL: %v", bootURL, err)
	}
	resp, err := client.Do(req)
	if err != nil {
		return script{}, errs.Wrap(errs.Unavailable, err, "fetch the iPXE script")
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return script{}, errs.Wrap(errs.Unavailable, err, "read the iPXE script")
	}
	if resp.StatusCode != http.StatusOK {
		return script{}, errs.New(errs.DriverError, "the boot server answered %d to the iPXE script request", resp.StatusCode)
	}
	return parseScript(string(b))
}

// parseScript reads an iPXE script: it must start with #!ipxe; the last
// kernel (or chain/imgexec) line names the kernel and its arguments, an
// initrd line the initrd. Comments and other commands are ignored.
func parseScript(s string) (script, error) {
	sc := bufio.NewScanner(strings.NewReader(s))
	first := true
	var out script
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if first {
			if line != "#!ipxe" {
				return script{}, errs.New(errs.DriverError, "the boot server's answer is not an iPXE script (no #!ipxe line)")
			}
			first = false
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 || strings.HasPrefix(line, "#") {
			continue
		}
		args := skipOptions(fields[1:])
		if len(args) == 0 {
			continue
		}
		switch fields[0] {
		case "kernel", "chain", "imgexec":
			out.Kernel, out.Cmdline = args[0], strings.Join(args[1:], " ")
		case "initrd":
			out.Initrd = args[0]
		}
	}
	if first {
		return script{}, errs.New(errs.DriverError, "the boot server sent an empty iPXE script")
	}
	return out, nil
}

// skipOptions drops the image commands' options: --name/-n and --timeout/-t
// take a value, the others (--autofree, --replace, …) do not.
func skipOptions(args []string) []string {
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "--name", "-n", "--timeout", "-t":
			args = args[min(2, len(args)):]
		default:
			args = args[1:]
		}
	}
	return args
}
