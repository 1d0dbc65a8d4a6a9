//go:build fakehw

package demo_test

import (
	"bytes"
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/cli"
	"github.com/better-compute/better-compute/demo"
	"github.com/better-compute/better-compute/emulate"
	"github.com/better-compute/better-compute/store"
)

const pxeBMCPassword = "pxe-bmc-password"

// What a machine enrolled by product UUID only is sent: ensureRamdisk
// (BMC read, no boot entry, PXE once, power cycle), then, once it has its
// MAC, the enrollment as usual from the ramdisk boot on.
var (
	discoveryKinds = []string{"bmc.inspect", "boot.clearEntry", "management.setBootDevice", "power.setPower"}
	afterMACKinds  = []string{"boot.setEntry", "management.setBootDevice", "power.setPower", "inventory.refresh",
		"disk.wipe", "power.setPower", "boot.clearEntry"}
)

// TestPXEDiscovery: machines whose BMCs report no MAC (as IPMI) are
// enrolled by product UUID only. One, on the demo's pool, PXE-boots, shows
// up in `metal discovered` as the node's candidate, waits with nothing
// more sent until `metal confirm-mac` (a MAC it never booted from is
// refused), then reaches ready; the other, on a pool that trusts its
// provisioning network, reaches ready with no confirmation.
func TestPXEDiscovery(t *testing.T) {
	d := start(t, 1)
	ctx := ctxFor(t, 6*time.Minute)
	rack, err := emulate.Start(ctx, emulate.Config{Machines: 2, Dir: t.TempDir(), BootURL: d.Agent.BootURL(),
		DisksPerMachine: []int64{1 << 30}, Password: pxeBMCPassword, BMCsHideMACs: true})
	if err != nil {
		t.Fatalf("emulate.Start = %v", err)
	}
	t.Cleanup(rack.Close)
	trusted, err := d.API.Pools.Create(ctx, connect.NewRequest(&v1.CreatePoolRequest{SiteId: d.SiteID, Class: "metal-host",
		Policy: &v1.PoolPolicy{HardwareProfile: "emulated-redfish", TrustProvisioningNetwork: true}}))
	if err != nil {
		t.Fatalf("pools.create(trustProvisioningNetwork) = %v", err)
	}
	m, mt := rack.Machines()[0], rack.Machines()[1]
	id := enrollByUUID(ctx, t, d, m, d.PoolID)
	trustedID := enrollByUUID(ctx, t, d, mt, trusted.Msg.Pool.Id)

	n := waitFor(ctx, t, d, id, func(n *v1.Node) bool { return n.WaitingFor == store.WaitMACConfirmation })
	if n.MacCandidate != m.MACs[0] || n.State != "inspecting" || len(n.Macs) != 0 {
		t.Fatalf("metal get while waiting = state %s macCandidate %q macs %v; want inspecting, %s, none", n.State,
			n.MacCandidate, n.Macs, m.MACs[0])
	}
	var seen v1.DiscoveredResponse
	runCLI(t, d, 0, &seen, "metal", "discovered", "--site", d.SiteID, "-o", "json")
	if got := discoveryOf(seen.Items, m.MACs[0]); got == nil || got.ClientUuid != m.ProductUUID || got.CandidateFor != id {
		t.Errorf("metal discovered = %v, want %s under UUID %s as the candidate of %s", seen.Items, m.MACs[0], m.ProductUUID, id)
	}
	time.Sleep(3 * time.Second) // while it waits, nothing more is sent
	if got := kindsOf(commands(t, d, id)); !cmp.Equal(got, discoveryKinds) {
		t.Errorf("commands while waiting for the confirmation = %v, want %v", got, discoveryKinds)
	}
	if st, _ := rack.State(m.Name); st.RamdiskBoots != 0 {
		t.Errorf("%s booted the ramdisk %d times before its MAC was confirmed, want 0", m.Name, st.RamdiskBoots)
	}
	runCLI(t, d, 2, nil, "metal", "confirm-mac", id, "--mac", m.MACs[1]) // never PXE-booted: INVALID_INPUT
	runCLI(t, d, 0, nil, "metal", "confirm-mac", id, "--mac", m.MACs[0])

	for node, name := range map[string]string{id: m.Name, trustedID: mt.Name} {
		if err := d.Wait(ctx, name, node, "ready", 3*time.Minute); err != nil {
			t.Fatalf("Wait(%s, ready) = %v", name, err)
		}
	}
	for _, c := range []struct {
		node string
		m    emulate.MachineInfo
	}{{id, m}, {trustedID, mt}} {
		n := node(t, d, c.node)
		if !cmp.Equal(n.Macs, c.m.MACs[:1]) || n.WaitingFor != "" || n.MacCandidate != "" {
			t.Errorf("%s at ready = macs %v waitingFor %q candidate %q; want [%s] and no wait", c.m.Name, n.Macs,
				n.WaitingFor, n.MacCandidate, c.m.MACs[0])
		}
		if got, want := kindsOf(commands(t, d, c.node)), concat(discoveryKinds, afterMACKinds); !cmp.Equal(got, want) {
			t.Errorf("commands of %s = %v, want %v", c.m.Name, got, want)
		}
	}
	runCLI(t, d, 0, &seen, "metal", "discovered", "--site", d.SiteID, "-o", "json")
	if got := discoveryOf(seen.Items, m.MACs[0]); got == nil || got.NodeId != id || got.CandidateFor != "" {
		t.Errorf("metal discovered after the confirmation = %v, want %s owned by %s", got, m.MACs[0], id)
	}
}

