package api_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"

	"github.com/better-compute/better-compute/api"
	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/store"
)

// A site forwards the renewal of its own nodes' certificates only: not
// another site's node, not a site certificate, and nothing without its
// own certificate.
func TestForwardedNodeRenewal(t *testing.T) {
	t.Parallel()
	a := newAgentsEnv(t)
	ctx := context.Background()
	key, _, _ := pki.NewEd25519Key()
	node := ids.New(ids.Node)
	nodePEM, err := a.ca.Issue(key.Public(), pki.RoleNode, node, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := pki.ParseCert(nodePEM)
	pub, _ := pki.MarshalPublicKey(key.Public())
	if err := a.store.RecordCertificate(ctx, store.Certificate{Serial: cert.SerialNumber.Text(16), TenantID: "root", Role: "node",
		Identity: node, SiteID: a.site, TokenID: "jtok_1", PublicKey: pub, CertPEM: nodePEM, ExpiresAt: cert.NotAfter}); err != nil {
		t.Fatal(err)
	}
	sitePEM, _ := a.recordedSiteCert(t, time.Hour)
	siteB, _, err := a.store.CreateSite(ctx, store.Site{TenantID: "root", Kind: "shared", Region: "r2"})
	if err != nil {
		t.Fatal(err)
	}
	url := a.url + api.NodeRenewPath
	for _, tc := range []struct {
		name string
		hc   string
		body []byte
		want int
		says string
	}{
		{"no certificate", "", nodePEM, 401, ""},
		{"another site's node", siteB.ID, nodePEM, 401, "recorded for site " + a.site + ", not " + siteB.ID},
		{"a site certificate", a.site, sitePEM, 403, ""},
		{"not a certificate", a.site, []byte("x"), 400, ""},
	} {
		hc := a.client(t, nil, nil)
		if tc.hc != "" {
			hc = a.siteClient(t, tc.hc)
		}
		if resp, b := httpDo(t, hc, "POST", url, string(tc.body)); resp.StatusCode != tc.want || !strings.Contains(string(b), tc.says) {
			t.Errorf("POST %s (%s) = %s %s, want %d saying %q", api.NodeRenewPath, tc.name, resp.Status, b, tc.want, tc.says)
		}
	}
	resp, b := httpDo(t, a.siteClient(t, a.site), "POST", url, string(nodePEM))
	var out v1.JoinResponse
	if resp.StatusCode != 200 || protojson.Unmarshal(b, &out) != nil {
		t.Fatalf("POST %s (its node) = %s %s, want 200 and a JoinResponse", api.NodeRenewPath, resp.Status, b)
	}
	renewed, err := pki.ParseCert(out.CertPem)
	if role, id, verr := a.ca.Verify(renewed); err != nil || verr != nil || role != pki.RoleNode || id != node ||
		renewed.SerialNumber.Cmp(cert.SerialNumber) == 0 || len(out.CodecKey) != 0 {
		t.Errorf("forwarded renewal = %s %s (%v %v), codec key %d bytes; want a new node certificate for %s and no site secrets", role, id, err, verr, len(out.CodecKey), node)
	}
}
