package siteagent

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/siteagent/internal/fakecp"
)

const (
	nodeA = "node_01k5w000000000000000000001"
	nodeB = "node_01k5w000000000000000000002"
)

// testConfig returns a config for an agent on loopback with its own data dir
// and a site token file, without a Temporal worker.
func testConfig(t *testing.T, cp *fakecp.CP) Config {
	t.Helper()
	tok := filepath.Join(t.TempDir(), "site-token")
	if err := os.WriteFile(tok, []byte("bcsite_good\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return Config{
		ControlPlaneURL: cp.URL(), CAFile: cp.CAFile, TokenFile: tok, DataDir: t.TempDir(),
		BootListen: "127.0.0.1:0", RelayListen: "127.0.0.1:0", DisableWorker: true,
	}
}

func startAgent(t *testing.T, cfg Config) *Agent {
	t.Helper()
	a, err := Start(t.Context(), cfg)
	if err != nil {
		t.Fatalf("Start() = %v", err)
	}
	t.Cleanup(a.Stop)
	return a
}

// ramdiskClient is an HTTPS client that trusts only the CA and presents a
// certificate of role for identity (none when role is "").
func ramdiskClient(t *testing.T, cp *fakecp.CP, role pki.Role, identity string) *http.Client {
	t.Helper()
	cfg := &tls.Config{MinVersion: tls.VersionTLS13, RootCAs: cp.CA.Pool(), ServerName: "127.0.0.1"}
	if role != "" {
		key, keyPEM, err := pki.NewEd25519Key()
		if err != nil {
			t.Fatal(err)
		}
		certPEM, err := cp.CA.Issue(key.Public(), role, identity, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// call sends body (JSON unless raw bytes) and returns the status and body.
func call(t *testing.T, c *http.Client, method, url string, body any) (int, []byte) {
	t.Helper()
	var r io.Reader
	switch b := body.(type) {
	case nil:
	case []byte:
		r = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s = %v", method, url, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}
