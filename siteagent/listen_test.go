package siteagent

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/pki"
)

// TestListenTakenNamesTheFlag: a boot or relay port in use fails Start at
// once with UNAVAILABLE naming the flag to change, before the agent joins
// anything. Before, the error said only "cannot listen on 127.0.0.1:8080".
func TestListenTakenNamesTheFlag(t *testing.T) {
	t.Parallel()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for flag, cfg := range map[string]Config{
		"--boot-listen":  {BootListen: taken.Addr().String(), RelayListen: "127.0.0.1:0"},
		"--relay-listen": {BootListen: "127.0.0.1:0", RelayListen: taken.Addr().String()},
	} {
		cfg.DataDir, cfg.ControlPlaneURL = t.TempDir(), "https://127.0.0.1:1" // never reached
		a, err := Start(context.Background(), cfg)
		if err == nil {
			a.Stop()
			t.Fatalf("Start with %s taken = nil error", flag)
		}
		if !errs.Is(err, errs.Unavailable) || !strings.Contains(err.Error(), flag) {
			t.Errorf("Start with %s taken = %v, want UNAVAILABLE naming %s", flag, err, flag)
		}
	}
}

// TestJoinUnreachableNamesTheControlPlane: a first start whose control
// plane does not answer says which address it tried and the flag that
// sets it. Before: "site.join: UNAVAILABLE: … dial tcp …: connection refused".
func TestJoinUnreachableNamesTheControlPlane(t *testing.T) {
	t.Parallel()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "https://" + closed.Addr().String()
	closed.Close()
	dir := t.TempDir()
	tok := filepath.Join(dir, "site-token")
	if err := os.WriteFile(tok, []byte("bcst_token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := pki.Init(filepath.Join(dir, "pki"), "test.example"); err != nil {
		t.Fatal(err)
	}
	a, err := Start(context.Background(), Config{DataDir: filepath.Join(dir, "data"), TokenFile: tok, ControlPlaneURL: url,
		CAFile: filepath.Join(dir, "pki", "ca.crt"), BootListen: "127.0.0.1:0", RelayListen: "127.0.0.1:0"})
	if err == nil {
		a.Stop()
		t.Fatal("Start with no control plane = nil error")
	}
	if !errs.Is(err, errs.Unavailable) || !strings.Contains(err.Error(), url) || !strings.Contains(err.Error(), "--control-plane") {
		t.Errorf("Start with no control plane at %s = %v, want UNAVAILABLE naming it and --control-plane", url, err)
	}
}
