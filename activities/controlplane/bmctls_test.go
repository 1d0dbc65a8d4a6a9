package controlplane_test

import (
	"testing"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/store"
)

// TestGetNodeCarriesBMCTLS: the node's BMC TLS trust reaches the workflow in
// its BMC target, so every BMC command checks the certificate as enrolled.
func TestGetNodeCarriesBMCTLS(t *testing.T) {
	f := newFixture(t, "none", store.PoolPolicy{})
	want := bmc.TLS{SPKIPin: "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="}
	n, err := f.s.CreateNode(t.Context(), store.Node{ID: ids.New(ids.Node), TenantID: f.tenant, SiteID: f.site, PoolID: f.pool,
		BMCAddress: "https://10.0.0.7", BMCDriver: "redfish", BMCCredentialsRef: "env://BMC", BMCTLS: want})
	if err != nil {
		t.Fatalf("CreateNode = %v", err)
	}
	got, err := f.act.GetNode(t.Context(), kinds.NodeRef{TenantID: f.tenant, NodeID: n.ID})
	if err != nil || got.BMC.TLS != want {
		t.Errorf("GetNode(%s).BMC.TLS = %+v, %v, want %+v", n.ID, got.BMC.TLS, err, want)
	}
}
