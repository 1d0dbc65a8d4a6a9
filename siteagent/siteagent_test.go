package siteagent

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/siteagent/internal/fakecp"
)

func TestFirstStartJoinsAndRestartDoesNot(t *testing.T) {
	t.Parallel()
	cp := fakecp.Start(t)
	cfg := testConfig(t, cp)
	a, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Start(first) = %v", err)
	}
	if got := cp.Joins.Load(); got != 1 {
		t.Errorf("joins after first start = %d, want 1", got)
	}
	jr := cp.LastJoin()
	if jr.GetRole() != "site" || strings.Join(jr.GetServeHosts(), ",") != "127.0.0.1" {
		t.Errorf("join request role %q serve_hosts %v, want site [127.0.0.1]", jr.GetRole(), jr.GetServeHosts())
	}
	for name, mode := range map[string]os.FileMode{KeyFile: 0o600, JoinFile: 0o600, CertFile: 0o644, ServingFile: 0o644, CAFileName: 0o644} {
		st, err := os.Stat(filepath.Join(cfg.DataDir, name))
		if err != nil || st.Mode().Perm() != mode {
			t.Errorf("data dir file %s = %v, %v; want mode %v", name, st, err, mode)
		}
	}
	entry := kinds.BootEntry{NodeID: nodeA, MACs: []string{"52:54:00:aa:00:01"}, Ramdisk: true, DiscoveryToken: "bcdisc_abc"}
	if err := a.Activities().Boot.SetEntry(entry); err != nil {
		t.Fatal(err)
	}
	a.Stop()

	cfg.TokenFile = "" // the token is single-use: a restart must not need it
	b := startAgent(t, cfg)
	if got := cp.Joins.Load(); got != 1 {
		t.Errorf("joins after restart = %d, want still 1", got)
	}
	if b.SiteID() != cp.SiteID {
		t.Errorf("SiteID() after restart = %q, want %q", b.SiteID(), cp.SiteID)
	}
	tc, err := b.temporalTLS()
	if err != nil || tc == nil || tc.ServerName != fakecp.TemporalServerName || tc.GetClientCertificate == nil {
		t.Errorf("temporalTLS() after restart = %+v, %v; want mTLS to %s with the agent's certificate", tc, err, fakecp.TemporalServerName)
	}
	sum := sha256.Sum256(cp.CA.Certificate().Raw)
	status, body := call(t, http.DefaultClient, http.MethodGet, b.BootURL()+"/ipxe?mac=52-54-00-AA-00-01", nil)
	want := "kernel " + b.BootURL() + "/ramdisk/" + nodeA + "/vmlinuz initrd=initrd.img bc.site=" + b.RelayURL() +
		" bc.node=" + nodeA + " bc.token=bcdisc_abc bc.ca=" + hex.EncodeToString(sum[:]) + " bc.boot=" + b.BootURL() + " BOOTIF=01-${netX/mac:hexhyp} console=ttyS0\n"
	if status != 200 || !strings.Contains(string(body), want) {
		t.Errorf("GET /ipxe after restart = %d %q, want a script with %q", status, body, want)
	}
}

func TestStartWithoutJoinOrToken(t *testing.T) {
	t.Parallel()
	cp := fakecp.Start(t)
	cfg := testConfig(t, cp)
	cfg.TokenFile = ""
	if _, err := Start(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "token") {
		t.Errorf("Start(no join, no token) = %v, want an error asking for the token file", err)
	}
	cfg = testConfig(t, cp)
	if err := os.WriteFile(cfg.TokenFile, []byte("bcsite_used"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Start(t.Context(), cfg); err == nil || !strings.Contains(err.Error(), "UNAUTHENTICATED") {
		t.Errorf("Start(bad token) = %v, want UNAUTHENTICATED", err)
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, JoinFile)); !os.IsNotExist(err) {
		t.Errorf("a refused join left %s: %v", JoinFile, err)
	}
}

func TestRelayPresentsChainAndProxiesJoin(t *testing.T) {
	t.Parallel()
	cp := fakecp.Start(t)
	a := startAgent(t, testConfig(t, cp))
	c := ramdiskClient(t, cp, "", "")

	conn, err := tls.Dial("tcp", strings.TrimPrefix(a.RelayURL(), "https://"), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // we check the chain by hand, as a ramdisk with only the CA fingerprint does
	if err != nil {
		t.Fatal(err)
	}
	chain := conn.ConnectionState().PeerCertificates
	conn.Close()
	if len(chain) != 2 || sha256.Sum256(chain[1].Raw) != sha256.Sum256(cp.CA.Certificate().Raw) {
		t.Errorf("relay presented %d certificates, want [leaf, CA]", len(chain))
	}

	key, _, _ := pki.NewEd25519Key()
	pub, _ := pki.MarshalPublicKey(key.Public())
	tests := []struct {
		name       string
		req        *v1.JoinRequest
		wantStatus int
	}{
		{"ramdisk", &v1.JoinRequest{Token: "bcdisc_good", Role: "ramdisk", PublicKeyPem: pub, ServeHosts: []string{"evil.example"}}, 200},
		{"site role refused", &v1.JoinRequest{Token: "bcsite_good", Role: "site", PublicKeyPem: pub}, 400},
		{"bad token", &v1.JoinRequest{Token: "bcdisc_bad", Role: "ramdisk", PublicKeyPem: pub}, 401},
	}
	for _, tt := range tests {
		body, _ := protojson.Marshal(tt.req)
		status, out := call(t, c, http.MethodPost, a.RelayURL()+"/v1/join", body)
		if status != tt.wantStatus {
			t.Errorf("POST /v1/join (%s) = %d %s, want %d", tt.name, status, out, tt.wantStatus)
			continue
		}
		if status != 200 {
			continue
		}
		var resp v1.JoinResponse
		if err := protojson.Unmarshal(out, &resp); err != nil || resp.GetIdentity() != nodeA || len(resp.GetCertPem()) == 0 {
			t.Errorf("POST /v1/join = %s, %v; want a certificate for %s", out, err, nodeA)
		}
		if got := cp.LastJoin(); got.GetRole() != "ramdisk" || len(got.GetServeHosts()) != 0 {
			t.Errorf("proxied join role %q serve_hosts %v, want ramdisk and none", got.GetRole(), got.GetServeHosts())
		}
	}
}
