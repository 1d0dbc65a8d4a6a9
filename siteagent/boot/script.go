package boot

import (
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/ramdisk/initramfs"
)

// Params are what a ramdisk script needs besides the entry.
type Params struct {
	BootURL       string // http://host:port of this agent's boot listener
	RelayURL      string // https://host:port of this agent's relay
	CAFingerprint string // sha256 hex of the CA certificate's DER
}

// Ramdisk files served under /ramdisk/: the names `task ramdisk` writes.
const (
	Kernel = initramfs.KernelFile
	Initrd = initramfs.InitrdFile
)

// Script returns the iPXE script for entry; nil or a local-boot entry exits
// to the next boot device. The ramdisk's kernel line carries bc.site (the
// relay), bc.node, bc.token (the discovery token), bc.ca (the CA's SHA-256),
// bc.boot (this boot listener, where deploy.image fetches cached images)
// and BOOTIF (pxelinux's form of the MAC iPXE booted from, which iPXE
// fills in: the ramdisk brings that interface up by DHCP).
func Script(e *kinds.BootEntry, p Params) string {
	if e == nil || !e.Ramdisk {
		reason := "no boot entry for this machine"
		if e != nil {
			reason = "booting " + e.NodeID + " from its local disk"
		}
		return "#!ipxe\necho better-compute: " + reason + "\nexit\n"
	}
	return fmt.Sprintf("#!ipxe\n"+
		"echo better-compute: booting the ramdisk for %[3]s\n"+
		"kernel %[1]s/ramdisk/%[3]s/%[6]s initrd=%[7]s bc.site=%[2]s bc.node=%[3]s bc.token=%[4]s bc.ca=%[5]s bc.boot=%[1]s BOOTIF=01-${netX/mac:hexhyp} console=ttyS0\n"+
		"initrd %[1]s/ramdisk/%[3]s/%[7]s\n"+
		"boot\n", p.BootURL, p.RelayURL, e.NodeID, e.DiscoveryToken, p.CAFingerprint, Kernel, Initrd)
}

// validEntry checks and normalizes e. Everything that lands on a kernel
// command line must be a plain word.
func validEntry(e *kinds.BootEntry) error {
	if !plainWord(e.NodeID) {
		return errs.Invalid("nodeId", "node id %q is empty or not a plain word", e.NodeID)
	}
	if len(e.MACs) == 0 {
		return errs.Invalid("macs", "a boot entry needs at least one MAC")
	}
	macs := make([]string, 0, len(e.MACs))
	for _, m := range e.MACs {
		n, err := bmc.ParseMAC("mac", m)
		if err != nil {
			return err
		}
		if !slices.Contains(macs, n) {
			macs = append(macs, n)
		}
	}
	e.MACs = macs
	if e.Ramdisk && !plainWord(e.DiscoveryToken) {
		return errs.Invalid("discoveryToken", "a ramdisk boot entry needs a discovery token made of letters, digits, '_' and '-'")
	}
	if !e.Ramdisk {
		e.DiscoveryToken = ""
	}
	return nil
}

func plainWord(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// Handler serves GET /ipxe?mac=…[&uuid=…] (the machine's script; an unknown
// MAC is recorded as a discovery, with the UUID when given) and GET /ramdisk/{vmlinuz,initrd.img} from
// ramdiskDir.
func (t *Table) Handler(p Params, ramdiskDir string) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ipxe", func(w http.ResponseWriter, r *http.Request) { t.serveScript(w, r, p) })
	mux.HandleFunc("GET /ramdisk/{name}", func(w http.ResponseWriter, r *http.Request) { serveRamdisk(w, r, ramdiskDir) })
	// The scripts fetch /ramdisk/{node}/{name}: the node's boot trail
	// records each fetch and how it was answered.
	mux.HandleFunc("GET /ramdisk/{node}/{name}", func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		serveRamdisk(sw, r, ramdiskDir)
		milestone := map[string]string{Kernel: MilestoneKernel, Initrd: MilestoneInitrd}[r.PathValue("name")]
		if milestone != "" {
			t.Mark(r.PathValue("node"), milestone, "HTTP "+strconv.Itoa(sw.status))
		}
	})
	return mux
}

// statusWriter remembers the status a handler answered with.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (t *Table) serveScript(w http.ResponseWriter, r *http.Request, p Params) {
	mac, err := bmc.ParseMAC("mac", r.URL.Query().Get("mac"))
	if err != nil {
		http.Error(w, "better-compute: give the machine's MAC, /ipxe?mac=${net0/mac}", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	e, ok := t.Lookup(mac)
	if !ok {
		if err := t.Discovered(Discovery{MAC: mac, ClientUUID: queryUUID(r)}); err != nil {
			t.log.Error("cannot record a PXE discovery", "mac", mac, "err", err)
		}
		t.log.Info("unknown MAC PXE-booted; told to boot locally", "mac", mac)
		_, _ = w.Write([]byte(Script(nil, p)))
		return
	}
	t.log.Info("boot script served", "mac", mac, "node", e.NodeID, "ramdisk", e.Ramdisk)
	t.Mark(e.NodeID, MilestoneScript, "")
	_, _ = w.Write([]byte(Script(&e, p)))
}

func serveRamdisk(w http.ResponseWriter, r *http.Request, dir string) {
	name := r.PathValue("name")
	if name != Kernel && name != Initrd {
		http.Error(w, "better-compute: the ramdisk has only "+Kernel+" and "+Initrd, http.StatusNotFound)
		return
	}
	if dir == "" {
		http.Error(w, "better-compute: this site agent serves no ramdisk; start it with a ramdisk dir holding "+Kernel+" and "+Initrd, http.StatusNotFound)
		return
	}
	f, err := os.Open(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		http.Error(w, "better-compute: "+filepath.Join(dir, name)+" does not exist; put the ramdisk's "+Kernel+" and "+Initrd+" there", http.StatusNotFound)
		return
	}
	if err != nil {
		http.Error(w, "better-compute: cannot open "+name, http.StatusInternalServerError)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		http.Error(w, "better-compute: "+name+" is not a regular file", http.StatusInternalServerError)
		return
	}
	http.ServeContent(w, r, name, st.ModTime(), f)
}

// queryUUID is the uuid parameter of a script request, lowercase: the
// machine's UUID, as DHCP option 97 carries it, for a DHCP server that
// chains iPXE to /ipxe?mac=${net0/mac}&uuid=${uuid} when this agent runs
// no proxy DHCP (and for the emulated rack). Anything but a UUID is
// ignored: the machine still gets its script.
func queryUUID(r *http.Request) string {
	u := strings.ToLower(r.URL.Query().Get("uuid"))
	if len(u) != 36 {
		return ""
	}
	for i, c := range u {
		dash := i == 8 || i == 13 || i == 18 || i == 23
		if dash != (c == '-') || !dash && !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return ""
		}
	}
	return u
}
