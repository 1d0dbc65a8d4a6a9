package disk

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"hash/crc32"
	"unicode/utf16"

	"golang.org/x/sys/unix"

	"github.com/better-compute/better-compute/errs"
)

// SeedLabel is the GPT partition name (and the ISO's volume id) cloud-init's
// NoCloud data source looks for.
const SeedLabel = "cidata"

// MaxSeedBytes bounds a seed: user data, not an image.
const MaxSeedBytes = 16 << 20

// linuxData is the GPT type GUID of Linux file system data
// (0FC63DAF-8483-4772-8E79-3D69D8477DE4, in its on-disk byte order).
var linuxData = [16]byte{0xaf, 0x3d, 0xc6, 0x0f, 0x83, 0x84, 0x72, 0x47, 0x8e, 0x79, 0x3d, 0x69, 0xd8, 0x47, 0x7d, 0xe4}

// WriteSeed writes seed (a cidata ISO) to a partition named cidata at the
// end of disk d, after the image WriteImage wrote, as OpenStack's
// config drive does: the image's GPT is extended to the whole disk (its
// backup header and entries moved to the disk's end, the protective MBR
// widened) and one free entry (or the cidata one of an earlier write) gets
// the partition. Nothing of the image's own partitions is touched. An
// image without a GPT, or no room after its last partition, is refused
// before anything is written.
func WriteSeed(d Disk, seed []byte) error {
	if len(seed) == 0 || len(seed) > MaxSeedBytes {
		return errs.Invalid("seed", "a seed is 1 byte to %d MiB, got %d bytes", MaxSeedBytes>>20, len(seed))
	}
	t, err := openTarget(d)
	if err != nil {
		return err
	}
	defer t.Close()
	g, err := readGPT(t, d.Name)
	if err != nil {
		return err
	}
	if err := g.place(d.Name, len(seed)); err != nil {
		return err
	}
	return g.write(t, seed)
}

// ReadSeed reads back the cidata partition WriteSeed wrote (whole
// sectors: an ISO reader ignores the padding).
func ReadSeed(d Disk) ([]byte, error) {
	t, err := openTarget(d)
	if err != nil {
		return nil, err
	}
	defer t.Close()
	g, err := readGPT(t, d.Name)
	if err != nil {
		return nil, err
	}
	i := g.named(SeedLabel)
	if i < 0 {
		return nil, errs.New(errs.NotFound, "disk %s has no %s partition", d.Name, SeedLabel)
	}
	first, last := g.span(i)
	b := make([]byte, (last-first+1)*g.ss)
	_, err = t.f.ReadAt(b, first*g.ss)
	return b, wrapIO(err, "read the seed of disk %s", d.Name)
}

// gpt is a disk's GUID partition table as read, and the changes to write.
type gpt struct {
	ss, sectors int64 // sector size, disk size in sectors
	hdr         []byte
	entries     []byte
	esz         int64
	slot        int   // the entry the seed takes
	first, last int64 // its sectors
	end         int64 // the last sector of the image's partitions
}

func sectorSize(t *target) int64 {
	if !t.isDev {
		return 512
	}
	if n, err := unix.IoctlGetInt(int(t.f.Fd()), unix.BLKSSZGET); err == nil && n > 0 {
		return int64(n)
	}
	return 512
}

// readGPT reads the primary header and its entries, checking both CRCs.
func readGPT(t *target, name string) (*gpt, error) {
	g := &gpt{ss: sectorSize(t)}
	g.sectors = t.size / g.ss
	g.hdr = make([]byte, g.ss)
	if _, err := t.f.ReadAt(g.hdr, g.ss); err != nil {
		return nil, wrapIO(err, "read the partition table of disk %s", name)
	}
	le := binary.LittleEndian
	hsz := int64(le.Uint32(g.hdr[12:]))
	if string(g.hdr[:8]) != "EFI PART" || hsz < 92 || hsz > g.ss {
		return nil, errs.New(errs.Unsupported, "the image on disk %s has no GPT: user data goes to a cidata partition, which needs a GPT image", name)
	}
	if crc := le.Uint32(g.hdr[16:]); crc != headerCRC(g.hdr[:hsz]) {
		return nil, errs.New(errs.DriverError, "the GPT header of disk %s fails its CRC", name)
	}
	n, esz := int64(le.Uint32(g.hdr[80:])), int64(le.Uint32(g.hdr[84:]))
	if n == 0 || n > 1024 || esz < 128 || esz > 1024 {
		return nil, errs.New(errs.Unsupported, "disk %s: a GPT of %d entries of %d bytes", name, n, esz)
	}
	g.esz, g.entries = esz, make([]byte, n*esz)
	if _, err := t.f.ReadAt(g.entries, int64(le.Uint64(g.hdr[72:]))*g.ss); err != nil {
		return nil, wrapIO(err, "read the partition entries of disk %s", name)
	}
	if le.Uint32(g.hdr[88:]) != crc32.ChecksumIEEE(g.entries) {
		return nil, errs.New(errs.DriverError, "the GPT entries of disk %s fail their CRC", name)
	}
	return g, nil
}

func headerCRC(h []byte) uint32 {
	c := bytes.Clone(h)
	clear(c[16:20])
	return crc32.ChecksumIEEE(c)
}

func (g *gpt) entry(i int) []byte { return g.entries[int64(i)*g.esz : int64(i+1)*g.esz] }

func (g *gpt) span(i int) (int64, int64) {
	e := g.entry(i)
	return int64(binary.LittleEndian.Uint64(e[32:])), int64(binary.LittleEndian.Uint64(e[40:]))
}

func (g *gpt) used(i int) bool { return !bytes.Equal(g.entry(i)[:16], make([]byte, 16)) }

