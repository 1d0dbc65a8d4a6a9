package emulate

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/emulate/redfishbmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/atomicfile"
	"github.com/better-compute/better-compute/ramdisk/disk"
)

// identity is what a machine keeps across runs of the rack, in
// Dir/<machine>/machine.json: its SMBIOS UUID and MACs.
type identity struct {
	UUID string   `json:"uuid"`
	MACs []string `json:"macs"`
}

// machine is one emulated machine.
type machine struct {
	rack  *Rack
	name  string
	dir   string
	id    identity
	disks []disk.Disk
	bmc   machineBMC
	log   *slog.Logger

	bootMu    sync.Mutex  // serializes boots and power-offs
	unplugged atomic.Bool // the NIC's link is down: PXE finds no network

	mu     sync.Mutex
	st     MachineState
	stopRD context.CancelFunc // the running ramdisk, nil when none
	rdDone chan struct{}
}

func (r *Rack) newMachine(i int) (*machine, error) {
	name := fmt.Sprintf("emu-%02d", i+1)
	m := &machine{rack: r, name: name, dir: filepath.Join(r.cfg.Dir, name), log: r.log.With("machine", name),
		st: MachineState{Power: string(bmc.Off), BootedInto: BootedOff}}
	if err := os.MkdirAll(m.dir, 0o700); err != nil {
		return nil, errs.Wrap(errs.Internal, err, "make %s", m.dir)
	}
	var err error
	if m.id, err = loadIdentity(m.dir); err != nil {
		return nil, err
	}
	if err := m.makeDisks(r.cfg.DisksPerMachine); err != nil {
		return nil, err
	}
	if m.bmc, err = m.startBMC(i); err != nil {
		return nil, err
	}
	return m, nil
}

// loadIdentity reads dir/machine.json or makes and writes a new identity.
func loadIdentity(dir string) (identity, error) {
	p := filepath.Join(dir, "machine.json")
	var id identity
	b, err := os.ReadFile(p)
	if err == nil {
		if err := json.Unmarshal(b, &id); err != nil || id.UUID == "" || len(id.MACs) == 0 {
			return identity{}, errs.New(errs.InvalidState, "%s is damaged; remove the machine's directory to start it afresh", p)
		}
		return id, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return identity{}, errs.Wrap(errs.Internal, err, "read %s", p)
	}
	var r [6]byte
	_, _ = rand.Read(r[:]) // crypto/rand does not fail on Linux
	id.UUID = redfishbmc.RandomUUID()
	id.MACs = []string{fmt.Sprintf("52:54:00:%02x:%02x:%02x", r[0], r[1], r[2]),
		fmt.Sprintf("52:54:00:%02x:%02x:%02x", r[3], r[4], r[5])}
	b, _ = json.MarshalIndent(id, "", "  ")
	if err := atomicfile.Write(p, append(b, '\n'), 0o600); err != nil {
		return identity{}, err
	}
	return id, nil
}

// makeDisks creates the machine's fake disks (kept when they exist). WWNs
// derive from the machine's UUID, so they are stable across runs. A size the
// filesystem cannot hold (ext4 stops 4 KiB short of 16 TiB) is cut by a MiB
// until it fits.
func (m *machine) makeDisks(sizes []int64) error {
	for i, size := range sizes {
		sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", m.id.UUID, i)))
		d := disk.Disk{WWN: "0x5" + hex.EncodeToString(sum[:])[:15], Serial: fmt.Sprintf("EMU%X", sum[8:14]),
			Model: fmt.Sprintf("Emulated Disk %d GiB", size>>30), SizeBytes: size, SupportsSecureErase: true, SupportsCryptoErase: i > 0}
		d.Name = disk.NameFor(d.WWN, d.Serial)
		for {
			err := disk.CreateFakeDisk(m.dir, d)
			if errors.Is(err, syscall.EFBIG) && d.SizeBytes > 1<<21 {
				os.Remove(filepath.Join(m.dir, d.Name+".img"))
				d.SizeBytes -= 1 << 20
				continue
			}
			if err != nil && !errs.Is(err, errs.AlreadyExists) {
				return err
			}
			break
		}
		d.Path = filepath.Join(m.dir, d.Name+".img")
		m.disks = append(m.disks, d)
	}
	return nil
}

func (m *machine) info() MachineInfo {
	return MachineInfo{Name: m.name, BMCAddress: m.bmc.address(), BMCDriver: m.bmc.driver(),
		BMCUsername: m.rack.cfg.Username, MACs: append([]string(nil), m.id.MACs...), ProductUUID: m.id.UUID}
}

func (m *machine) state() MachineState {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := m.st
	s.Power = string(m.bmc.power())
	s.Tokens = append([]string(nil), m.st.Tokens...)
	s.BMCCalls = m.bmc.calls()
	s.RamdiskRan = append([]string(nil), m.st.RamdiskRan...)
	s.InstallTokens = append([]string(nil), m.st.InstallTokens...)
	s.Media = m.bmc.media()
	return s
}

func (m *machine) close() {
	m.bootMu.Lock()
	m.stopRamdisk()
	m.bootMu.Unlock()
	m.bmc.close()
}
