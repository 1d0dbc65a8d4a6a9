// Package boot owns the site agent's HTTP boot: the per-MAC boot table that
// boot.setEntry and boot.clearEntry change (persisted as JSON in the data dir
// so a restart keeps it), the iPXE script each PXE-booting machine fetches
// (the ramdisk with its node id, discovery token, relay URL and CA
// fingerprint on the kernel command line, or an exit to the next boot
// device), the PXE discoveries of unknown MACs, and the ramdisk kernel and
// initrd files.
package boot

import (
	"encoding/json"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/slotfile"
	"github.com/better-compute/better-compute/kinds"
)

// Discovery is an unknown MAC seen PXE-booting.
type Discovery struct {
	MAC       string    `json:"mac"`
	FirstSeen time.Time `json:"firstSeen"`
	LastSeen  time.Time `json:"lastSeen"`
	Count     int       `json:"count"`
	// ClientUUID (DHCP option 97) and Arch (option 93, by its IANA name)
	// are from the machine's last proxy-DHCP request; empty when it was
	// seen only fetching /ipxe. Firmwares disagree on the byte order of
	// the UUID's first three fields: ClientUUID is the wire order.
	ClientUUID string `json:"clientUuid,omitempty"`
	Arch       string `json:"arch,omitempty"`
}

// MaxDiscoveries bounds the discoveries kept: a new MAC beyond it replaces
// the one seen longest ago, so a flood of made-up MACs on the provisioning
// network cannot grow the table without end.
const MaxDiscoveries = 1024

// file is the table as persisted.
type file struct {
	Entries     []kinds.BootEntry `json:"entries"`
	Discoveries []Discovery       `json:"discoveries"`
}

// Table is the boot table. Its methods are safe for concurrent use.
type Table struct {
	log *slog.Logger
	now func() time.Time

	mu          sync.Mutex
	entries     map[string]kinds.BootEntry // by node id
	byMAC       map[string]string          // MAC → node id
	discoveries map[string]Discovery       // by MAC
	trails      trails                     // ramdisk boots in progress, by node (not persisted)
	// changed holds a token after a discovery was recorded, until the
	// reporter takes it: many sightings while it reports wake it once.
	changed chan struct{}

	// A change is in memory at once and on disk when its call returns;
	// the changes made while one write is in flight go to disk together in
	// the next (commitLocked). version counts changes, written is the
	// version on disk, writing says a write is in flight (without mu),
	// wrote wakes the changes waiting for it.
	version, written uint64
	writing          bool
	wrote            *sync.Cond
	write            func(data []byte) error // the slotfile's Write
}

// Open loads the table persisted at path (in two slot files beside it,
// path.0 and path.1: see slotfile; a table written whole at path before
// them is read and replaced at the first change), or starts an empty one.
func Open(path string, log *slog.Logger) (*Table, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	sf, b, err := slotfile.Open(path, 0o600)
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "cannot read the boot table %s", path)
	}
	t := &Table{log: log, now: time.Now, changed: make(chan struct{}, 1), write: sf.Write,
		entries: map[string]kinds.BootEntry{}, byMAC: map[string]string{}, discoveries: map[string]Discovery{}}
	t.wrote = sync.NewCond(&t.mu)
	if b == nil {
		return t, nil
	}
	var f file
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, errs.Wrap(errs.Internal, err, "the boot table %s is corrupt; move it and %s.0, %s.1 away to start empty", path, path, path)
	}
	for _, e := range f.Entries {
		t.entries[e.NodeID] = e
		for _, m := range e.MACs {
			t.byMAC[m] = e.NodeID
		}
	}
	for _, d := range f.Discoveries {
		t.discoveries[d.MAC] = d
	}
	return t, nil
}

