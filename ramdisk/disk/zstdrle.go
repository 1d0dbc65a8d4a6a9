package disk

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"

	"github.com/klauspost/compress/zstd"
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
//
// With a sink (see zstdImage), a long run of zero RLE blocks is mostly not
// decompressed: the decoder gets as raw blocks only the zeros its window
// still lacks (the frame's output so far may end in zeros: the sink says how
// many, see outTail; none if the run ends the frame), and the rest of the
// run goes to the sink as a count, while the decoder waits for the run's
// first block. The decoder then ends up in the
// same state (raw and RLE blocks change neither its entropy tables nor its
// repeat offsets, and its window holds zeros either way) and, decoding
// synchronously (concurrency 1: it writes out each block before it reads
// the next), has written out every byte before the run, so the sink's zeros
// land inside the run. The frame's header loses its content size, which
// would no longer add up.
type rleToRaw struct {
	r         io.Reader
	out       []byte // bytes to hand out first: a header, as read or changed
	zeros     int    // then this many zero bytes (a converted block's contents)
	pass      int64  // then this many bytes of r, unchanged
	err       error  // once out, zeros, rawZeros, held and pass are done
	inFrame   bool   // between a frame header and the frame's last block
	checksum  bool   // the frame ends with a 4-byte checksum
	hdr       [18]byte
	have      int // bytes of hdr read for the header being parsed
	converted int // RLE blocks turned into raw blocks

	sink     zeroWriter
	window   int64  // the frame's window; 0 while its zero runs are not cut
	pending  int64  // zero RLE bytes held back
	rawZeros int64  // zeros still to hand out as raw blocks (ahead of held)
	held     []byte // the header after a held-back run
	rawHdr   [3]byte
	cuts     int64 // zero bytes handed to sink
	windows  int64 // the largest window of the frames read so far
	// frameStart is where in sink's output the frame began: the decoder's
	// window holds nothing before it
	frameStart int64
}

// zeroWriter takes n zero bytes as a count, and says (seen) how much it
// has been given and how many zeros end that.
type zeroWriter interface {
	WriteZeros(n int64) error
	seen() outTail
}

// outTail is the end of the image written so far: its length and how many
// zero bytes end it.
type outTail struct {
	n, zeros int64
}

// add follows p, written after what t has seen; allZero says p is all
// zeros, as its writer may know already; zeros is a buffer of zeros.
func (t *outTail) add(p []byte, allZero bool, zeros []byte) {
	t.n += int64(len(p))
	tz := len(p)
	if !allZero {
		tz = trailingZeros(p, zeros)
	}
	if tz == len(p) {
		t.zeros += int64(tz)
	} else {
		t.zeros = int64(tz)
	}
}

// addZeros follows n zero bytes.
func (t *outTail) addZeros(n int64) { t.n, t.zeros = t.n+n, t.zeros+n }

