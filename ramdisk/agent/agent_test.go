package agent

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/pki"
	"github.com/better-compute/better-compute/ramdisk/agent/agenttest"
)

// certKey returns the ed25519 key that signed a result, after checking its
// certificate with the relay's CA and its identity: the one the result
// carries, which only a kind that carries one has (kinds.CarriesCertificate),
// else the one the node's ramdisk joined with.
func certKey(t *testing.T, relay *agenttest.Relay, res kinds.Result, node string) ed25519.PublicKey {
	t.Helper()
	certPEM := res.CertPEM
	switch carries := kinds.CarriesCertificate(res.Kind); {
	case carries && len(certPEM) == 0:
		t.Fatalf("%s result carries no certificate: the control plane checks its signature with it", res.Kind)
	case !carries && len(certPEM) > 0:
		t.Fatalf("%s result carries the ramdisk's certificate (%d bytes), which only a %s result needs", res.Kind, len(certPEM), kinds.DiskWipe)
	case !carries:
		for _, j := range relay.Joins() {
			if j.NodeID == node {
				certPEM = j.Cert
			}
		}
	}
	cert, err := pki.ParseCert(certPEM)
	if err != nil {
		t.Fatalf("ParseCert(%s result's certificate) = %v", res.Kind, err)
	}
	role, id, err := relay.CA.Verify(cert)
	if err != nil || role != pki.RoleRamdisk || id != node {
		t.Fatalf("CA.Verify(result cert) = %s, %s, %v, want ramdisk %s", role, id, err, node)
	}
	pub, ok := pki.PublicKeyOf(cert).(ed25519.PublicKey)
	if !ok {
		t.Fatalf("result certificate key is %T, want ed25519", pki.PublicKeyOf(cert))
	}
	if !ed25519.Verify(pub, res.Payload, res.Signature) {
		t.Fatalf("result %s: signature does not verify with the certified key", res.CommandID)
	}
	return pub
}

func TestJoinAndCollectLogs(t *testing.T) {
	t.Parallel()
	relay := agenttest.NewRelay(t)
	a := startAgent(t, relay, Config{}, "")
	j := relay.Joins()[0]
	if j.NodeID != a.node {
		t.Fatalf("join identity = %s, want %s", j.NodeID, a.node)
	}
	id := ids.New(ids.Command)
	relay.Send(kinds.Command{ID: id, NodeID: a.node, Kind: kinds.LogsCollect})
	res := relay.WaitResult(t, id, 1)
	if !res.OK {
		t.Fatalf("logs.collect = %s %s, want OK", res.ErrorKind, res.Error)
	}
	certKey(t, relay, res, a.node)
	var out LogsOutput
	if err := json.Unmarshal(res.Payload, &out); err != nil {
		t.Fatalf("logs.collect payload: %v", err)
	}
	joined := strings.Join(out.Lines, "\n")
	if !strings.Contains(joined, "ramdisk: joined") {
		t.Errorf("logs.collect lines = %q, want the join logged", out.Lines)
	}
	if strings.Contains(joined, j.Token) {
		t.Errorf("logs.collect lines show the discovery token")
	}
}