// named is the index of the used entry named label, or -1.
func (g *gpt) named(label string) int {
	for i := range int(int64(len(g.entries)) / g.esz) {
		if g.used(i) && entryName(g.entry(i)) == label {
			return i
		}
	}
	return -1
}

func entryName(e []byte) string {
	u := make([]uint16, 0, 36)
	for i := 56; i+1 < 128; i += 2 {
		c := binary.LittleEndian.Uint16(e[i:])
		if c == 0 {
			break
		}
		u = append(u, c)
	}
	return string(utf16.Decode(u))
}

// entrySectors is how many sectors the entry array takes.
func (g *gpt) entrySectors() int64 { return (int64(len(g.entries)) + g.ss - 1) / g.ss }

// place picks the seed's entry and sectors: 1 MiB aligned, just before the
// backup entries at the disk's end, after every other partition.
func (g *gpt) place(name string, size int) error {
	g.slot = g.named(SeedLabel)
	var end int64 // the last sector of the image's partitions
	for i := range int(int64(len(g.entries)) / g.esz) {
		if !g.used(i) || i == g.slot {
			continue
		}
		_, last := g.span(i)
		end = max(end, last)
	}
	if g.slot < 0 {
		for i := range int(int64(len(g.entries)) / g.esz) {
			if !g.used(i) {
				g.slot = i
				break
			}
		}
	}
	if g.slot < 0 {
		return errs.New(errs.Unsupported, "the GPT of disk %s has no free entry for the %s partition", name, SeedLabel)
	}
	align := max((1<<20)/g.ss, 1)
	n := (int64(size) + g.ss - 1) / g.ss
	n = (n + align - 1) / align * align
	lastUsable := g.sectors - 2 - g.entrySectors()
	g.first = (lastUsable + 1 - n) / align * align
	g.last = g.first + n - 1
	g.end = end
	if g.first <= end {
		return errs.New(errs.InvalidState, "disk %s has no room after the image's partitions (which end at sector %d) for the %d-byte user-data seed", name, end, size)
	}
	return nil
}

// write writes the seed, then the backup table at the disk's end, then the
// primary table, and makes it durable: until the primary header is written
// the disk reads as the image alone.
func (g *gpt) write(t *target, seed []byte) error {
	le := binary.LittleEndian
	oldAlt := int64(le.Uint64(g.hdr[32:]))
	part := make([]byte, (g.last-g.first+1)*g.ss)
	copy(part, seed)
	if _, err := t.f.WriteAt(part, g.first*g.ss); err != nil {
		return wrapIO(err, "write the seed")
	}
	e := g.entry(g.slot)
	clear(e)
	copy(e[:16], linuxData[:])
	if _, err := rand.Read(e[16:32]); err != nil {
		return errs.Wrap(errs.Internal, err, "a partition GUID")
	}
	e[16+7] = e[16+7]&0x0f | 0x40 // version 4 (the time_hi field is little-endian)
	e[16+8] = e[16+8]&0x3f | 0x80
	le.PutUint64(e[32:], uint64(g.first))
	le.PutUint64(e[40:], uint64(g.last))
	for i, c := range utf16.Encode([]rune(SeedLabel)) {
		le.PutUint16(e[56+2*i:], c)
	}
	alt, backupEntries := g.sectors-1, g.sectors-1-g.entrySectors()
	le.PutUint64(g.hdr[32:], uint64(alt))
	le.PutUint64(g.hdr[48:], uint64(backupEntries-1))
	le.PutUint32(g.hdr[88:], crc32.ChecksumIEEE(g.entries))
	backup := bytes.Clone(g.hdr)
	le.PutUint64(backup[24:], uint64(alt))
	le.PutUint64(backup[32:], 1)
	le.PutUint64(backup[72:], uint64(backupEntries))
	hsz := le.Uint32(g.hdr[12:])
	le.PutUint32(backup[16:], headerCRC(backup[:hsz]))
	le.PutUint32(g.hdr[16:], headerCRC(g.hdr[:hsz]))
	writes := []struct {
		b   []byte
		lba int64
	}{{g.entries, backupEntries}, {backup, alt}, {g.entries, int64(le.Uint64(g.hdr[72:]))}, {g.hdr, 1}}
	// The image's backup header, stale now; only past its partitions: a
	// header pointing into one must not cost it a sector.
	if oldAlt != alt && oldAlt > g.end && oldAlt < g.first {
		writes = append([]struct {
			b   []byte
			lba int64
		}{{make([]byte, g.ss), oldAlt}}, writes...)
	}
	for _, w := range writes {
		if _, err := t.f.WriteAt(w.b, w.lba*g.ss); err != nil {
			return wrapIO(err, "write the partition table")
		}
	}
	if err := g.widenProtectiveMBR(t); err != nil {
		return err
	}
	return wrapIO(t.Sync(), "sync the partition table")
}

// widenProtectiveMBR makes a protective MBR's 0xEE partition cover the
// whole disk, as it must once the GPT does.
func (g *gpt) widenProtectiveMBR(t *target) error {
	mbr := make([]byte, 512)
	if _, err := t.f.ReadAt(mbr, 0); err != nil {
		return wrapIO(err, "read the MBR")
	}
	if mbr[510] != 0x55 || mbr[511] != 0xaa || mbr[446+4] != 0xee {
		return nil
	}
	binary.LittleEndian.PutUint32(mbr[446+12:], uint32(min(g.sectors-1, 0xffffffff)))
	_, err := t.f.WriteAt(mbr[446:462], 446)
	return wrapIO(err, "write the MBR")
}

func wrapIO(err error, format string, args ...any) error {
	if err == nil {
		return nil
	}
	return errs.Wrap(errs.DriverError, err, format, args...)
}
