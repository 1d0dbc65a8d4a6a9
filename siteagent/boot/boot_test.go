package boot

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/slotfile"
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
	for _, slot := range []string{path + ".0", path + ".1"} {
		if st, err := os.Stat(slot); err != nil || st.Mode().Perm() != 0o600 {
			t.Errorf("boot table slot %s = %v, %v; want mode 0600", slot, st, err)
		}
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

// onDisk reads the table as a restarted agent would.
func onDisk(t *testing.T, path string) file {
	t.Helper()
	_, b, err := slotfile.Open(path, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatalf("the boot table on disk: %v", err)
	}
	return f
}

// TestChangesWriteInPlace: a change rewrites a slot file in place (the
// same inode: no temporary file renamed over the table, whose rename and
// directory sync were two of a change's three journal commits), the two
// slots taking turns; a table written whole at the path by an agent from
// before slots is read and then replaced by them.
func TestChangesWriteInPlace(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "boot.json")
	legacy, _ := json.Marshal(file{Entries: []kinds.BootEntry{{NodeID: "node_old", MACs: []string{"52:54:00:aa:00:0a"}}}})
	if err := os.WriteFile(path, legacy, 0o600); err != nil {
		t.Fatal(err)
	}
	tab, err := Open(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok := tab.Lookup("52:54:00:aa:00:0a"); !ok || e.NodeID != "node_old" {
		t.Errorf("Lookup in a table written whole = %+v, %v; want node_old", e, ok)
	}
	inode := func(p string) uint64 {
		t.Helper()
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		return st.Sys().(*syscall.Stat_t).Ino
	}
	set := func(i int) {
		t.Helper()
		if err := tab.SetEntry(kinds.BootEntry{NodeID: fmt.Sprintf("node_%d", i), MACs: []string{fmt.Sprintf("52:54:00:aa:01:%02x", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	set(1)
	set(2)
	if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the table written whole is still there after the slots took over (%v)", err)
	}
	ino0, ino1 := inode(path+".0"), inode(path+".1")
	for i := 3; i < 7; i++ {
		set(i)
	}
	if inode(path+".0") != ino0 || inode(path+".1") != ino1 {
		t.Error("a change replaced a slot file instead of writing it in place")
	}
	if f := onDisk(t, path); len(f.Entries) != 7 {
		t.Errorf("on disk: %d entries, want 7 (node_old and six set)", len(f.Entries))
	}
}