// enrollByUUID enrolls m by its BMC and product UUID, with no MAC.
func enrollByUUID(ctx context.Context, t *testing.T, d *demo.Demo, m emulate.MachineInfo, pool string) string {
	t.Helper()
	r, err := d.API.Metal.Enroll(ctx, connect.NewRequest(&v1.EnrollRequest{SiteId: d.SiteID, PoolId: pool,
		ProductUuid: m.ProductUUID, Bmc: &v1.Bmc{Address: m.BMCAddress, Driver: m.BMCDriver,
			Credentials: &v1.BmcCredentials{Username: m.BMCUsername, Password: pxeBMCPassword}}}))
	if err != nil {
		t.Fatalf("metal.enroll(%s by product UUID) = %v", m.Name, err)
	}
	return r.Msg.Node.Id
}

// waitFor polls the node until ok, failing the test if it fails first.
func waitFor(ctx context.Context, t *testing.T, d *demo.Demo, id string, ok func(*v1.Node) bool) *v1.Node {
	t.Helper()
	for {
		n := node(t, d, id)
		switch {
		case ok(n):
			return n
		case n.State == "failed":
			t.Fatalf("node %s failed from %s: %s", id, n.FailedFrom, n.LastError)
		case ctx.Err() != nil:
			t.Fatalf("node %s = %+v, still not as wanted", id, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// runCLI runs the CLI against the demo's API as root and decodes its JSON
// output into out, if given; it must exit with code. It returns what the
// CLI wrote to stderr.
func runCLI(t *testing.T, d *demo.Demo, code int, out proto.Message, args ...string) string {
	t.Helper()
	tok, err := os.ReadFile(d.CP.RootTokenPath())
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	full := append([]string{"better-compute", "--url", d.CP.APIURL(), "--token", strings.TrimSpace(string(tok)), "--tenant", "root"}, args...)
	if got := cli.Main(context.Background(), full, &stdout, &stderr); got != code {
		t.Fatalf("better-compute %s = %d (stderr %q), want %d", strings.Join(args, " "), got, stderr.String(), code)
	}
	if out != nil {
		if err := protojson.Unmarshal(stdout.Bytes(), out); err != nil {
			t.Fatalf("better-compute %s printed %q: %v", strings.Join(args, " "), stdout.String(), err)
		}
	}
	return stderr.String()
}

func discoveryOf(items []*v1.PxeDiscovery, mac string) *v1.PxeDiscovery {
	for _, it := range items {
		if it.Mac == mac {
			return it
		}
	}
	return nil
}

func kindsOf(cmds []*v1.Command) []string {
	var out []string
	for _, c := range cmds {
		out = append(out, c.Kind)
	}
	return out
}
