//go:build fakehw

package agent

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/zstd"

	"github.com/better-compute/better-compute/attest"
	"github.com/better-compute/better-compute/ids"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/ramdisk/agent/agenttest"
	"github.com/better-compute/better-compute/ramdisk/disk"
)

const (
	tib = int64(1) << 40
	// big is a 16 TiB disk as ext4 can hold it: its files stop 4 KiB short.
	big = 16*tib - 1<<20
)

// fakeDisks creates the fake disks ds in a temp dir and returns it.
func fakeDisks(t *testing.T, ds ...disk.Disk) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range ds {
		if err := disk.CreateFakeDisk(dir, d); err != nil {
			t.Fatalf("CreateFakeDisk(%+v) = %v", d, err)
		}
	}
	return dir
}

// imageServer serves body at /cache/img and counts the GETs.
type imageServer struct {
	srv  *httptest.Server
	gets atomic.Int32
}

func serveImage(t *testing.T, body []byte, handler func(n int32, w http.ResponseWriter)) *imageServer {
	t.Helper()
	s := &imageServer{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/cache/img" {
			http.NotFound(w, r)
			return
		}
		n := s.gets.Add(1)
		if handler != nil {
			handler(n, w)
			return
		}
		w.Write(body)
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func digest(b []byte) string { s := sha256.Sum256(b); return "sha256:" + hex.EncodeToString(s[:]) }

func zstdOf(t *testing.T, raw []byte) []byte {
	t.Helper()
	enc, err := zstd.NewWriter(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer enc.Close()
	return enc.EncodeAll(raw, nil)
}

// testImage is 8 MiB: a patterned head, zeros, a patterned tail.
func testImage() []byte {
	raw := make([]byte, 8<<20)
	for i := range 1 << 20 {
		raw[i] = byte(i%253 + 1)
		raw[len(raw)-1-i] = byte(i%241 + 1)
	}
	return raw
}

func send(t *testing.T, relay *agenttest.Relay, node, kind string, in any) kinds.Result {
	t.Helper()
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	id := ids.New(ids.Command)
	relay.Send(kinds.Command{ID: id, NodeID: node, Kind: kind, Payload: b})
	return relay.WaitResult(t, id, 1)
}

func TestInventory(t *testing.T) {
	t.Parallel()
	dir := fakeDisks(t,
		disk.Disk{WWN: "0x5000C500A1B2C3D4", Model: "ST2000", SizeBytes: 2 * tib, Rotational: true},
		disk.Disk{Serial: "NVME-16T-01", Model: "PM1733", SizeBytes: big, SupportsCryptoErase: true})
	relay := agenttest.NewRelay(t)
	nics := []NIC{{Name: "eth0", MAC: "52:54:00:aa:bb:01"}, {Name: "eth1", MAC: "52:54:00:aa:bb:02"}}
	a := startAgent(t, relay, Config{Disks: disk.Host{Dir: dir}, NICs: nics, CPUs: 8, MemoryBytes: 64 << 30,
		ProductUUID: "1b4e28ba-2fa1-11d2-883f-0016d3cca427"}, "")
	res := send(t, relay, a.node, kinds.InventoryRefresh, nil)
	if !res.OK {
		t.Fatalf("inventory.refresh = %s %s", res.ErrorKind, res.Error)
	}
	certKey(t, relay, res, a.node)
	var got Inventory
	if err := json.Unmarshal(res.Payload, &got); err != nil {
		t.Fatal(err)
	}
	want := Inventory{NodeID: a.node, ProductUUID: "1b4e28ba-2fa1-11d2-883f-0016d3cca427", NICs: nics, CPUs: 8, MemoryBytes: 64 << 30,
		Disks: []InventoryDisk{
			{Name: "serial-NVME-16T-01", Serial: "NVME-16T-01", Model: "PM1733", SizeBytes: big, SupportsCryptoErase: true},
			{Name: "wwn-0x5000c500a1b2c3d4", WWN: "0x5000C500A1B2C3D4", Model: "ST2000", SizeBytes: 2 * tib, Rotational: true},
		}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("inventory.refresh mismatch (-want +got):\n%s", d)
	}
}

func TestWipeAttestsEveryDisk(t *testing.T) {
	t.Parallel()
	dir := fakeDisks(t, disk.Disk{Serial: "GOOD-1", SizeBytes: big}, disk.Disk{Serial: "BAD-1", SizeBytes: big})
	if err := disk.InjectFault(disk.Disk{Path: filepath.Join(dir, "serial-BAD-1.img")}, disk.Fault{LeaveNonzero: true, NonzeroAt: 5 << 30}); err != nil {
		t.Fatal(err)
	}
	relay := agenttest.NewRelay(t)
	a := startAgent(t, relay, Config{Disks: disk.Host{Dir: dir}}, "")
	in := kinds.WipeInput{Mode: "quick", Nonce: "nonce-1", WorkflowID: "wf-1"}
	res := send(t, relay, a.node, kinds.DiskWipe, in)
	if !res.OK {
		t.Fatalf("disk.wipe = %s %s", res.ErrorKind, res.Error)
	}
	pub := certKey(t, relay, res, a.node)
	var signed []attest.Signed
	if err := json.Unmarshal(res.Payload, &signed); err != nil {
		t.Fatal(err)
	}
	got := map[string]attest.WipeAttestation{}
	for _, s := range signed {
		att, err := attest.Verify(pub, s)
		if err != nil {
			t.Fatalf("attest.Verify() = %v", err)
		}
		got[att.Disk] = att
	}
	for name, wantOK := range map[string]bool{"serial-GOOD-1": true, "serial-BAD-1": false} {
		att, ok := got[name]
		switch {
		case !ok:
			t.Errorf("disk.wipe attested %v, missing %s", got, name)
		case att.Verified != wantOK || att.NodeID != a.node || att.Nonce != "nonce-1" || att.WorkflowID != "wf-1" || att.Mode != "quick":
			t.Errorf("attestation of %s = %+v, want verified=%v for node %s, nonce-1, wf-1", name, att, wantOK, a.node)
		case wantOK && att.BytesVerified != big:
			t.Errorf("attestation of %s verified %d bytes, want %d", name, att.BytesVerified, big)
		}
	}
	if err := attest.CheckCoverage([]string{"serial-BAD-1", "serial-GOOD-1"}, []attest.WipeAttestation{got["serial-GOOD-1"], got["serial-BAD-1"]}, a.node, "wf-1", "nonce-1"); err == nil || !strings.Contains(err.Error(), "serial-BAD-1") {
		t.Errorf("CheckCoverage() = %v, want the unverified disk named", err)
	}
	if bad := send(t, relay, a.node, kinds.DiskWipe, kinds.WipeInput{Mode: "shred", Nonce: "n"}); bad.OK || bad.ErrorKind != "INVALID_INPUT" {
		t.Errorf("disk.wipe(shred) = ok %v %s, want INVALID_INPUT", bad.OK, bad.ErrorKind)
	}
}

// TestWipeFallback: a disk that cannot do the mode asked is wiped in the
// fallback mode and its attestation says so; without a fallback the command
// fails, naming the disk.
func TestWipeFallback(t *testing.T) {
	const size = 1 << 30
	dir := fakeDisks(t, disk.Disk{Serial: "NVME-1", SizeBytes: size, SupportsSecureErase: true, SupportsCryptoErase: true},
		disk.Disk{Serial: "SATA-1", SizeBytes: size, SupportsSecureErase: true})
	relay := agenttest.NewRelay(t)
	a := startAgent(t, relay, Config{Disks: disk.Host{Dir: dir}}, "")
	res := send(t, relay, a.node, kinds.DiskWipe, kinds.WipeInput{Mode: "crypto-erase", Fallback: "secure-erase", Nonce: "n", WorkflowID: "wf"})
	if !res.OK {
		t.Fatalf("disk.wipe(crypto-erase, fallback secure-erase) = %s %s", res.ErrorKind, res.Error)
	}
	pub := certKey(t, relay, res, a.node)
	var signed []attest.Signed
	if err := json.Unmarshal(res.Payload, &signed); err != nil {
		t.Fatal(err)
	}
	modes := map[string]string{}
	for _, s := range signed {
		att, err := attest.Verify(pub, s)
		if err != nil {
			t.Fatal(err)
		}
		modes[att.Disk] = att.Mode
	}
	if want := map[string]string{"serial-NVME-1": "crypto-erase", "serial-SATA-1": "secure-erase"}; !reflect.DeepEqual(modes, want) {
		t.Errorf("wipe modes = %v, want %v", modes, want)
	}
	res = send(t, relay, a.node, kinds.DiskWipe, kinds.WipeInput{Mode: "crypto-erase", Nonce: "n2", WorkflowID: "wf"})
	if res.OK || res.ErrorKind != "UNSUPPORTED" || !strings.Contains(res.Error, "serial-SATA-1") {
		t.Errorf("disk.wipe(crypto-erase) without fallback = ok %v %s %q, want UNSUPPORTED naming serial-SATA-1", res.OK, res.ErrorKind, res.Error)
	}
}

func TestDeployImage(t *testing.T) {
	t.Parallel()
	raw := testImage()
	img := zstdOf(t, raw)
	tests := []struct {
		name    string
		digest  string
		wantErr string
	}{
		{"good digest", digest(img), ""},
		{"wrong digest", digest(raw), "DRIVER_ERROR"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := fakeDisks(t, disk.Disk{Serial: "OS-1", SizeBytes: 1 << 30})
			srv := serveImage(t, img, nil)
			relay := agenttest.NewRelay(t)
			a := startAgent(t, relay, Config{Disks: disk.Host{Dir: dir}}, srv.srv.URL)
			res := send(t, relay, a.node, kinds.DeployImage, kinds.DeployImageInput{Path: "/cache/img", Digest: tt.digest, Compression: "zstd", Format: "raw"})
			if tt.wantErr != "" {
				if res.OK || res.ErrorKind != tt.wantErr || !strings.Contains(res.Error, "digest mismatch") {
					t.Fatalf("deploy.image = ok %v %s %q, want %s digest mismatch", res.OK, res.ErrorKind, res.Error, tt.wantErr)
				}
				return
			}
			if !res.OK {
				t.Fatalf("deploy.image = %s %s", res.ErrorKind, res.Error)
			}
			var out kinds.DeployImageOutput
			json.Unmarshal(res.Payload, &out)
			if want := (kinds.DeployImageOutput{Disk: "serial-OS-1", BytesWritten: int64(len(raw)), Digest: digest(img)}); out != want {
				t.Errorf("deploy.image = %+v, want %+v", out, want)
			}
			onDisk, _ := os.ReadFile(filepath.Join(dir, "serial-OS-1.img"))
			if !bytes.Equal(onDisk[:len(raw)], raw) {
				t.Errorf("disk does not hold the image after deploy.image")
			}
		})
	}
}

// A repeat of a running deploy.image waits for it; a repeat of a finished
// one gets the kept result: the image is fetched once.
func TestDeployImageRunsOnce(t *testing.T) {
	t.Parallel()
	raw := testImage()
	release := make(chan struct{})
	srv := serveImage(t, raw, func(_ int32, w http.ResponseWriter) {
		<-release
		w.Write(raw)
	})
	dir := fakeDisks(t, disk.Disk{Serial: "OS-1", SizeBytes: 1 << 30})
	relay := agenttest.NewRelay(t)
	a := startAgent(t, relay, Config{Disks: disk.Host{Dir: dir}}, srv.srv.URL)
	b, _ := json.Marshal(kinds.DeployImageInput{Path: "/cache/img", Digest: digest(raw)})
	cmd := kinds.Command{ID: ids.New(ids.Command), NodeID: a.node, Kind: kinds.DeployImage, Payload: b}
	relay.Send(cmd)
	relay.WaitFor(t, 10*time.Second, "the image GET", func() bool { return srv.gets.Load() == 1 })
	relay.Send(cmd) // while it runs
	time.Sleep(100 * time.Millisecond)
	close(release)
	first := relay.WaitResult(t, cmd.ID, 1)
	relay.Send(cmd) // after it ran
	second := relay.WaitResult(t, cmd.ID, 2)
	if !first.OK || !first.Finished.Equal(second.Finished) {
		t.Errorf("deploy.image results = %+v then %+v, want one OK result posted twice", first, second)
	}
	if n := srv.gets.Load(); n != 1 {
		t.Errorf("image fetched %d times, want 1", n)
	}
}

// A stream that breaks after the first durable checkpoint (disk.SyncEvery)
// is resumed from the offset reported.
func TestDeployImageResumesBrokenStream(t *testing.T) {
	t.Parallel()
	raw := make([]byte, disk.SyncEvery+48<<20)
	copy(raw, testImage())
	copy(raw[len(raw)-(1<<20):], testImage())
	srv := serveImage(t, raw, func(n int32, w http.ResponseWriter) {
		w.Header().Set("Content-Length", strconv.Itoa(len(raw)))
		if n == 1 {
			w.Write(raw[:disk.SyncEvery+38<<20]) // then the connection closes short
			return
		}
		w.Write(raw)
	})
	dir := fakeDisks(t, disk.Disk{Serial: "OS-1", SizeBytes: 1 << 30})
	relay := agenttest.NewRelay(t)
	a := startAgent(t, relay, Config{Disks: disk.Host{Dir: dir}}, srv.srv.URL)
	res := send(t, relay, a.node, kinds.DeployImage, kinds.DeployImageInput{Path: "/cache/img", Digest: digest(raw), Size: int64(len(raw))})
	if !res.OK {
		t.Fatalf("deploy.image = %s %s", res.ErrorKind, res.Error)
	}
	if n := srv.gets.Load(); n != 2 {
		t.Errorf("image fetched %d times, want 2 (a break, a resume)", n)
	}
	sawResumePoint := false
	for _, p := range relay.Progress() {
		sawResumePoint = sawResumePoint || (p.CommandID == res.CommandID && p.Bytes == disk.SyncEvery && p.Disk == "serial-OS-1" && p.Total == int64(len(raw)))
	}
	if !sawResumePoint {
		t.Errorf("progress = %+v, want %d of %d on serial-OS-1 reported", relay.Progress(), disk.SyncEvery, len(raw))
	}
	logs := send(t, relay, a.node, kinds.LogsCollect, nil)
	if want := "from=" + strconv.Itoa(disk.SyncEvery); !strings.Contains(string(logs.Payload), want) {
		t.Errorf("logs = %s, want a resume %s", logs.Payload, want)
	}
}

// The tries at a broken stream are counted from the last one that got
// further: two tries that break before the first durable checkpoint, one
// that breaks past it, two more before the next and one to the end make six
// GETs, one more than streamAttempts tries in a row would allow.
func TestDeployImageTriesCountFromProgress(t *testing.T) {
	t.Parallel()
	raw := make([]byte, disk.SyncEvery+48<<20)
	copy(raw, testImage())
	srv := serveImage(t, raw, func(n int32, w http.ResponseWriter) {
		w.Header().Set("Content-Length", strconv.Itoa(len(raw)))
		switch {
		case n == 3:
			w.Write(raw[:disk.SyncEvery+38<<20]) // past the checkpoint, then the connection closes short
		case n < 6:
			w.Write(raw[:1<<20]) // closes short before any checkpoint
		default:
			w.Write(raw)
		}
	})
	dir := fakeDisks(t, disk.Disk{Serial: "OS-1", SizeBytes: 1 << 30})
	relay := agenttest.NewRelay(t)
	a := startAgent(t, relay, Config{Disks: disk.Host{Dir: dir}}, srv.srv.URL)
	res := send(t, relay, a.node, kinds.DeployImage, kinds.DeployImageInput{Path: "/cache/img", Digest: digest(raw), Size: int64(len(raw))})
	if !res.OK {
		t.Fatalf("deploy.image = %s %s; want OK after 6 GETs", res.ErrorKind, res.Error)
	}
	if n := srv.gets.Load(); n != 6 {
		t.Errorf("image fetched %d times, want 6", n)
	}
}

func TestKexec(t *testing.T) {
	t.Parallel()
	raw := testImage()
	srv := serveImage(t, raw, nil)
	dir := fakeDisks(t, disk.Disk{Serial: "OS-1", SizeBytes: 1 << 30})
	relay := agenttest.NewRelay(t)
	var kexeced atomic.Bool
	a := startAgent(t, relay, Config{Disks: disk.Host{Dir: dir}, OnKexec: func() { kexeced.Store(true) }}, srv.srv.URL)
	if res := send(t, relay, a.node, kinds.BootKexec, kinds.KexecInput{}); res.OK || res.ErrorKind != "INVALID_STATE" {
		t.Fatalf("boot.kexec before deploy = ok %v %s %q, want INVALID_STATE", res.OK, res.ErrorKind, res.Error)
	}
	if res := send(t, relay, a.node, kinds.DeployImage, kinds.DeployImageInput{Path: "/cache/img", Digest: digest(raw)}); !res.OK {
		t.Fatalf("deploy.image = %s %s", res.ErrorKind, res.Error)
	}
	res := send(t, relay, a.node, kinds.BootKexec, kinds.KexecInput{Disk: "serial-OS-1"})
	if !res.OK {
		t.Fatalf("boot.kexec = %s %s", res.ErrorKind, res.Error)
	}
	select {
	case <-a.done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after boot.kexec")
	}
	if a.err != nil || !kexeced.Load() {
		t.Errorf("after boot.kexec: Run = %v, OnKexec called %v; want nil, true", a.err, kexeced.Load())
	}
	var rec disk.KexecRecord
	b, err := os.ReadFile(filepath.Join(dir, "kexec.json"))
	if err == nil {
		err = json.Unmarshal(b, &rec)
	}
	head := sha256.Sum256(raw[:64<<10])
	if err != nil || rec.KernelSHA256 != hex.EncodeToString(head[:]) || !strings.Contains(rec.Cmdline, "console=ttyS0") {
		t.Errorf("kexec record = %+v, %v; want the deployed image's head and the console", rec, err)
	}
}
