//go:build fakehw

package emulate

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/bmc/redfish"
	"github.com/better-compute/better-compute/ramdisk/agent/agenttest"
	"github.com/better-compute/better-compute/sdk/iso"
)

const autoinstallUserData = `#cloud-config
autoinstall:
  version: 1
  identity: { hostname: node-1 }
  late-commands:
    - curtin in-target -- sh -c "echo bcjt_installtoken > /etc/bcd/join-token && chmod 600 /etc/bcd/join-token"
    - curtin in-target -- systemctl enable bcd
`

// isoServer serves cidata ISOs as a site serves published artifacts.
func isoServer(t *testing.T, images map[string]map[string][]byte) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		files, ok := images[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if err := iso.Write(w, "cidata", files); err != nil {
			t.Errorf("iso.Write = %v", err)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// nodeAgents records the node agents the rack starts and when they stop.
type nodeAgents struct {
	started chan InstalledNode
	stopped chan string
}

func (n nodeAgents) run(ctx context.Context, in InstalledNode) error {
	n.started <- in
	<-ctx.Done()
	n.stopped <- in.Machine
	return nil
}

func bootFromCD(t *testing.T, d *redfish.Driver, action bmc.PowerAction) {
	t.Helper()
	ctx := context.Background()
	if err := d.SetBootDevice(ctx, bmc.BootCD, false); err != nil {
		t.Fatalf("SetBootDevice(cd) = %v", err)
	}
	if _, err := d.SetPower(ctx, action); err != nil {
		t.Fatalf("SetPower(%s) = %v", action, err)
	}
}

// TestRackInstallsFromVirtualMedia: a boot from cd with an autoinstall ISO
// inserted installs the OS and runs bcd node with the ISO's join token
// until the machine powers off; with the ISO ejected, cd falls through to
// the disk and no installer runs.
func TestRackInstallsFromVirtualMedia(t *testing.T) {
	t.Parallel()
	srv := isoServer(t, map[string]map[string][]byte{
		"/artifacts/a/autoinstall.iso": {"user-data": []byte(autoinstallUserData), "meta-data": []byte("instance-id: node_1\n")},
	})
	agents := nodeAgents{started: make(chan InstalledNode, 4), stopped: make(chan string, 4)}
	boot := newBootServer(t, agenttest.NewRelay(t), nil)
	r := startRack(t, Config{Machines: 1, Dir: t.TempDir(), BootURL: boot.srv.URL, DisksPerMachine: []int64{1 << 30},
		Password: "pw", NodeAgent: agents.run})
	m := r.Machines()[0]
	d := driver(t, m)
	if err := d.InsertMedia(context.Background(), srv.URL+"/artifacts/a/autoinstall.iso"); err != nil {
		t.Fatalf("InsertMedia = %v", err)
	}
	bootFromCD(t, d, bmc.PowerCycle)
	select {
	case n := <-agents.started:
		tok, err := os.ReadFile(n.JoinTokenPath())
		if string(tok) != "bcjt_installtoken\n" || n.Machine != m.Name || n.ProductUUID != m.ProductUUID {
			t.Errorf("node agent started with %+v, token file %q (%v), want %s's with the ISO's token", n, tok, err, m.Name)
		}
	case <-time.After(10 * time.Second):
		st, _ := r.State(m.Name)
		t.Fatalf("no node agent started after a cd boot with the ISO; state %+v", st)
	}
	st := waitState(t, r, m.Name, "the installed OS", func(s MachineState) bool { return s.BootedInto == BootedOS })
	if st.Installs != 1 || !st.OSImage || strings.Join(st.InstallTokens, ",") != "bcjt_installtoken" || st.RamdiskBoots != 0 || st.Media == "" {
		t.Errorf("state after the install = %+v, want one install of an image with the ISO's token, no ramdisk", st)
	}
	if _, err := d.SetPower(context.Background(), bmc.PowerOff); err != nil {
		t.Fatal(err)
	}
	select {
	case <-agents.stopped:
	case <-time.After(10 * time.Second):
		t.Fatalf("the node agent still runs after power off")
	}
	waitState(t, r, m.Name, "power off", func(s MachineState) bool { return s.BootedInto == BootedOff })
	if err := d.EjectMedia(context.Background()); err != nil {
		t.Fatalf("EjectMedia = %v", err)
	}
	bootFromCD(t, d, bmc.PowerOn)
	st = waitState(t, r, m.Name, "a disk boot", func(s MachineState) bool { return s.BootedInto == BootedOS })
	if st.Installs != 1 || st.NodeAgentRuns != 1 || st.Media != "" {
		t.Errorf("state after a cd boot with the media ejected = %+v, want no second install or node agent", st)
	}
}

// TestRackInstallFails: an ISO without user data, or user data writing no
// join token, or a URL that does not answer: the machine boots its disk,
// says why, and runs no node agent.
func TestRackInstallFails(t *testing.T) {
	t.Parallel()
	srv := isoServer(t, map[string]map[string][]byte{
		"/no-user-data.iso": {"meta-data": []byte("instance-id: x\n")},
		"/no-token.iso":     {"user-data": []byte("#cloud-config\nautoinstall:\n  version: 1\n")},
	})
	for path, want := range map[string]string{
		"/no-user-data.iso": "no cidata user-data",
		"/no-token.iso":     "writes no /etc/bcd/join-token",
		"/gone.iso":         "404",
	} {
		t.Run(path, func(t *testing.T) {
			t.Parallel()
			agents := nodeAgents{started: make(chan InstalledNode, 1), stopped: make(chan string, 1)}
			boot := newBootServer(t, agenttest.NewRelay(t), nil)
			r := startRack(t, Config{Machines: 1, Dir: t.TempDir(), BootURL: boot.srv.URL, DisksPerMachine: []int64{1 << 30},
				Password: "pw", NodeAgent: agents.run})
			m := r.Machines()[0]
			d := driver(t, m)
			if err := d.InsertMedia(context.Background(), srv.URL+path); err != nil {
				t.Fatalf("InsertMedia = %v", err)
			}
			bootFromCD(t, d, bmc.PowerOn)
			st := waitState(t, r, m.Name, "a disk boot", func(s MachineState) bool { return s.BootedInto == BootedOS })
			if !strings.Contains(st.LastError, want) || st.Installs != 0 || st.NodeAgentRuns != 0 || st.OSImage {
				t.Errorf("state after a cd boot from %s = %+v, want the error %q and no install", path, st, want)
			}
		})
	}
}

// The installed OS's first bytes are what hasImage sees, and what a wipe zeroes.
func TestWriteInstalledOS(t *testing.T) {
	r := startRack(t, Config{Machines: 1, Dir: t.TempDir(), BootURL: "http://127.0.0.1:1", DisksPerMachine: []int64{1 << 30}})
	dsk := r.machines[0].disks[0]
	if hasImage(dsk) {
		t.Fatalf("hasImage(new disk) = true")
	}
	if err := writeInstalledOS(dsk.Path, "emu-01"); err != nil {
		t.Fatal(err)
	}
	if !hasImage(dsk) {
		t.Errorf("hasImage after writeInstalledOS = false, want true")
	}
}