// TestJoinConnectionClosed: the connection the join used (no client
// certificate) is closed once the ramdisk has its certificate. Before, it
// stayed idle at the relay until the client's 90 s idle timeout: one per
// ramdisk boot at the site agent.
func TestJoinConnectionClosed(t *testing.T) {
	t.Parallel()
	relay := agenttest.NewRelay(t)
	a := startAgent(t, relay, Config{}, "")
	id := ids.New(ids.Command)
	relay.Send(kinds.Command{ID: id, NodeID: a.node, Kind: kinds.LogsCollect})
	relay.WaitResult(t, id, 1) // the ramdisk works over its mTLS connection
	deadline := time.Now().Add(10 * time.Second)
	for relay.ClosedConns() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the join's connection is still open 10 s after the join")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestRepeatedCommandReturnsKeptResult(t *testing.T) {
	t.Parallel()
	relay := agenttest.NewRelay(t)
	var mu sync.Mutex
	var ran []string
	onCommand := func(kind string) {
		mu.Lock()
		defer mu.Unlock()
		ran = append(ran, kind)
	}
	a := startAgent(t, relay, Config{OnCommand: onCommand}, "")
	id := ids.New(ids.Command)
	cmd := kinds.Command{ID: id, NodeID: a.node, Kind: kinds.LogsCollect}
	relay.Send(cmd)
	first := relay.WaitResult(t, id, 1)
	relay.Send(cmd)
	second := relay.WaitResult(t, id, 2)
	if !first.Finished.Equal(second.Finished) || string(first.Payload) != string(second.Payload) {
		t.Errorf("repeat of %s: result finished %v with %d bytes, want the kept one (%v, %d bytes)",
			id, second.Finished, len(second.Payload), first.Finished, len(first.Payload))
	}
	mu.Lock()
	defer mu.Unlock()
	if len(ran) != 1 || ran[0] != kinds.LogsCollect {
		t.Errorf("OnCommand calls = %q, want one %s (a repeat is not run again)", ran, kinds.LogsCollect)
	}
}

func TestCommandErrors(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	withNVIDIA := t.TempDir()
	if err := os.MkdirAll(filepath.Join(withNVIDIA, "proc/driver/nvidia"), 0o755); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		root    string
		kind    string
		node    string // "" = the agent's
		wantErr errs.Kind
		wantMsg string
	}{
		{"unknown kind", root, "disk.format", "", errs.Unsupported, "does not run"},
		{"nvml without driver", root, kinds.DiagNVML, "", errs.Unsupported, "no NVIDIA driver"},
		{"nvml without bindings", withNVIDIA, kinds.DiagNVML, "", errs.Unsupported, "NVML bindings"},
		{"another node", root, kinds.LogsCollect, ids.New(ids.Node), errs.PermissionDenied, "not this machine"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			relay := agenttest.NewRelay(t)
			a := startAgent(t, relay, Config{Root: tt.root}, "")
			node := tt.node
			if node == "" {
				node = a.node
			}
			id := ids.New(ids.Command)
			relay.SendTo(a.node, kinds.Command{ID: id, NodeID: node, Kind: tt.kind})
			res := relay.WaitResult(t, id, 1)
			if res.OK || res.ErrorKind != string(tt.wantErr) || !strings.Contains(res.Error, tt.wantMsg) {
				t.Errorf("%s = ok %v, %s %q, want %s containing %q", tt.kind, res.OK, res.ErrorKind, res.Error, tt.wantErr, tt.wantMsg)
			}
		})
	}
}

func TestJoinRefusedIsFinal(t *testing.T) {
	t.Parallel()
	relay := agenttest.NewRelay(t)
	other := agenttest.NewRelay(t) // its token is unknown to relay
	node := ids.New(ids.Node)
	cmdline := strings.Replace(relay.Cmdline(node, ""), "bc.token=", "bc.token="+other.NewToken(node)+" x=", 1)
	err := Run(t.Context(), Config{Cmdline: cmdline, MaxBackoff: 100 * time.Millisecond})
	if !errs.Is(err, errs.Unauthenticated) {
		t.Fatalf("Run(unknown token) = %v, want UNAUTHENTICATED", err)
	}
}

func TestWrongCAIsRefused(t *testing.T) {
	t.Parallel()
	relay := agenttest.NewRelay(t)
	other := agenttest.NewRelay(t)
	node := ids.New(ids.Node)
	cmdline := strings.Replace(relay.Cmdline(node, ""), relay.CAFingerprint(), other.CAFingerprint(), 1)
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if err := Run(ctx, Config{Cmdline: cmdline, MaxBackoff: 100 * time.Millisecond}); err != nil {
		t.Fatalf("Run(wrong CA) = %v, want it to keep retrying until ctx ends", err)
	}
	if n := len(relay.Joins()); n != 0 {
		t.Errorf("relay admitted %d joins from a ramdisk pinned to another CA", n)
	}
}
