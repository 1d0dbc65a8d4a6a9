package api_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/api/gen/bettercompute/v1/bettercomputev1connect"
	"github.com/better-compute/better-compute/pki"
)

// TestEnrollRefusesADriverTheSiteLacks: once a site's agent announced its
// BMC drivers, enroll of a node with another driver is UNSUPPORTED naming
// bmc.driver, before any node exists; a site whose agent never announced is
// not checked. Only a site agent announces, and only known drivers.
func TestEnrollRefusesADriverTheSiteLacks(t *testing.T) {
	t.Parallel()
	a := newAgentsEnv(t)
	ctx := context.Background()
	pool := nested(a.ok(a.root, poolsCreate, fmt.Sprintf(`{"siteId":%q,"class":"metal-host"}`, a.site)), "pool", "id")
	enroll := func(address, driver string) (int, map[string]any) {
		return a.call(a.root, metalEnroll, fmt.Sprintf(`{"siteId":%q,"poolId":%q,"macs":["b8:ce:f6:00:00:01"],"bmc":{"address":%q,"driver":%q,"credentialsRef":"env://BCD_SECRET_BMC"}}`,
			a.site, pool, address, driver))
	}
	if _, out := enroll("10.0.0.5", "ipmi"); kindOf(out) == "UNSUPPORTED" {
		t.Fatalf("enroll(ipmi) before any announce = %v, want not checked", out)
	}
	key, _, _ := pki.NewEd25519Key()
	pem, err := a.ca.Issue(key.Public(), pki.RoleSite, a.site, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	jc := bettercomputev1connect.NewJoinServiceClient(a.client(t, pem, key), a.url)
	if _, err := jc.Announce(ctx, connect.NewRequest(&v1.AnnounceRequest{BmcDrivers: []string{"redfish", "ssh"}})); connect.CodeOf(err) != connect.CodeInvalidArgument {
		t.Errorf("Announce(ssh) = %v, want INVALID_INPUT", err)
	}
	if _, err := bettercomputev1connect.NewJoinServiceClient(a.client(t, nil, nil), a.url).Announce(ctx,
		connect.NewRequest(&v1.AnnounceRequest{BmcDrivers: []string{"redfish"}})); connect.CodeOf(err) != connect.CodeUnauthenticated {
		t.Errorf("Announce without a site certificate = %v, want UNAUTHENTICATED", err)
	}
	if _, err := jc.Announce(ctx, connect.NewRequest(&v1.AnnounceRequest{BmcDrivers: []string{"redfish"}})); err != nil {
		t.Fatalf("Announce(redfish) = %v", err)
	}
	before := rowCounts(t, a.store)
	if code, out := enroll("10.0.0.6", "ipmi"); kindOf(out) != "UNSUPPORTED" || field(out) != "bmc.driver" {
		t.Errorf("enroll(ipmi) on a redfish-only site = %d %s field %q, want UNSUPPORTED naming bmc.driver", code, kindOf(out), field(out))
	}
	if after := rowCounts(t, a.store); after["metal_nodes"] != before["metal_nodes"] {
		t.Errorf("nodes after the refused enroll = %d, want %d", after["metal_nodes"], before["metal_nodes"])
	}
	if _, out := enroll("10.0.0.7", "redfish"); kindOf(out) == "UNSUPPORTED" {
		t.Errorf("enroll(redfish) on a redfish site = %v, want accepted", out)
	}
}
