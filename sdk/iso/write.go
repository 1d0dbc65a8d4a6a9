package iso

import (
	"bytes"
	"encoding/binary"
)

// image is the part of an image before the files' data.
type image struct {
	head [][]byte
}

// newImage builds the system area, the volume descriptors, the path tables
// and the root directory for entries already laid out.
func newImage(volumeID string, entries []entry) image {
	root := rootDirectory(entries)
	size := uint32(rootSector + len(root)/SectorSize)
	for _, e := range entries {
		size += uint32(sectors(len(e.data)))
	}
	rootLen := uint32(len(root))
	return image{head: [][]byte{
		make([]byte, pvdSector*SectorSize), // system area
		primaryDescriptor(volumeID, size, rootLen),
		terminator(),
		pathTable(binary.LittleEndian),
		pathTable(binary.BigEndian),
		root,
	}}
}

// primaryDescriptor is the primary volume descriptor (ECMA-119 8.4).
func primaryDescriptor(volumeID string, size, rootLen uint32) []byte {
	b := make([]byte, SectorSize)
	b[0] = 1 // primary
	copy(b[1:6], "CD001")
	b[6] = 1
	text(b[8:40], "")        // system identifier
	text(b[40:72], volumeID) // volume identifier
	both32(b[80:88], size)   // volume space size, in sectors
	both16(b[120:124], 1)    // volume set size
	both16(b[124:128], 1)    // volume sequence number
	both16(b[128:132], SectorSize)
	both32(b[132:140], pathTableLen)
	binary.LittleEndian.PutUint32(b[140:144], pathLSector)
	binary.BigEndian.PutUint32(b[148:152], pathMSector)
	copy(b[156:190], dirRecord([]byte{0}, rootSector, rootLen, true))
	text(b[190:318], "") // volume set identifier
	text(b[318:446], "") // publisher
	text(b[446:574], "") // data preparer
	text(b[574:702], "") // application
	text(b[702:813], "") // copyright, abstract and bibliographic file identifiers
	for _, off := range []int{813, 830, 847, 864} {
		unspecifiedDate(b[off : off+17]) // creation, modification, expiration, effective
	}
	b[881] = 1 // file structure version
	return b
}

// terminator is the volume descriptor set terminator (ECMA-119 8.3).
func terminator() []byte {
	b := make([]byte, SectorSize)
	b[0] = 255
	copy(b[1:6], "CD001")
	b[6] = 1
	return b
}

// pathTableLen is the size of a path table holding the root only.
const pathTableLen = 10

// pathTable is a path table (ECMA-119 9.4) of the root directory alone, in
// one byte order, padded to its sector.
func pathTable(order binary.ByteOrder) []byte {
	b := make([]byte, SectorSize)
	b[0] = 1 // identifier length: the root's is one 0 byte
	order.PutUint32(b[2:6], rootSector)
	order.PutUint16(b[6:8], 1) // the root is its own parent
	return b
}

// rootDirectory is the root's extent: ".", "..", then one record per file,
// no record crossing a sector boundary (ECMA-119 6.8.1.1).
func rootDirectory(entries []entry) []byte {
	n := dirSectors(entries)
	var buf bytes.Buffer
	add := func(rec []byte) {
		if used := buf.Len() % SectorSize; used+len(rec) > SectorSize {
			buf.Write(make([]byte, SectorSize-used))
		}
		buf.Write(rec)
	}
	self := uint32(n * SectorSize)
	add(dirRecord([]byte{0}, rootSector, self, true))
	add(dirRecord([]byte{1}, rootSector, self, true))
	for _, e := range entries {
		add(dirRecord([]byte(e.id), e.sector, uint32(len(e.data)), false))
	}
	buf.Write(make([]byte, n*SectorSize-buf.Len()))
	return buf.Bytes()
}

// dirSectors is how many sectors the root directory of entries takes.
func dirSectors(entries []entry) int {
	n, used := 1, 2*recordLen(1)
	for _, e := range entries {
		l := recordLen(len(e.id))
		if used+l > SectorSize {
			n, used = n+1, 0
		}
		used += l
	}
	return n
}

// recordLen is the length of a directory record whose identifier is n
// bytes: 33 fixed bytes, the identifier, a pad byte to an even length.
func recordLen(n int) int { return 33 + n + (n+1)%2 }

// dirRecord is a directory record (ECMA-119 9.1). Its recording date is
// all zeros: not specified.
func dirRecord(id []byte, sector, length uint32, dir bool) []byte {
	b := make([]byte, recordLen(len(id)))
	b[0] = byte(len(b))
	both32(b[2:10], sector)
	both32(b[10:18], length)
	if dir {
		b[25] = 2
	}
	both16(b[28:32], 1) // volume sequence number
	b[32] = byte(len(id))
	copy(b[33:], id)
	return b
}

// text fills a text field with s padded with spaces.
func text(b []byte, s string) {
	n := copy(b, s)
	for i := n; i < len(b); i++ {
		b[i] = ' '
	}
}

// unspecifiedDate writes the volume descriptor date "not specified":
// sixteen '0' digits and a zero offset (ECMA-119 8.4.26.1).
func unspecifiedDate(b []byte) {
	for i := 0; i < 16; i++ {
		b[i] = '0'
	}
	b[16] = 0
}
