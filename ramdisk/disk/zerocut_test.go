package disk

import (
	"bytes"
	"os/exec"
	"strconv"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/better-compute/better-compute/internal/testenv"
)

// zeroSink collects what a zstdImage writes, its cut-out zeros counted.
type zeroSink struct {
	b   []byte
	cut int64
}

func (s *zeroSink) Write(p []byte) (int, error) { s.b = append(s.b, p...); return len(p), nil }

func (s *zeroSink) WriteZeros(n int64) error {
	s.b = append(s.b, make([]byte, n)...)
	s.cut += n
	return nil
}

// seen is outTail's view of all of s.b, the slow way.
func (s *zeroSink) seen() outTail {
	i := len(s.b) - 1
	for i >= 0 && s.b[i] == 0 {
		i--
	}
	return outTail{n: int64(len(s.b)), zeros: int64(len(s.b) - 1 - i)}
}

// decodeCut decodes stream as WriteImage does (zstdImage, its long zero runs
// handed to the sink as counts) and says how many zero bytes it cut out.
func decodeCut(t *testing.T, stream []byte) ([]byte, int64, error) {
	t.Helper()
	d, err := newZstdImage(bytes.NewReader(stream))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	s := &zeroSink{}
	d.cutZerosTo(s)
	_, err = d.WriteTo(s)
	return s.b, s.cut, err
}

// cutImage is 40 MiB of 1 MiB pieces: data (which matches against the zeros
// before it and repeats data from before the runs), a run of 20 MiB, one of
// 5 MiB, one of 6, and a zero tail of 4.
func cutImage() []byte {
	const mib = 1 << 20
	img := make([]byte, 40*mib)
	data := testImage(1, 0, 0)[:mib]
	for _, at := range []int{0, 21, 27, 28, 35} {
		copy(img[at*mib:], data)
	}
	img[21*mib+100] = 0 // a zero inside the data, next to the run
	copy(img[27*mib:], make([]byte, 64<<10))
	return img
}

// TestZstdImageCutsZeroRuns: long zero runs are cut out of the decoding and
// the image decodes to the same bytes, for streams of the zstd tool (a
// content size, one frame or concatenated frames, checksums) and of the Go
// encoder (zero blocks as RLE blocks, a small window), and hand-made ones.
func TestZstdImageCutsZeroRuns(t *testing.T) {
	img := cutImage()
	small := encodeZstd(t, img, zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithWindowSize(1<<20), zstd.WithEncoderCRC(true))
	hand, handWant := handStream()
	tests := []struct {
		name         string
		stream, want []byte
		wantCut      int64
	}{
		{"go encoder, 1 MiB window", small, img, 20 << 20},
		{"concatenated with hand-made", append(append(append([]byte{}, hand...), small...), hand...),
			append(append(append([]byte{}, handWant...), img...), handWant...), 20 << 20},
	}
	if _, err := exec.LookPath("zstd"); err != nil {
		testenv.Missing(t, "the zstd tool", "apt-get install -y zstd")
	} else {
		// -1 writes zero runs as matches, not RLE blocks: nothing to cut
		// -3 -T2 writes 8 MiB jobs, each beginning with a compressed block
		// (of zeros here): the decoder's window holds the zeros before it, so
		// only the first piece of a run keeps a window's worth of them
		for level, wantCut := range map[string]int64{"-1": 0, "-3": 16 << 20, "-19": 8 << 20} {
			s := zstdTool(t, img, level)
			tests = append(tests, struct {
				name         string
				stream, want []byte
				wantCut      int64
			}{"zstd " + level, s, img, wantCut})
		}
		twice := append(zstdTool(t, img, "-3"), zstdTool(t, img, "-3")...)
		tests = append(tests, struct {
			name         string
			stream, want []byte
			wantCut      int64
		}{"zstd -3 twice", twice, append(append([]byte{}, img...), img...), 16 << 20})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, cut, err := decodeCut(t, tt.stream)
			if err != nil || !bytes.Equal(got, tt.want) {
				t.Fatalf("decodeCut() = %d bytes (first difference at %d), %v; want the %d bytes of the image",
					len(got), firstDiff(got, tt.want), err, len(tt.want))
			}
			if cut < tt.wantCut {
				t.Errorf("decodeCut() cut %d zero bytes out, want %d at least", cut, tt.wantCut)
			}
		})
	}
}

// TestZstdImageKeepsTruncationAnError: a stream with cuts, cut short at the
// edges of its zero runs (and every 4093 bytes elsewhere), fails to decode
// where plain decoding fails.
func TestZstdImageKeepsTruncationAnError(t *testing.T) {
	img := cutImage()
	stream := encodeZstd(t, img, zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithWindowSize(1<<20))
	if _, cut, err := decodeCut(t, stream); err != nil || cut == 0 {
		t.Fatalf("decodeCut(whole stream) cut %d bytes, %v; want a cut", cut, err)
	}
	rle := []byte{0x02, 0x00, 0x10, 0x00} // the header of a 128 KiB RLE block, and its zero
	isRLE := func(at int) bool { return at >= 0 && bytes.HasPrefix(stream[at:], rle) }
	var ends []int
	for at := range len(stream) {
		if at%4093 == 0 {
			ends = append(ends, at)
		}
		if isRLE(at) && (!isRLE(at-4) || !isRLE(at+4)) { // first or last block of a run
			for d := -5; d <= 9; d++ {
				ends = append(ends, max(0, at+d))
			}
		}
	}
	if len(ends) < 100 {
		t.Fatalf("%d ends to try, want the edges of the stream's zero runs too", len(ends))
	}
	for _, end := range ends {
		_, _, plainErr := decodeZstd(t, stream[:end], false)
		if got, _, err := decodeCut(t, stream[:end]); (err == nil) != (plainErr == nil) {
			t.Fatalf("decodeCut(first %d of %d bytes) = %d bytes, %v; plain decoding %v", end, len(stream), len(got), err, plainErr)
		}
	}
}

func zstdTool(t *testing.T, raw []byte, level string) []byte {
	t.Helper()
	cmd := exec.Command("zstd", "-q", "-c", level, "-T2", "--stream-size="+strconv.Itoa(len(raw)))
	cmd.Stdin = bytes.NewReader(raw)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("zstd %s: %v", level, err)
	}
	return out
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// TestOutTailFollowsZeros: outTail's length and trailing zeros after pieces
// of data, of zeros, data ending in zeros (within and beyond zeroCmp) and
// counted zeros are those of the bytes written.
func TestOutTailFollowsZeros(t *testing.T) {
	zeros := make([]byte, zeroCmp)
	data := func(n, tz int) []byte {
		p := bytes.Repeat([]byte{7}, n)
		clear(p[n-tz:])
		return p
	}
	var all []byte
	var tail outTail
	for i, p := range [][]byte{data(10, 0), make([]byte, 5), data(100, 3), make([]byte, 3*zeroCmp+5), data(5, 5),
		data(2*zeroCmp+9, zeroCmp+7), nil, data(zeroCmp, 1), make([]byte, zeroCmp)} {
		all = append(all, p...)
		tail.add(p, false, zeros)
		want := (&zeroSink{b: all}).seen()
		if tail != want {
			t.Fatalf("after piece %d: outTail = %+v, want %+v", i, tail, want)
		}
	}
	tail.addZeros(9)
	if want := (&zeroSink{b: append(all, make([]byte, 9)...)}).seen(); tail != want {
		t.Errorf("after addZeros(9): outTail = %+v, want %+v", tail, want)
	}
}