// SetEntry replaces the node's entry. A MAC that belonged to another node
// moves to this one. Safe to call twice.
func (t *Table) SetEntry(e kinds.BootEntry) error {
	if err := validEntry(&e); err != nil {
		return err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.removeLocked(e.NodeID)
	for _, m := range e.MACs {
		if other, ok := t.byMAC[m]; ok {
			oe := t.entries[other]
			oe.MACs = slices.DeleteFunc(oe.MACs, func(x string) bool { return x == m })
			if len(oe.MACs) == 0 {
				delete(t.entries, other)
			} else {
				t.entries[other] = oe
			}
		}
		t.byMAC[m] = e.NodeID
	}
	t.entries[e.NodeID] = e
	t.followLocked(e.NodeID, &e)
	return t.commitLocked()
}

// ClearEntry forgets the node's entry; nothing if there is none.
func (t *Table) ClearEntry(nodeID string) error {
	if nodeID == "" {
		return errs.Invalid("nodeId", "clearing a boot entry needs the node id")
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.entries[nodeID]; !ok {
		return nil
	}
	t.removeLocked(nodeID)
	t.followLocked(nodeID, nil)
	return t.commitLocked()
}

// Lookup returns the entry that serves mac (already normalized).
func (t *Table) Lookup(mac string) (kinds.BootEntry, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	e, ok := t.entries[t.byMAC[mac]]
	return e, ok
}

// Discoveries returns the unknown MACs seen PXE-booting, by MAC.
func (t *Table) Discoveries() []Discovery {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]Discovery, 0, len(t.discoveries))
	for _, d := range t.discoveries {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].MAC < out[j].MAC })
	return out
}

// Discovered records an unknown MAC's PXE boot: seen.MAC (normalized),
// and its ClientUUID and Arch when known (an empty one keeps what an
// earlier request told). The table sets the times and the count.
func (t *Table) Discovered(seen Discovery) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now().UTC()
	d, ok := t.discoveries[seen.MAC]
	if !ok {
		t.evictLocked()
		d = Discovery{MAC: seen.MAC, FirstSeen: now}
	}
	d.LastSeen = now
	d.Count++
	if seen.ClientUUID != "" {
		d.ClientUUID = seen.ClientUUID
	}
	if seen.Arch != "" {
		d.Arch = seen.Arch
	}
	t.discoveries[seen.MAC] = d
	select {
	case t.changed <- struct{}{}:
	default: // a wake-up is pending already
	}
	return t.commitLocked()
}

// DiscoveriesChanged receives after a discovery was recorded (once for
// any number of them until it is read).
func (t *Table) DiscoveriesChanged() <-chan struct{} { return t.changed }

// evictLocked makes room for one more discovery.
func (t *Table) evictLocked() {
	if len(t.discoveries) < MaxDiscoveries {
		return
	}
	var oldest Discovery
	for _, d := range t.discoveries {
		if oldest.MAC == "" || d.LastSeen.Before(oldest.LastSeen) {
			oldest = d
		}
	}
	delete(t.discoveries, oldest.MAC)
}

func (t *Table) removeLocked(nodeID string) {
	for _, m := range t.entries[nodeID].MACs {
		if t.byMAC[m] == nodeID {
			delete(t.byMAC, m)
		}
	}
	delete(t.entries, nodeID)
}

// commitLocked returns once the table as it is now is on disk, written
// atomically with mode 0600 (entries hold discovery tokens). The write
// happens without mu, so lookups and marks go on meanwhile, and changes
// that arrive during it are written together by the next one: with many
// boots at once, one encode and fsync of the whole table serves them all
// instead of one each. A failed write fails its callers; a change waiting
// for it writes again.
func (t *Table) commitLocked() error {
	t.version++
	mine := t.version
	for t.written < mine {
		if t.writing {
			t.wrote.Wait()
			continue
		}
		v := t.version
		b, err := t.encodeLocked()
		if err != nil {
			return err
		}
		t.writing = true
		t.mu.Unlock()
		err = t.write(b)
		t.mu.Lock()
		t.writing = false
		t.wrote.Broadcast()
		if err != nil {
			return err
		}
		t.written = v
	}
	return nil
}

// encodeLocked is the table as persisted.
func (t *Table) encodeLocked() ([]byte, error) {
	var f file
	for _, e := range t.entries {
		f.Entries = append(f.Entries, e)
	}
	sort.Slice(f.Entries, func(i, j int) bool { return f.Entries[i].NodeID < f.Entries[j].NodeID })
	for _, d := range t.discoveries {
		f.Discoveries = append(f.Discoveries, d)
	}
	sort.Slice(f.Discoveries, func(i, j int) bool { return f.Discoveries[i].MAC < f.Discoveries[j].MAC })
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "cannot encode the boot table")
	}
	return b, nil
}
