//go:build fakehw

package emulate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/attest"
	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/bmc/redfish"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/ramdisk/agent"
	"github.com/better-compute/better-compute/ramdisk/agent/agenttest"
)

// bootServer answers /ipxe like the site agent: a ramdisk script for the
// MACs it has entries for, "exit" for the others; it serves an image too.
type bootServer struct {
	srv   *httptest.Server
	relay *agenttest.Relay
	image []byte

	mu      sync.Mutex
	entries map[string]string // MAC → node id
	fetches map[string]int
}

func newBootServer(t *testing.T, relay *agenttest.Relay, image []byte) *bootServer {
	b := &bootServer{relay: relay, image: image, entries: map[string]string{}, fetches: map[string]int{}}
	b.srv = httptest.NewServer(http.HandlerFunc(b.serve))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *bootServer) serve(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/cache/img":
		w.Write(b.image)
		return
	case "/ipxe":
	default:
		http.NotFound(w, r)
		return
	}
	mac := r.URL.Query().Get("mac")
	b.mu.Lock()
	node, ok := b.entries[mac]
	b.fetches[mac]++
	b.mu.Unlock()
	if !ok {
		fmt.Fprint(w, "#!ipxe\nexit\n")
		return
	}
	fmt.Fprintf(w, "#!ipxe\nkernel %s/ramdisk/vmlinuz %s\ninitrd %s/ramdisk/initrd.img\nboot\n", b.srv.URL, b.relay.Cmdline(node, ""), b.srv.URL)
}

func (b *bootServer) add(mac, node string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.entries[mac] = node
}

func startRack(t *testing.T, cfg Config) *Rack {
	t.Helper()
	r, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("Start() = %v", err)
	}
	t.Cleanup(r.Close)
	return r
}

