package iso

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"io/fs"
	"strings"
)

// maxDescriptors bounds the volume descriptors ReadFile looks through for
// the primary one, and maxDirLen the root directory it reads, so a broken
// image costs little.
const (
	maxDescriptors = 32
	maxDirLen      = 16 << 20
)

// ReadFile returns the content of the file called name in the root
// directory of the image r. Names match without case, without the ";1"
// version and a trailing '.', or by their Rock Ridge name (NM) when the
// image has one. A missing file is an error wrapping fs.ErrNotExist; bytes
// that are not an image one wrapping ErrNotISO.
func ReadFile(r io.ReaderAt, name string) ([]byte, error) {
	blockSize, root, err := primaryRoot(r)
	if err != nil {
		return nil, err
	}
	if root.length > maxDirLen {
		return nil, fmt.Errorf("%w: a root directory of %d bytes (at most %d)", ErrNotISO, root.length, maxDirLen)
	}
	dir := make([]byte, root.length)
	if _, err := r.ReadAt(dir, int64(root.sector)*int64(blockSize)); err != nil {
		return nil, fmt.Errorf("%w: reading the root directory: %v", ErrNotISO, err)
	}
	rec, err := findRecord(dir, blockSize, name)
	if err != nil {
		return nil, err
	}
	return readExtent(r, blockSize, rec)
}

// record is what ReadFile needs of a directory record.
type record struct {
	sector, length uint32
	flags          byte
	id             string
	rrName         string // the Rock Ridge NM name, when there is one
}

// primaryRoot finds the primary volume descriptor and returns its block
// size and root directory record.
func primaryRoot(r io.ReaderAt) (int, record, error) {
	b := make([]byte, SectorSize)
	for i := 0; i < maxDescriptors; i++ {
		if _, err := r.ReadAt(b, int64(pvdSector+i)*SectorSize); err != nil {
			return 0, record{}, fmt.Errorf("%w: reading volume descriptor %d: %v", ErrNotISO, i, err)
		}
		if string(b[1:6]) != "CD001" {
			return 0, record{}, fmt.Errorf("%w: volume descriptor %d lacks CD001", ErrNotISO, i)
		}
		switch b[0] {
		case 255:
			return 0, record{}, fmt.Errorf("%w: no primary volume descriptor", ErrNotISO)
		case 1:
			blockSize := int(binary.LittleEndian.Uint16(b[128:130]))
			if blockSize != 512 && blockSize != 1024 && blockSize != SectorSize {
				return 0, record{}, fmt.Errorf("%w: logical block size %d", ErrNotISO, blockSize)
			}
			root, _, err := parseRecord(b[156:190])
			if err != nil {
				return 0, record{}, err
			}
			return blockSize, root, nil
		}
	}
	return 0, record{}, fmt.Errorf("%w: no primary volume descriptor in the first %d", ErrNotISO, maxDescriptors)
}

// findRecord looks through a directory's extent for the file called name.
func findRecord(dir []byte, blockSize int, name string) (record, error) {
	for off := 0; off < len(dir); {
		if dir[off] == 0 { // the rest of this block is padding
			off = (off/blockSize + 1) * blockSize
			continue
		}
		rec, n, err := parseRecord(dir[off:])
		if err != nil {
			return record{}, err
		}
		off += n
		if rec.id == "\x00" || rec.id == "\x01" || !rec.matches(name) {
			continue
		}
		switch {
		case rec.flags&2 != 0:
			return record{}, fmt.Errorf("iso: %q is a directory, not a file", name)
		case rec.flags&0x80 != 0:
			return record{}, fmt.Errorf("iso: %q spans several extents, which ReadFile does not read", name)
		}
		return rec, nil
	}
	return record{}, fmt.Errorf("iso: no file %q in the root directory: %w", name, fs.ErrNotExist)
}

// parseRecord parses the directory record at the start of b and returns
// it and its length.
func parseRecord(b []byte) (record, int, error) {
	n := 0
	if len(b) > 0 {
		n = int(b[0])
	}
	if n < 34 || n > len(b) {
		return record{}, 0, fmt.Errorf("%w: a directory record of %d bytes, %d left in the directory", ErrNotISO, n, len(b))
	}
	idLen := int(b[32])
	if 33+idLen > n {
		return record{}, 0, fmt.Errorf("%w: a file identifier of %d bytes in a record of %d", ErrNotISO, idLen, n)
	}
	rec := record{
		sector: binary.LittleEndian.Uint32(b[2:6]),
		length: binary.LittleEndian.Uint32(b[10:14]),
		flags:  b[25],
		id:     string(b[33 : 33+idLen]),
	}
	su := 33 + idLen + (idLen+1)%2 // the system use area follows the pad byte
	if su < n {
		rec.rrName = rockRidgeName(b[su:n])
	}
	return rec, n, nil
}

// rockRidgeName joins the NM entries of a system use area (IEEE P1282
// 4.1.4); "" when there are none.
func rockRidgeName(su []byte) string {
	var name strings.Builder
	for len(su) >= 4 {
		l := int(su[2])
		if l < 4 || l > len(su) {
			break
		}
		if string(su[:2]) == "NM" && l >= 5 && su[4]&0x6 == 0 { // not "." or ".."
			name.Write(su[5:l])
		}
		su = su[l:]
	}
	return name.String()
}

// matches reports whether the record is the file called name.
func (rec record) matches(name string) bool {
	if rec.rrName != "" {
		return rec.rrName == name
	}
	id := rec.id
	if i := strings.LastIndexByte(id, ';'); i >= 0 {
		id = id[:i]
	}
	id = strings.TrimSuffix(id, ".")
	return strings.EqualFold(id, name)
}

// readExtent reads a file's data. It reads through a growing buffer, so a
// record claiming more than the image holds fails at the image's end
// instead of allocating what it claims.
func readExtent(r io.ReaderAt, blockSize int, rec record) ([]byte, error) {
	if rec.length == 0 {
		return []byte{}, nil
	}
	var buf bytes.Buffer
	sr := io.NewSectionReader(r, int64(rec.sector)*int64(blockSize), int64(rec.length))
	if _, err := buf.ReadFrom(sr); err != nil {
		return nil, fmt.Errorf("iso: reading %q: %w", rec.id, err)
	}
	if buf.Len() != int(rec.length) {
		return nil, fmt.Errorf("%w: %q claims %d bytes, the image holds %d of them", ErrNotISO, rec.id, rec.length, buf.Len())
	}
	return buf.Bytes(), nil
}
