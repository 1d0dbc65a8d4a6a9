package demo

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/better-compute/better-compute/bench/procmem"
	"github.com/better-compute/better-compute/emulate"
	"github.com/better-compute/better-compute/errs"
)

// rackProcess is the emulated rack in a process of its own
// (Config.RackCommand), so that the demo process's peak resident set is the
// control plane's (with its site agent) without the rack's.
type rackProcess struct {
	cmd      *exec.Cmd
	log      *os.File
	done     chan struct{}
	machines []emulate.MachineInfo
	sampler  *procmem.Sampler // the rack's process tree (ipmi_sim runs under it)
}

// startRackProcess runs cfg.RackCommand with emulate's flags and reads the
// machines it prints ({"machines": [...]}, as bcd emulate prints them). Its
// log goes to DataDir/rack.log.
func (d *Demo) startRackProcess(bootURL string) (*rackProcess, error) {
	pwFile := filepath.Join(d.cfg.DataDir, "rack-bmc-password")
	if err := os.WriteFile(pwFile, []byte(d.cfg.BMCPassword+"\n"), 0o600); err != nil {
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(d.cfg.DataDir, "rack.log"))
	if err != nil {
		return nil, err
	}
	args := append(append([]string(nil), d.cfg.RackCommand[1:]...), "--machines", strconv.Itoa(d.cfg.Machines),
		"--ipmi", strconv.Itoa(d.cfg.IPMI), "--dir", filepath.Join(d.cfg.DataDir, "rack"), "--boot-url", bootURL,
		"--bmc-username", "admin", "--bmc-password-file", pwFile)
	cmd := exec.Command(d.cfg.RackCommand[0], args...)
	cmd.Stderr = logFile
	out, err := cmd.StdoutPipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, errs.Wrap(errs.Unavailable, err, "start the emulated rack's process %s", d.cfg.RackCommand[0])
	}
	r := &rackProcess{cmd: cmd, log: logFile, done: make(chan struct{}), sampler: procmem.Sample(cmd.Process.Pid, time.Second)}
	go func() { _ = cmd.Wait(); close(r.done) }()
	var printed struct {
		Machines []emulate.MachineInfo `json:"machines"`
	}
	if err := json.NewDecoder(out).Decode(&printed); err != nil {
		r.stop()
		return nil, errs.Wrap(errs.Unavailable, err, "the emulated rack's process printed no machines (its log: %s)", logFile.Name())
	}
	r.machines = printed.Machines
	return r, nil
}

// peak is the rack process's own peak resident set (VmHWM) and its tree's
// sampled peak (with ipmi_sim), read while it runs.
func (r *rackProcess) peak() (own, tree int64, err error) {
	own, err = procmem.PeakRSSOf(r.cmd.Process.Pid)
	tree, _ = r.sampler.Peak()
	return max(own, 0), max(tree, own), err
}

// stop stops the rack's process (SIGTERM, then SIGKILL after 10 s).
func (r *rackProcess) stop() {
	r.sampler.Stop()
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		_ = r.cmd.Process.Kill()
		<-r.done
	}
	r.log.Close()
}

// RackPID is the emulated rack's process (Config.RackCommand), 0 when the
// rack runs in this one.
func (d *Demo) RackPID() int {
	if d.rackProc == nil {
		return 0
	}
	return d.rackProc.cmd.Process.Pid
}

// RackPeak is the peak resident set of the emulated rack's process tree
// (sampled each second since it started, as MemoryReport says it), 0 when
// the rack runs in this process.
func (d *Demo) RackPeak() (int64, error) {
	if d.rackProc == nil {
		return 0, nil
	}
	_, tree, err := d.rackProc.peak()
	return tree, err
}

// Machines are the emulated rack's machines, in its process or in this one.
func (d *Demo) Machines() []emulate.MachineInfo {
	if d.rackProc != nil {
		return d.rackProc.machines
	}
	return d.Rack.Machines()
}

// MemoryReport says the peak resident sets so far: this process (the
// control plane with its embedded Temporal, the site agent and the demo's
// own client; the emulated rack too unless it runs in its own process),
// PostgreSQL's process tree (sampled each second), and the rack's process.
func (d *Demo) MemoryReport() string {
	self, err := procmem.PeakRSS()
	if err != nil {
		return fmt.Sprintf("peak RSS: %v", err)
	}
	pg := int64(0)
	if d.pgSampler != nil {
		pg, _ = d.pgSampler.Peak()
	}
	const mib = 1 << 20
	if d.rackProc == nil {
		return fmt.Sprintf("peak RSS: %d MiB this process (control plane, embedded Temporal, site agent, emulated rack), "+
			"%d MiB PostgreSQL (sampled); --rack-process measures the rack apart", self/mib, pg/mib)
	}
	own, tree, err := d.rackProc.peak()
	if err != nil {
		return fmt.Sprintf("peak RSS: %d MiB control plane process, %d MiB PostgreSQL; the rack's: %v", self/mib, pg/mib, err)
	}
	return fmt.Sprintf("peak RSS: control plane %d MiB = %d MiB its process (API, workers, embedded Temporal; with the site agent) "+
		"+ %d MiB PostgreSQL (sampled); emulated rack %d MiB its process (%d MiB its tree, sampled)",
		(self+pg)/mib, self/mib, pg/mib, own/mib, tree/mib)
}

// samplePostgres samples the private PostgreSQL's process tree, if the
// control plane runs one.
func (d *Demo) samplePostgres() {
	if pid, err := procmem.PidFile(filepath.Join(d.cfg.DataDir, "postgres", "postmaster.pid")); err == nil {
		d.pgSampler = procmem.Sample(pid, time.Second)
	}
}
