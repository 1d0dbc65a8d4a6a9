package pxe

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestTFTPRealClients fetches the iPXE binaries from our TFTP server with
// tftp-hpa, atftp (asking for blksize and tsize) and busybox tftp, checks
// every byte, and checks that a missing file, a path out of the served
// set and a write are refused.
func TestTFTPRealClients(t *testing.T) {
	needLab(t)
	l := newLab(t)
	ours, _ := l.serveOurs(labTable(t))
	defer ours.stop()
	dir := t.TempDir()
	bios, _ := os.ReadFile(DefaultBIOSFile)
	efi, _ := os.ReadFile(DefaultEFIFile)

	fetch := []struct {
		client string
		name   string
		want   []byte
		args   func(out string) []string
	}{
		{"tftp-hpa", "undionly.kpxe", bios, func(out string) []string {
			return []string{"tftp", "-m", "binary", srvIP, "-c", "get", "undionly.kpxe", out}
		}},
		{"tftp-hpa", "/snponly.efi", efi, func(out string) []string {
			return []string{"tftp", "-m", "binary", srvIP, "-c", "get", "/snponly.efi", out}
		}},
		{"atftp", "snponly.efi", efi, func(out string) []string {
			return []string{"atftp", "--trace", "--option", "blksize 1428", "--option", "tsize 0", "-g", "-r", "snponly.efi", "-l", out, srvIP}
		}},
		{"busybox", "undionly.kpxe", bios, func(out string) []string {
			return []string{"busybox", "tftp", "-g", "-b", "1024", "-r", "undionly.kpxe", "-l", out, srvIP}
		}},
	}
	for i, f := range fetch {
		out := filepath.Join(dir, "got"+strconv.Itoa(i))
		log, err := l.run(30*time.Second, "client", f.args(out)...)
		got, _ := os.ReadFile(out)
		if err != nil || !bytes.Equal(got, f.want) {
			t.Errorf("%s get %s = %v, %d bytes, want the %d bytes of the file:\n%s", f.client, f.name, err, len(got), len(f.want), log)
		}
		if f.client == "atftp" {
			checkOACK(t, string(log), len(f.want))
		}
	}
	checkTFTPRefusals(t, l, dir)
}

// checkOACK checks that atftp's trace shows the server agreeing to its
// block size and telling the file's size.
func checkOACK(t *testing.T, trace string, size int) {
	t.Helper()
	m := regexp.MustCompile(`received OACK <([^>]*)>`).FindStringSubmatch(trace)
	if m == nil || !strings.Contains(m[1], "blksize: 1428") || !strings.Contains(m[1], "tsize: "+strconv.Itoa(size)) {
		t.Errorf("atftp's OACK = %q, want blksize 1428 and tsize %d:\n%s", m, size, trace)
	}
}

// checkTFTPRefusals asks for what is not served: tftp-hpa exits 0 on an
// error, so its output file must be missing or empty and it must print the
// server's error; atftp and busybox must fail.
func checkTFTPRefusals(t *testing.T, l *lab, dir string) {
	t.Helper()
	secret := filepath.Join(dir, "secret")
	if err := os.WriteFile(secret, []byte("not for tftp"), 0o644); err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"nope.kpxe", "../../../../../../etc/passwd", secret, "ipxe/undionly.kpxe", "undionly.kpxe/"} {
		out := filepath.Join(dir, "refused"+strconv.Itoa(i))
		log, err := l.run(30*time.Second, "client", "tftp", "-m", "binary", srvIP, "-c", "get", name, out)
		got, _ := os.ReadFile(out)
		if err != nil || len(got) != 0 || !strings.Contains(string(log), "Error code 1") {
			t.Errorf("tftp-hpa get %s = %v, %d bytes, %q; want the server's error 1 and no bytes", name, err, len(got), log)
		}
		if log, err := l.run(30*time.Second, "client", "busybox", "tftp", "-g", "-r", name, "-l", out, srvIP); err == nil {
			t.Errorf("busybox tftp get %s = nil error, want a failure:\n%s", name, log)
		}
	}
	if log, err := l.run(30*time.Second, "client", "atftp", "-g", "-r", "../undionly.kpxe", "-l", filepath.Join(dir, "x"), srvIP); err == nil {
		t.Errorf("atftp get ../undionly.kpxe = nil error, want a failure:\n%s", log)
	}
	if log, err := l.run(30*time.Second, "client", "busybox", "tftp", "-p", "-l", secret, "-r", "undionly.kpxe", srvIP); err == nil {
		t.Errorf("busybox tftp put = nil error, want writes refused:\n%s", log)
	}
	if got, _ := os.ReadFile(DefaultBIOSFile); bytes.Contains(got, []byte("not for tftp")) {
		t.Errorf("a TFTP write reached %s", DefaultBIOSFile)
	}
}
