package disk

import (
	"encoding/binary"
	"errors"
	"io"
	"math"
)

// rleToRaw passes a zstd stream through unchanged but for one thing: an
// RLE block of zero bytes becomes the raw block of the same zero bytes (its
// type bits changed, the zeros written straight into the decoder's buffer).
// The two decode to the same bytes and leave the decoder's state the same
// (neither carries sequences, offsets or entropy tables; RFC 8878, 3.1.1.2),
// but the Go decoder expands an RLE block byte by byte, which on a sparse
// image made with the zstd tool (a zero block there is RLE blocks) was most
// of the time of the whole write; a raw block it only copies. The stream's
// sha256 is taken below this reader, on the stream as served. Anything this
// reader does not understand (another magic, a reserved block type, a
// truncated header) it passes through as it is, for the decoder to refuse.
type rleToRaw struct {
	r         io.Reader
	out       []byte // bytes to hand out first: a header, as read or changed
	zeros     int    // then this many zero bytes (a converted block's contents)
	pass      int64  // then this many bytes of r, unchanged
	err       error  // once out, zeros and pass are done
	inFrame   bool   // between a frame header and the frame's last block
	checksum  bool   // the frame ends with a 4-byte checksum
	hdr       [18]byte
	have      int // bytes of hdr read for the header being parsed
	converted int // RLE blocks turned into raw blocks
}

const (
	zstdMagic      = 0xFD2FB528
	skippableMagic = 0x184D2A50 // to 0x184D2A5F
	zstdMaxBlock   = 128 << 10
)

func (z *rleToRaw) Read(p []byte) (int, error) {
	for len(p) > 0 {
		switch {
		case len(z.out) > 0:
			n := copy(p, z.out)
			z.out = z.out[n:]
			return n, nil
		case z.zeros > 0:
			n := min(len(p), z.zeros)
			clear(p[:n])
			z.zeros -= n
			return n, nil
		case z.pass > 0:
			n, err := z.r.Read(p[:min(int64(len(p)), z.pass)])
			z.pass -= int64(n)
			if err != nil {
				z.pass, z.err = 0, err // a truncated stream ends here: the decoder says so
			}
			if n > 0 || err != nil {
				return n, err
			}
		case z.err != nil:
			return 0, z.err
		default:
			z.next()
		}
	}
	return 0, nil
}

// next reads the next header, a frame's or a block's, and sets what to hand
// out.
func (z *rleToRaw) next() {
	if !z.inFrame {
		z.nextFrame()
		return
	}
	if !z.fill(3) {
		return
	}
	bh := uint32(z.hdr[0]) | uint32(z.hdr[1])<<8 | uint32(z.hdr[2])<<16
	last, typ, size := bh&1 != 0, (bh>>1)&3, int64(bh>>3)
	switch typ {
	case 0, 2: // raw, compressed: size bytes of contents
		z.pass = size
	case 1: // RLE: one byte, repeated size times
		if !z.fill(4) {
			return
		}
		if z.hdr[3] == 0 && size <= zstdMaxBlock {
			bh &^= 3 << 1 // type raw; its contents are the zeros
			z.hdr[0], z.hdr[1], z.hdr[2] = byte(bh), byte(bh>>8), byte(bh>>16)
			z.have, z.zeros = 3, int(size)
			z.converted++
		}
	default: // reserved: nothing this reader understands follows
		z.pass = math.MaxInt64
		z.emit()
		return
	}
	if last {
		z.inFrame = false
		if z.checksum {
			z.pass += 4
		}
	}
	z.emit()
}

// nextFrame reads a frame's magic and, for a zstd frame, the rest of its
// header (RFC 8878, 3.1.1.1).
func (z *rleToRaw) nextFrame() {
	if !z.fill(4) {
		return
	}
	switch magic := binary.LittleEndian.Uint32(z.hdr[:4]); {
	case magic == zstdMagic:
		if !z.fill(5) {
			return
		}
		fhd := z.hdr[4]
		single, fcsFlag := fhd&(1<<5) != 0, fhd>>6
		n := 5 + [4]int{0, 1, 2, 4}[fhd&3] + [4]int{0, 2, 4, 8}[fcsFlag]
		if !single {
			n++ // window descriptor
		} else if fcsFlag == 0 {
			n++ // a single-segment frame's content size takes a byte at least
		}
		if !z.fill(n) {
			return
		}
		z.checksum, z.inFrame = fhd&(1<<2) != 0, true
	case magic&0xFFFFFFF0 == skippableMagic:
		if !z.fill(8) {
			return
		}
		z.pass = int64(binary.LittleEndian.Uint32(z.hdr[4:8]))
	default: // not zstd: passed through for the decoder to refuse
		z.pass = math.MaxInt64
	}
	z.emit()
}

// fill reads z.hdr up to n bytes in all. On a short read it hands out what
// it read and then io.EOF (or the read error), as the stream itself would.
func (z *rleToRaw) fill(n int) bool {
	k, err := io.ReadFull(z.r, z.hdr[z.have:n])
	z.have += k
	if err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			err = io.EOF
		}
		z.emit()
		z.err = err
		return false
	}
	return true
}

// emit hands out the header read so far.
func (z *rleToRaw) emit() {
	z.out, z.have = z.hdr[:z.have], 0
}
