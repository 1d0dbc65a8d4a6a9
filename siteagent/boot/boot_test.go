package boot

import (
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
)

var params = Params{BootURL: "http://10.0.0.2:8080", RelayURL: "https://10.0.0.2:8443", CAFingerprint: "ab12"}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestScripts(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tab, err := Open(filepath.Join(dir, "boot.json"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := tab.SetEntry(kinds.BootEntry{NodeID: "node_a", MACs: []string{"52-54-00-AA-00-01"}, Ramdisk: true, DiscoveryToken: "bcdisc_tok"}); err != nil {
		t.Fatalf("SetEntry(ramdisk) = %v", err)
	}
	if err := tab.SetEntry(kinds.BootEntry{NodeID: "node_b", MACs: []string{"52:54:00:aa:00:02"}}); err != nil {
		t.Fatalf("SetEntry(local) = %v", err)
	}
	srv := httptest.NewServer(tab.Handler(params, ""))
	defer srv.Close()

	ramdisk := "#!ipxe\necho better-compute: booting the ramdisk for node_a\n" +
		"kernel http://10.0.0.2:8080/ramdisk/node_a/vmlinuz initrd=initrd.img bc.site=https://10.0.0.2:8443 bc.node=node_a bc.token=bcdisc_tok bc.ca=ab12 bc.boot=http://10.0.0.2:8080 BOOTIF=01-${netX/mac:hexhyp} console=ttyS0\n" +
		"initrd http://10.0.0.2:8080/ramdisk/node_a/initrd.img\nboot\n"
	tests := []struct {
		mac        string
		wantStatus int
		want       string
	}{
		{"52:54:00:aa:00:01", 200, ramdisk},
		{"52:54:00:AA:00:01", 200, ramdisk},
		{"52:54:00:aa:00:02", 200, "#!ipxe\necho better-compute: booting node_b from its local disk\nexit\n"},
		{"52:54:00:aa:00:09", 200, "#!ipxe\necho better-compute: no boot entry for this machine\nexit\n"},
		{"nonsense", 400, ""},
	}
	for _, tt := range tests {
		status, body := get(t, srv.URL+"/ipxe?mac="+tt.mac)
		if status != tt.wantStatus || (tt.want != "" && body != tt.want) {
			t.Errorf("GET /ipxe?mac=%s = %d %q, want %d %q", tt.mac, status, body, tt.wantStatus, tt.want)
		}
	}
	get(t, srv.URL+"/ipxe?mac=52:54:00:aa:00:09")
	ds := tab.Discoveries()
	if len(ds) != 1 || ds[0].MAC != "52:54:00:aa:00:09" || ds[0].Count != 2 || ds[0].FirstSeen.IsZero() || ds[0].LastSeen.Before(ds[0].FirstSeen) {
		t.Errorf("Discoveries() = %+v, want one 52:54:00:aa:00:09 seen twice", ds)
	}
}

func TestTablePersistsAndMovesMACs(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "boot.json")
	tab, _ := Open(path, nil)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(tab.SetEntry(kinds.BootEntry{NodeID: "node_a", MACs: []string{"52:54:00:aa:00:01", "52:54:00:aa:00:03"}, Ramdisk: true, DiscoveryToken: "t1"}))
	must(tab.SetEntry(kinds.BootEntry{NodeID: "node_b", MACs: []string{"52:54:00:aa:00:03"}, Ramdisk: true, DiscoveryToken: "t2"}))
	must(tab.SetEntry(kinds.BootEntry{NodeID: "node_c", MACs: []string{"52:54:00:aa:00:05"}}))
	must(tab.ClearEntry("node_c"))
	must(tab.ClearEntry("node_c"))
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("boot table file = %v, %v; want mode 0600", st, err)
	}

	re, err := Open(path, nil)
	if err != nil {
		t.Fatalf("Open(again) = %v", err)
	}
	tests := []struct {
		mac, wantNode string
		wantOK        bool
	}{
		{"52:54:00:aa:00:01", "node_a", true},
		{"52:54:00:aa:00:03", "node_b", true},
		{"52:54:00:aa:00:05", "", false},
	}
	for _, tt := range tests {
		e, ok := re.Lookup(tt.mac)
		if ok != tt.wantOK || e.NodeID != tt.wantNode {
			t.Errorf("Lookup(%s) after reopen = %q, %v; want %q, %v", tt.mac, e.NodeID, ok, tt.wantNode, tt.wantOK)
		}
	}
}

func TestSetEntryRefuses(t *testing.T) {
	t.Parallel()
	tab, _ := Open(filepath.Join(t.TempDir(), "boot.json"), nil)
	tests := []kinds.BootEntry{
		{NodeID: "", MACs: []string{"52:54:00:aa:00:01"}},
		{NodeID: "node_a"},
		{NodeID: "node_a", MACs: []string{"not-a-mac"}},
		{NodeID: "node_a", MACs: []string{"52:54:00:aa:00:01"}, Ramdisk: true},
		{NodeID: "node_a", MACs: []string{"52:54:00:aa:00:01"}, Ramdisk: true, DiscoveryToken: "x\nshell"},
		{NodeID: "node a", MACs: []string{"52:54:00:aa:00:01"}},
	}
	for _, e := range tests {
		if err := tab.SetEntry(e); !errs.Is(err, errs.InvalidInput) {
			t.Errorf("SetEntry(%+v) = %v, want INVALID_INPUT", e, err)
		}
	}
}

func TestRamdiskFiles(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, Kernel), []byte("kernel bytes"), 0o644); err != nil {
		t.Fatal(err)
	}
	tab, _ := Open(filepath.Join(t.TempDir(), "boot.json"), nil)
	srv := httptest.NewServer(tab.Handler(params, dir))
	defer srv.Close()
	noDir := httptest.NewServer(tab.Handler(params, ""))
	defer noDir.Close()
	tests := []struct {
		url        string
		wantStatus int
		wantIn     string
	}{
		{srv.URL + "/ramdisk/vmlinuz", 200, "kernel bytes"},
		{srv.URL + "/ramdisk/initrd.img", 404, "does not exist"},
		{srv.URL + "/ramdisk/passwd", 404, "only"},
		{noDir.URL + "/ramdisk/vmlinuz", 404, "serves no ramdisk"},
	}
	for _, tt := range tests {
		status, body := get(t, tt.url)
		if status != tt.wantStatus || !strings.Contains(body, tt.wantIn) {
			t.Errorf("GET %s = %d %q, want %d containing %q", tt.url, status, body, tt.wantStatus, tt.wantIn)
		}
	}
}