func driver(t *testing.T, m MachineInfo) *redfish.Driver {
	t.Helper()
	addr, err := bmc.ParseAddress(m.BMCDriver, m.BMCAddress)
	if err != nil {
		t.Fatalf("ParseAddress(%q) = %v", m.BMCAddress, err)
	}
	d, err := redfish.New(redfish.Config{Address: addr, Credentials: bmc.Credentials{Username: m.BMCUsername, Password: "pw"}, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("redfish.New() = %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func pxeBoot(t *testing.T, d *redfish.Driver) {
	t.Helper()
	ctx := context.Background()
	if err := d.SetBootDevice(ctx, bmc.BootPXE, false); err != nil {
		t.Fatalf("SetBootDevice(pxe) = %v", err)
	}
	if _, err := d.SetPower(ctx, bmc.PowerReset); err != nil {
		t.Fatalf("SetPower(reset) = %v", err)
	}
}

func waitState(t *testing.T, r *Rack, name, what string, cond func(MachineState) bool) MachineState {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := r.State(name)
		if err != nil {
			t.Fatal(err)
		}
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: timed out waiting for %s; state %+v", name, what, s)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func send(t *testing.T, relay *agenttest.Relay, node, kind string, in any) kinds.Result {
	t.Helper()
	b, _ := json.Marshal(in)
	id := ids.New(ids.Command)
	relay.Send(kinds.Command{ID: id, NodeID: node, Kind: kind, Payload: b})
	res := relay.WaitResult(t, id, 1)
	if !res.OK {
		t.Fatalf("%s = %s %s", kind, res.ErrorKind, res.Error)
	}
	return res
}

// wipe runs a quick disk.wipe and counts the attestations and the verified ones.
func wipe(t *testing.T, relay *agenttest.Relay, node string) (n, verified int) {
	t.Helper()
	var signed []attest.Signed
	json.Unmarshal(send(t, relay, node, kinds.DiskWipe, kinds.WipeInput{Mode: "quick", Nonce: "n1"}).Payload, &signed)
	for _, s := range signed {
		var a attest.WipeAttestation
		json.Unmarshal(s.Payload, &a)
		if a.Verified {
			verified++
		}
	}
	return len(signed), verified
}

// A machine driven through its BMC PXE-boots the site's ramdisk, which
// joins, inventories, wipes (one disk faulted), deploys and kexecs; power
// off stops it; the other machine stays off.
func TestRackLifecycle(t *testing.T) {
	t.Parallel()
	image := bytes.Repeat([]byte("better-compute emulated OS image "), 1<<16)
	relay := agenttest.NewRelay(t)
	boot := newBootServer(t, relay, image)
	r := startRack(t, Config{Machines: 2, Dir: t.TempDir(), BootURL: boot.srv.URL, Username: "admin", Password: "pw"})
	ms := r.Machines()
	if len(ms) != 2 || ms[0].BMCDriver != "redfish" || !strings.HasPrefix(ms[0].MACs[0], "52:54:00:") || ms[0].ProductUUID == "" {
		t.Fatalf("Machines() = %+v, want 2 redfish machines with 52:54:00 MACs", ms)
	}
	m := ms[0]
	node := ids.New(ids.Node)
	boot.add(m.MACs[0], node)
	d := driver(t, m)
	pxeBoot(t, d)

	relay.WaitFor(t, 10*time.Second, "the ramdisk's join", func() bool { return len(relay.Joins()) == 1 })
	st := waitState(t, r, m.Name, "the ramdisk", func(s MachineState) bool { return s.BootedInto == BootedRamdisk })
	if st.RamdiskBoots != 1 || len(st.Tokens) != 1 || st.Tokens[0] != relay.Joins()[0].Token || st.Power != "on" {
		t.Errorf("state after PXE boot = %+v, want on, one ramdisk boot with the joined token", st)
	}

	var inv agent.Inventory
	json.Unmarshal(send(t, relay, node, kinds.InventoryRefresh, nil).Payload, &inv)
	macs := []string{inv.NICs[0].MAC, inv.NICs[1].MAC}
	if len(inv.Disks) != 2 || inv.ProductUUID != m.ProductUUID || fmt.Sprint(macs) != fmt.Sprint(m.MACs) || inv.Disks[0].SizeBytes+inv.Disks[1].SizeBytes < 17<<40 {
		t.Errorf("inventory.refresh = %+v, want 2 disks of 2 and 16 TiB, the machine's MACs and UUID", inv)
	}

	if err := r.InjectWipeFault(m.Name); err != nil {
		t.Fatal(err)
	}
	if n, verified := wipe(t, relay, node); n != 2 || verified != 1 {
		t.Errorf("disk.wipe with a faulted disk = %d attestations, %d verified; want 2, 1", n, verified)
	}

	sum := sha256.Sum256(image)
	send(t, relay, node, kinds.DeployImage, kinds.DeployImageInput{Path: "/cache/img", Digest: "sha256:" + hex.EncodeToString(sum[:])})
	send(t, relay, node, kinds.BootKexec, kinds.KexecInput{})
	st = waitState(t, r, m.Name, "the OS", func(s MachineState) bool { return s.BootedInto == BootedOS })
	if !st.Kexeced || !st.OSImage {
		t.Errorf("state after kexec = %+v, want the OS with an image, through kexec", st)
	}

	if _, err := d.SetPower(context.Background(), bmc.PowerOff); err != nil {
		t.Fatal(err)
	}
	waitState(t, r, m.Name, "power off", func(s MachineState) bool { return s.BootedInto == BootedOff && s.Power == "off" })
	pxeBoot(t, d)
	st = waitState(t, r, m.Name, "a second ramdisk", func(s MachineState) bool { return s.RamdiskBoots == 2 })
	if st.Tokens[0] == st.Tokens[1] {
		t.Errorf("second boot reused the token")
	}
	relay.WaitFor(t, 10*time.Second, "the second join", func() bool { return len(relay.Joins()) == 2 })

	if other, _ := r.State(ms[1].Name); other.BootedInto != BootedOff || other.RamdiskBoots != 0 || other.BMCCalls != nil || other.RamdiskRan != nil {
		t.Errorf("untouched machine state = %+v, want off, sent nothing", other)
	}
	// What the machine was sent: a reset of a machine that is off is an On.
	st, _ = r.State(m.Name)
	wantCalls := []string{"boot:Pxe/Once", "power:On", "power:ForceOff", "boot:Pxe/Once", "power:On"}
	if diff := cmp.Diff(wantCalls, st.BMCCalls); diff != "" {
		t.Errorf("State().BMCCalls (-want +got):\n%s", diff)
	}
	wantRan := []string{kinds.InventoryRefresh, kinds.DiskWipe, kinds.DeployImage, kinds.BootKexec}
	if diff := cmp.Diff(wantRan, st.RamdiskRan); diff != "" {
		t.Errorf("State().RamdiskRan (-want +got):\n%s", diff)
	}
}

// A machine with no boot entry is told to boot locally and runs its
// (empty) disk; booting from disk does not fetch a script.
func TestRackBootsLocally(t *testing.T) {
	t.Parallel()
	relay := agenttest.NewRelay(t)
	boot := newBootServer(t, relay, nil)
	r := startRack(t, Config{Machines: 1, Dir: t.TempDir(), BootURL: boot.srv.URL, DisksPerMachine: []int64{1 << 30}, Password: "pw"})
	m := r.Machines()[0]
	d := driver(t, m)
	pxeBoot(t, d)
	st := waitState(t, r, m.Name, "a local boot", func(s MachineState) bool { return s.BootedInto == BootedOS })
	if st.OSImage || st.Kexeced || st.RamdiskBoots != 0 {
		t.Errorf("state after exit script = %+v, want an OS boot with no image", st)
	}
	boot.mu.Lock()
	n := boot.fetches[m.MACs[0]]
	boot.mu.Unlock()
	if n != 1 {
		t.Errorf("script fetched %d times, want 1", n)
	}
}

// Run prints the machines as JSON; a second run on the same Dir keeps
// their identities.
func TestRunPrintsMachines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runOnce := func() []MachineInfo {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		var out bytes.Buffer
		if err := Run(ctx, Config{Machines: 2, Dir: dir, BootURL: "http://127.0.0.1:1"}, &out); err != nil {
			t.Fatalf("Run() = %v", err)
		}
		var got struct{ Machines []MachineInfo }
		if err := json.Unmarshal(out.Bytes(), &got); err != nil || len(got.Machines) != 2 {
			t.Fatalf("Run() printed %q (%v), want 2 machines", out.String(), err)
		}
		return got.Machines
	}
	a, b := runOnce(), runOnce()
	for i := range a {
		if a[i].ProductUUID != b[i].ProductUUID || fmt.Sprint(a[i].MACs) != fmt.Sprint(b[i].MACs) || a[i].BMCUsername != "admin" {
			t.Errorf("machine %d: first run %+v, second %+v; want the same identity", i, a[i], b[i])
		}
	}
}
