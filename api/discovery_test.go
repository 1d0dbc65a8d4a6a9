package api_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/types/known/timestamppb"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/store"
)

const (
	discUUID = "8f2c6a2e-0000-4000-8000-0000000000aa"
	discMAC  = "52:54:00:00:00:aa"
	otherMAC = "52:54:00:00:00:bb"
)

// metalAs is the Metal API as the holder of tok calls it.
func (e *env) metalAs(tok string) bettercomputev1connect.MetalServiceClient {
	bearer := connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			req.Header().Set("Authorization", "Bearer "+tok)
			return next(ctx, req)
		}
	})
	return bettercomputev1connect.NewMetalServiceClient(http.DefaultClient, e.url, connect.WithProtoJSON(), connect.WithInterceptors(bearer))
}

// siteAgent returns the Discoveries service as the agent of site calls it.
func (a *agentsEnv) siteAgent(t *testing.T, site string) bettercomputev1connect.DiscoveriesServiceClient {
	t.Helper()
	key, _, _ := pki.NewEd25519Key()
	pem, err := a.ca.Issue(key.Public(), pki.RoleSite, site, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return bettercomputev1connect.NewDiscoveriesServiceClient(a.client(t, pem, key), a.url)
}

func seen(mac, uuid string, count int64) *v1.DiscoverySighting {
	t0 := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	return &v1.DiscoverySighting{Mac: mac, ClientUuid: uuid, Arch: "EFI x86-64", FirstSeen: timestamppb.New(t0),
		LastSeen: timestamppb.New(t0.Add(time.Duration(count) * time.Second)), Count: count}
}

// TestReportAndListDiscoveries: only a site agent reports, for its own
// site, and a report with a bad item records nothing; `metal discovered`
// lists the site's discoveries to its own tenant only.
func TestReportAndListDiscoveries(t *testing.T) {
	t.Parallel()
	a := newAgentsEnv(t)
	ctx := context.Background()
	report := func(c bettercomputev1connect.DiscoveriesServiceClient, items ...*v1.DiscoverySighting) error {
		_, err := c.Report(ctx, connect.NewRequest(&v1.ReportDiscoveriesRequest{Items: items}))
		return err
	}
	anon := bettercomputev1connect.NewDiscoveriesServiceClient(a.client(t, nil, nil), a.url)
	if err := report(anon, seen(discMAC, discUUID, 1)); kind(err) != "UNAUTHENTICATED" {
		t.Errorf("Report without a certificate = %v, want UNAUTHENTICATED", err)
	}
	agent := a.siteAgent(t, a.site)
	late := seen(otherMAC, "", 2)
	late.FirstSeen = timestamppb.New(late.LastSeen.AsTime().Add(time.Second))
	for name, bad := range map[string]*v1.DiscoverySighting{
		"a bad MAC": seen("52:54:00", discUUID, 1), "a bad UUID": seen(otherMAC, "not-a-uuid", 1),
		"no count": seen(otherMAC, "", 0), "first after last": late,
	} {
		if err := report(agent, seen(discMAC, discUUID, 1), bad); kind(err) != "INVALID_INPUT" {
			t.Errorf("Report(%s) = %v, want INVALID_INPUT", name, err)
		}
	}
	if err := report(agent, make([]*v1.DiscoverySighting, store.MaxDiscoveryReport+1)...); kind(err) != "INVALID_INPUT" {
		t.Errorf("Report(%d items) = %v, want INVALID_INPUT", store.MaxDiscoveryReport+1, err)
	}
	list := func(tok string) ([]*v1.PxeDiscovery, error) {
		r, err := a.metalAs(tok).Discovered(ctx, connect.NewRequest(&v1.DiscoveredRequest{SiteId: a.site}))
		if err != nil {
			return nil, err
		}
		return r.Msg.Items, nil
	}
	if got, err := list(a.root); err != nil || len(got) != 0 {
		t.Fatalf("Discovered after refused reports = %v, %v; want none", got, err)
	}
	upper := seen(discMAC, strings.ToUpper(discUUID), 3)
	upper.Mac = strings.ToUpper(discMAC)
	for range 2 { // an agent resends what was not acknowledged
		if err := report(agent, upper); err != nil {
			t.Fatalf("Report = %v", err)
		}
	}
	got, err := list(a.root)
	if err != nil || len(got) != 1 {
		t.Fatalf("Discovered = %v, %v; want one", got, err)
	}
	want := &v1.PxeDiscovery{SiteId: a.site, Mac: discMAC, ClientUuid: discUUID, Arch: "EFI x86-64", FirstSeen: upper.FirstSeen,
		LastSeen: upper.LastSeen, Count: 3}
	if !cmp.Equal(want.String(), got[0].String()) {
		t.Errorf("Discovered = %v, want %v", got[0], want)
	}
	if _, err := list(a.acme); kind(err) != "NOT_FOUND" {
		t.Errorf("Discovered(root's site) as acme = %v, want NOT_FOUND", err)
	}
	if _, err := a.metalAs(a.root).Discovered(ctx, connect.NewRequest(&v1.DiscoveredRequest{SiteId: "pool_x"})); kind(err) != "INVALID_INPUT" {
		t.Errorf("Discovered(pool_x) = %v, want INVALID_INPUT", err)
	}
}

// TestConfirmMac: metal.confirmMac binds a discovered MAC to a node waiting
// for one, which metal.get shows until then; a MAC another node has, a MAC
// never seen, a node of another tenant or a node not waiting is refused
// and changes nothing.
func TestConfirmMac(t *testing.T) {
	t.Parallel()
	a := newAgentsEnv(t)
	ctx := context.Background()
	pool, err := a.store.CreatePool(ctx, store.Pool{TenantID: "root", SiteID: a.site, Class: "metal-host", Agent: "bcd"})
	if err != nil {
		t.Fatal(err)
	}
	node := func(uuid string, macs ...string) string { // one node per machine: each its own UUID
		id := ids.New(ids.Node)
		if _, err := a.store.CreateNode(ctx, store.Node{ID: id, TenantID: "root", SiteID: a.site, PoolID: pool.ID, MACs: macs,
			ProductUUID: uuid, BMCAddress: "10.0.0." + id[len(id)-3:], BMCDriver: "ipmi", BMCCredentialsRef: "env://BMC"}); err != nil {
			t.Fatal(err)
		}
		return id
	}
	waiting, owner := node(discUUID), node("8f2c6a2e-1111-4000-8000-0000000000ff", otherMAC)
	if _, err := a.siteAgent(t, a.site).Report(ctx, connect.NewRequest(&v1.ReportDiscoveriesRequest{
		Items: []*v1.DiscoverySighting{seen(discMAC, discUUID, 1), seen(otherMAC, "", 1)}})); err != nil {
		t.Fatal(err)
	}
	metal := a.metalAs(a.root)
	get := func() *v1.Node {
		t.Helper()
		r, err := metal.Get(ctx, connect.NewRequest(&v1.GetNodeRequest{Id: waiting}))
		if err != nil {
			t.Fatal(err)
		}
		return r.Msg.Node
	}
	confirm := func(c bettercomputev1connect.MetalServiceClient, mac string) error {
		_, err := c.ConfirmMac(ctx, connect.NewRequest(&v1.ConfirmMacRequest{NodeId: waiting, Mac: mac}))
		return err
	}
	if err := confirm(metal, discMAC); kind(err) != "INVALID_STATE" {
		t.Errorf("ConfirmMac(a node not waiting) = %v, want INVALID_STATE", err)
	}
	if _, err := a.store.BeginMACWait(ctx, "root", waiting); err != nil {
		t.Fatal(err)
	}
	if err := a.store.AwaitConfirmation(ctx, "root", waiting, discMAC); err != nil {
		t.Fatal(err)
	}
	if n := get(); n.WaitingFor != store.WaitMACConfirmation || n.MacCandidate != discMAC {
		t.Errorf("metal.get while waiting = waitingFor %q macCandidate %q, want %s, %s", n.WaitingFor, n.MacCandidate,
			store.WaitMACConfirmation, discMAC)
	}
	for _, tc := range []struct {
		what, mac, kind, mention string
		as                       bettercomputev1connect.MetalServiceClient
	}{
		{"another node's MAC", otherMAC, "ALREADY_EXISTS", owner, metal},
		{"a MAC never seen", "52:54:00:00:00:cc", "INVALID_INPUT", "never seen", metal},
		{"not a MAC", "52:54", "INVALID_INPUT", "MAC", metal},
		{"a node of another tenant", discMAC, "NOT_FOUND", waiting, a.metalAs(a.acme)},
	} {
		err := confirm(tc.as, tc.mac)
		if kind(err) != tc.kind || !strings.Contains(err.Error(), tc.mention) {
			t.Errorf("ConfirmMac(%s) = %v, want %s mentioning %s", tc.what, err, tc.kind, tc.mention)
		}
		if n := get(); len(n.Macs) != 0 || n.WaitingFor != store.WaitMACConfirmation || n.MacCandidate != discMAC {
			t.Errorf("node after ConfirmMac(%s) = macs %v waitingFor %q candidate %q: want it unchanged", tc.what, n.Macs,
				n.WaitingFor, n.MacCandidate)
		}
	}
	if err := confirm(metal, strings.ToUpper(discMAC)); err != nil {
		t.Fatalf("ConfirmMac(the candidate) = %v", err)
	}
	if n := get(); !cmp.Equal(n.Macs, []string{discMAC}) || n.WaitingFor != "" || n.MacCandidate != "" {
		t.Errorf("metal.get after ConfirmMac = macs %v waitingFor %q candidate %q; want [%s] and no wait", n.Macs,
			n.WaitingFor, n.MacCandidate, discMAC)
	}
	r, err := metal.Discovered(ctx, connect.NewRequest(&v1.DiscoveredRequest{SiteId: a.site}))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range r.Msg.Items {
		if d.Mac == discMAC && d.NodeId != waiting {
			t.Errorf("Discovered after ConfirmMac = %v, want %s owned by %s", d, discMAC, waiting)
		}
	}
}