// trailingZeros returns how many bytes at the end of p are zero.
func trailingZeros(p, zeros []byte) int {
	n := 0
	for len(p) > 0 {
		k := min(len(p), len(zeros))
		tail := p[len(p)-k:]
		if !bytes.Equal(tail, zeros[:k]) {
			i := k - 1
			for tail[i] == 0 {
				i--
			}
			return n + k - 1 - i
		}
		n += k
		p = p[:len(p)-k]
	}
	return n
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
		case z.rawZeros > 0:
			z.rawBlock()
		case len(z.held) > 0:
			z.out, z.held = z.held, nil
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
		if z.hdr[3] == 0 && z.window > 0 && size <= zstdMaxBlock {
			z.pending += size
			z.have = 0
			if last { // the run ends the frame: an empty last block does
				z.inFrame = false
				if z.checksum {
					z.pass = 4
				}
				z.out = emptyLastBlock[:]
				z.flushPending(true)
			}
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
	z.flushPending(false)
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
		z.windows = max(z.windows, frameWindow(z.hdr[:n], single, fcsFlag))
		z.checksum, z.inFrame = fhd&(1<<2) != 0, true
		z.window = 0
		if z.sink != nil && !single {
			z.cutFrame(fhd, n)
		}
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

// emptyLastBlock is a raw block of no bytes that ends its frame.
var emptyLastBlock = [3]byte{1, 0, 0}

// cutFrame lets the zero runs of the frame whose header (n bytes, with a
// window descriptor) is in hdr be cut: it notes the window (RFC 8878,
// 3.1.1.1.2) and drops the content size from the header.
func (z *rleToRaw) cutFrame(fhd byte, n int) {
	z.frameStart = z.sink.seen().n
	z.window = windowOf(z.hdr[5])
	if fcs := [4]int{0, 2, 4, 8}[fhd>>6]; fcs > 0 {
		z.hdr[4] = fhd &^ (3 << 6)
		z.have = n - fcs // the content size is the header's last field
	}
}

// windowOf is the window a frame header's window descriptor states.
func windowOf(wd byte) int64 {
	wlog := 10 + int64(wd>>3)
	return 1<<wlog + (1<<wlog)/8*int64(wd&7)
}

// frameWindow is the window the decoder keeps for a frame whose whole
// header is hdr: the descriptor's, or a single-segment frame's content size
// (RFC 8878, 3.1.1.1.4), its header's last field.
func frameWindow(hdr []byte, single bool, fcsFlag byte) int64 {
	if !single {
		return windowOf(hdr[5])
	}
	fcs := hdr[len(hdr)-[4]int{1, 2, 4, 8}[fcsFlag]:]
	switch fcsFlag {
	case 0:
		return int64(fcs[0])
	case 1:
		return int64(binary.LittleEndian.Uint16(fcs)) + 256
	case 2:
		return int64(binary.LittleEndian.Uint32(fcs))
	}
	return int64(min(binary.LittleEndian.Uint64(fcs), math.MaxInt64))
}

// flushPending hands out the zero run held back, ahead of the header in
// z.out (or the frame's end, endsFrame): all of it to sink but what the
// decoder's window needs to end in zeros, which it gets as raw blocks.
func (z *rleToRaw) flushPending(endsFrame bool) {
	n := z.pending
	if n == 0 {
		return
	}
	z.pending = 0
	z.held, z.out = z.out, nil
	// the window needs zeros only beyond those the frame's output already
	// ends with (a cut's zeros, then a block of zeros the decoder made)
	seen := z.sink.seen()
	keep := min(n, max(0, z.window-min(seen.zeros, seen.n-z.frameStart)))
	if endsFrame {
		keep = 0 // no block of the frame comes after it
	}
	if n > keep {
		if err := z.sink.WriteZeros(n - keep); err != nil {
			z.held, z.pass, z.err = nil, 0, err
			return
		}
		z.cuts += n - keep
		n = keep
	}
	z.rawZeros = n
}

// rawBlock hands out the next raw block of rawZeros.
func (z *rleToRaw) rawBlock() {
	n := min(z.rawZeros, z.window, zstdMaxBlock)
	z.rawZeros -= n
	bh := uint32(n) << 3 // raw, not last
	z.rawHdr = [3]byte{byte(bh), byte(bh >> 8), byte(bh >> 16)}
	z.out, z.zeros = z.rawHdr[:], int(n)
}

// zstdImage is the zstd decoder of an image: synchronous, through rleToRaw,
// so that the block filler (cutZerosTo) takes long zero runs as counts.
type zstdImage struct {
	*zstd.Decoder
	z *rleToRaw
}

// zstdDecoders keeps image decoders, with their window, between image
// writes (see spares); one whose stream stated a window over keptWindow
// (zstd --long) is let go, not kept in the ramdisk's memory.
var zstdDecoders = make(spares[*zstd.Decoder], 2)

const keptWindow = 16 << 20

// newZstdImage decodes r with IgnoreChecksum (see decompressor), no window
// bound the stream's header cannot state, and buffers kept between frames.
func newZstdImage(r io.Reader) (*zstdImage, error) {
	z := &rleToRaw{r: r}
	if dec, ok := zstdDecoders.get(); ok {
		if err := dec.Reset(z); err == nil {
			return &zstdImage{Decoder: dec, z: z}, nil
		}
		dec.Close()
	}
	dec, err := zstd.NewReader(z, zstd.WithDecoderLowmem(false), zstd.WithDecoderMaxWindow(1<<31), zstd.IgnoreChecksum(true),
		zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	return &zstdImage{Decoder: dec, z: z}, nil
}

// Close hands the decoder to the next image: Reset(nil) lets go of this
// stream and leaves the decoder nothing but Reset to do.
func (d *zstdImage) Close() {
	if d.z.windows > keptWindow || d.Decoder.Reset(nil) != nil {
		d.Decoder.Close()
		return
	}
	zstdDecoders.put(d.Decoder)
}

// cutZerosTo has long zero runs handed to w; before the first read only.
func (d *zstdImage) cutZerosTo(w zeroWriter) { d.z.sink = w }
