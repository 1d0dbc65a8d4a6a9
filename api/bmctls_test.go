package api_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/better-compute/better-compute/bmc"
)

// TestEnrollBMCTLS: how a node's BMC certificate is trusted is stored on the
// node and shown by metal get (the lab opt-out included); contradictory or
// malformed settings are INVALID_INPUT naming the field, and write nothing.
func TestEnrollBMCTLS(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	site := nested(e.ok(e.acme, sitesCreate, `{"kind":"shared","region":"lab-1"}`), "site", "id")
	pool := nested(e.ok(e.acme, poolsCreate, fmt.Sprintf(`{"siteId":%q,"class":"metal-host"}`, site)), "pool", "id")
	enroll := func(address string, tls bmc.TLS) (int, map[string]any) {
		pb, _ := json.Marshal(map[string]any{"caPem": tls.CAPEM, "spkiPin": tls.SPKIPin, "insecure": tls.Insecure})
		return e.call(e.acme, metalEnroll, fmt.Sprintf(`{"siteId":%q,"poolId":%q,"macs":["b8:ce:f6:00:00:01"],"bmc":{"address":%q,"driver":"redfish","credentialsRef":"env://BCD_SECRET_BMC","tls":%s}}`,
			site, pool, address, pb))
	}
	ca := testCA(t)
	pin := "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="
	for i, tls := range []bmc.TLS{{Insecure: true}, {CAPEM: ca}, {SPKIPin: pin}} {
		enroll(fmt.Sprintf("10.0.1.%d", i+1), tls) // no Temporal here: the node is written, then UNAVAILABLE
		id := lastNode(t, e)
		n, err := e.store.GetNode(context.Background(), "acme", id)
		if err != nil || n.BMCTLS != tls {
			t.Errorf("node %s BMCTLS = %+v, %v, want %+v", id, n.BMCTLS, err, tls)
		}
		node, _ := e.ok(e.acme, "/bettercompute.v1.MetalService/Get", fmt.Sprintf(`{"id":%q}`, id))["node"].(map[string]any)
		want := map[string]any{} // protojson leaves zero values out
		for k, v := range map[string]any{"caPem": tls.CAPEM, "spkiPin": tls.SPKIPin, "insecure": tls.Insecure} {
			if v != "" && v != false {
				want[k] = v
			}
		}
		if diff := cmp.Diff(want, node["bmcTls"]); diff != "" {
			t.Errorf("metal get %s bmcTls mismatch (-want +got):\n%s", id, diff)
		}
	}
	before := rowCounts(t, e.store)
	for _, tc := range []struct {
		address string
		tls     bmc.TLS
		field   string
	}{
		{"10.0.2.1", bmc.TLS{Insecure: true, SPKIPin: pin}, "bmc.tls.insecure"},
		{"10.0.2.2", bmc.TLS{SPKIPin: "not-a-pin"}, "bmc.tls.spkiPin"},
		{"10.0.2.3", bmc.TLS{CAPEM: "-----BEGIN CERTIFICATE-----\nnope\n-----END CERTIFICATE-----\n"}, "bmc.tls.caPem"},
		{"http://10.0.2.4", bmc.TLS{Insecure: true}, "bmc.tls"},
	} {
		code, out := enroll(tc.address, tc.tls)
		if code != 400 || kindOf(out) != "INVALID_INPUT" || field(out) != tc.field {
			t.Errorf("enroll(%s, %+v) = %d %s %q, want INVALID_INPUT %s", tc.address, tc.tls, code, kindOf(out), field(out), tc.field)
		}
	}
	if after := rowCounts(t, e.store); after["metal_nodes"] != before["metal_nodes"] {
		t.Errorf("nodes after refused enrolls = %d, want %d", after["metal_nodes"], before["metal_nodes"])
	}
}

func testCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "bmc-ca"},
		NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
