package procmem

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"syscall"
	"testing"
	"time"
)

func TestPeakRSSFollowsAllocationAndReset(t *testing.T) {
	const size = 128 << 20
	before, err := PeakRSS()
	if err != nil {
		t.Fatalf("PeakRSS() = %v", err)
	}
	buf := make([]byte, size)
	for i := 0; i < len(buf); i += 4096 {
		buf[i] = 1 // touch every page so it is resident
	}
	after, _ := PeakRSS()
	if after < before+size*9/10 {
		t.Errorf("PeakRSS() after touching %d MiB = %d MiB, want at least %d MiB", size>>20, after>>20, (before+size*9/10)>>20)
	}
	runtime.KeepAlive(buf)
	buf = nil
	runtime.GC()
	debug.FreeOSMemory()
	if err := ResetPeak(); err != nil {
		t.Fatalf("ResetPeak() = %v", err)
	}
	reset, _ := PeakRSS()
	if reset > after-size/2 {
		t.Errorf("PeakRSS() after freeing and ResetPeak = %d MiB, want below %d MiB", reset>>20, (after-size/2)>>20)
	}
}

// startTree starts a shell with two sleeping children and returns its pid;
// the shell and its children are killed by process group at cleanup.
func startTree(t *testing.T) int {
	t.Helper()
	cmd := exec.Command("sh", "-c", "sleep 30 & sleep 30 & wait")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	pid := cmd.Process.Pid
	t.Cleanup(func() {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	return pid
}

func TestTreeAndTreeRSS(t *testing.T) {
	root := startTree(t)
	var tree []int
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		var err error
		if tree, err = Tree(root); err != nil {
			t.Fatalf("Tree(%d) = %v", root, err)
		}
		if len(tree) == 3 {
			break
		}
	}
	if len(tree) != 3 || tree[0] != root || slices.Contains(tree[1:], os.Getpid()) {
		t.Fatalf("Tree(sh) = %v, want the shell %d and its two sleeps", tree, root)
	}
	one, err := TreeRSS(tree[1])
	if err != nil || one <= 0 {
		t.Fatalf("TreeRSS(sleep) = %d, %v; want > 0", one, err)
	}
	all, err := TreeRSS(root)
	if err != nil || all <= one {
		t.Errorf("TreeRSS(sh) = %d, %v; want more than one sleep's %d", all, err, one)
	}
	s := Sample(root, 10*time.Millisecond)
	time.Sleep(50 * time.Millisecond)
	if peak, err := s.Stop(); err != nil || peak < one {
		t.Errorf("Sample(sh).Stop() = %d, %v; want at least %d", peak, err, one)
	}
	if _, err := Tree(1 << 30); err == nil {
		t.Errorf("Tree(no such pid) = nil error, want NOT_FOUND")
	}
}

func TestPidFile(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body string
		want       int
		wantErr    bool
	}{
		{"postmaster", "4242\n/var/lib/pg\n1700000000\n5432\n/tmp\n", 4242, false},
		{"negated", "-77\n", 77, false},
		{"spaces", "  12  \n", 12, false},
		{"empty", "", 0, true},
		{"zero", "0\n", 0, true},
		{"junk", "pid=12\n", 0, true},
	} {
		path := filepath.Join(dir, tc.name)
		if err := os.WriteFile(path, []byte(tc.body), 0o600); err != nil {
			t.Fatal(err)
		}
		got, err := PidFile(path)
		if got != tc.want || (err != nil) != tc.wantErr {
			t.Errorf("PidFile(%q) = %d, %v; want %d, error %v", tc.body, got, err, tc.want, tc.wantErr)
		}
	}
	if _, err := PidFile(filepath.Join(dir, "missing")); err == nil {
		t.Errorf("PidFile(missing) = nil error, want NOT_FOUND")
	}
}

// TestTreeCPU: a shell that spins in a subshell it waits for (reaped: its
// time shows in the shell's cutime) and then in a live child counts both.
func TestTreeCPU(t *testing.T) {
	// date +%s counts whole seconds: spinning until it reads start+1 can be
	// over at once (a start at .999), so the subshell spins until start+2,
	// between one and two seconds.
	cmd := exec.Command("sh", "-c", `(end=$(($(date +%s)+2)); while [ "$(date +%s)" -lt $end ]; do :; done); `+
		`(while :; do :; done) & echo spinning; wait`)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	root := cmd.Process.Pid
	t.Cleanup(func() {
		_ = syscall.Kill(-root, syscall.SIGKILL)
		_ = cmd.Wait()
	})
	first, err := TreeCPU(root)
	if err != nil {
		t.Fatalf("TreeCPU(sh) = %v", err)
	}
	if _, err := out.Read(make([]byte, 16)); err != nil { // the first subshell has exited
		t.Fatal(err)
	}
	reaped, err := TreeCPU(root)
	if err != nil {
		t.Fatalf("TreeCPU(sh) = %v", err)
	}
	// The subshell spun for a second or more of wall time: on a loaded machine it
	// gets a share of a core, and its date commands count too.
	if reaped-first < 100*time.Millisecond {
		t.Errorf("TreeCPU(sh) grew by %s while a child it reaped spun for a second or more, want at least 100ms", reaped-first)
	}
	time.Sleep(time.Second)
	live, err := TreeCPU(root)
	if err != nil {
		t.Fatalf("TreeCPU(sh) = %v", err)
	}
	if live-reaped < 100*time.Millisecond {
		t.Errorf("TreeCPU(sh) grew by %s in 1s of a live child spinning, want at least 100ms", live-reaped)
	}
	if _, err := TreeCPU(1 << 30); err == nil {
		t.Errorf("TreeCPU(no such pid) = nil error, want NOT_FOUND")
	}
}
