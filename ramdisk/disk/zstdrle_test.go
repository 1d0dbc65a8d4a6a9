package disk

import (
	"bytes"
	"encoding/binary"
	"io"
	"testing"

	"github.com/klauspost/compress/zstd"
)

// handStream is a stream written by hand to reach what an encoder may not
// write: a single-segment frame with a content size, a skippable frame, a
// frame without content size or single segment but with a dictionary id
// field, a non-zero RLE block, and
// zero RLE blocks inside and at the end of frames. It decodes to want.
func handStream() (stream, want []byte) {
	le32 := func(v uint32) []byte { return binary.LittleEndian.AppendUint32(nil, v) }
	block := func(last bool, typ, size uint32) []byte {
		bh := size<<3 | typ<<1
		if last {
			bh |= 1
		}
		return []byte{byte(bh), byte(bh >> 8), byte(bh >> 16)}
	}
	var s []byte
	s = append(s, le32(zstdMagic)...)
	s = append(s, 0x20, 105)                          // single segment, 1-byte content size 105
	s = append(append(s, block(false, 1, 100)...), 0) // RLE: 100 zeros
	s = append(append(s, block(true, 0, 5)...), "hello"...)
	s = append(append(append(s, le32(skippableMagic+3)...), le32(3)...), "abc"...)
	s = append(s, le32(zstdMagic)...)
	s = append(s, 0x01, 0x00, 0x00)                   // no content size; window 1 KiB; a 1-byte dictionary id, 0: none
	s = append(append(s, block(false, 1, 10)...), 7)  // RLE: ten 7s, left as it is
	s = append(append(s, block(true, 1, 1000)...), 0) // RLE: 1000 zeros, the last block
	want = append(append(append(make([]byte, 100), "hello"...), bytes.Repeat([]byte{7}, 10)...), make([]byte, 1000)...)
	return s, want
}

// decodeZstd decodes stream with the decoder's checksum check on, through
// rleToRaw when conv is set, and says how many blocks it converted.
func decodeZstd(t *testing.T, stream []byte, conv bool) ([]byte, int, error) {
	t.Helper()
	var r io.Reader = bytes.NewReader(stream)
	z := &rleToRaw{r: r}
	if conv {
		r = z
	}
	d, err := zstd.NewReader(r, zstd.WithDecoderMaxWindow(1<<31))
	if err != nil {
		return nil, 0, err
	}
	defer d.Close()
	out, err := io.ReadAll(d)
	return out, z.converted, err
}

// TestRLEToRawDecodesTheSame: through rleToRaw a stream decodes to the same
// bytes (frame checksums checked), with its zero RLE blocks converted.
func TestRLEToRawDecodesTheSame(t *testing.T) {
	t.Parallel()
	hand, handWant := handStream()
	img := testImage(4, 1000, 0, 3) // blocks 1 and 2 zero, a zero tail
	copy(img[blockSize+4096:], bytes.Repeat([]byte{0x55}, 256<<10))
	best := encodeZstd(t, img, zstd.WithEncoderLevel(zstd.SpeedBestCompression), zstd.WithEncoderCRC(true))
	// the encoder writes each all-zero 128 KiB block of the image as RLE:
	// 62 with the encoder of today
	_, nBest, err := decodeZstd(t, best, true)
	if err != nil || nBest < 60 {
		t.Fatalf("rleToRaw converted %d RLE blocks of the zstd-best stream (%v), want 60 or more", nBest, err)
	}
	tests := []struct {
		name          string
		stream, want  []byte
		wantConverted int
	}{
		{"by hand", hand, handWant, 2},
		{"zstd best, checksum", best, img, nBest},
		{"concatenated", append(append([]byte{}, best...), hand...), append(append([]byte{}, img...), handWant...), nBest + 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plain, _, err := decodeZstd(t, tt.stream, false)
			if err != nil || !bytes.Equal(plain, tt.want) {
				t.Fatalf("plain decode = %d bytes, %v; want the %d bytes of the image", len(plain), err, len(tt.want))
			}
			got, n, err := decodeZstd(t, tt.stream, true)
			if err != nil || !bytes.Equal(got, tt.want) {
				t.Errorf("decode through rleToRaw = %d bytes, %v; want the %d bytes of the image", len(got), err, len(tt.want))
			}
			if n != tt.wantConverted {
				t.Errorf("rleToRaw converted %d RLE blocks, want %d", n, tt.wantConverted)
			}
		})
	}
}

// TestRLEToRawKeepsTruncationAnError: a stream cut anywhere fails to decode
// through rleToRaw as it does without it.
func TestRLEToRawKeepsTruncationAnError(t *testing.T) {
	t.Parallel()
	hand, _ := handStream()
	for cut := range len(hand) {
		_, _, plainErr := decodeZstd(t, hand[:cut], false)
		got, _, err := decodeZstd(t, hand[:cut], true)
		if (plainErr == nil) != (err == nil) {
			t.Errorf("decode of the first %d bytes: through rleToRaw %d bytes, %v; plain %v", cut, len(got), err, plainErr)
		}
	}
}

func encodeZstd(t *testing.T, raw []byte, opts ...zstd.EOption) []byte {
	t.Helper()
	var buf bytes.Buffer
	w, err := zstd.NewWriter(&buf, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestDecoderKeptUnlessItsWindowIsLarge: an image's decoder is kept for the
// next write unless a frame stated a window over keptWindow (a single-
// segment frame's is its content size), and frameWindow reads the window
// the library itself reads from each header.
func TestDecoderKeptUnlessItsWindowIsLarge(t *testing.T) {
	raw := bytes.Repeat([]byte("better-compute "), 4096)
	for _, tt := range []struct {
		name string
		opts []zstd.EOption
		wd   byte // a window descriptor to state instead of the encoder's (0: the encoder's)
		kept bool
	}{
		{"64 KiB window", []zstd.EOption{zstd.WithSingleSegment(false)}, 0, true},
		{"32 MiB window", []zstd.EOption{zstd.WithSingleSegment(false)}, (25 - 10) << 3, false},
		{"single segment", []zstd.EOption{zstd.WithSingleSegment(true)}, 0, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			enc, err := zstd.NewWriter(&buf, tt.opts...)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := enc.Write(raw); err != nil || enc.Close() != nil {
				t.Fatal("encode", err)
			}
			stream := buf.Bytes()
			if tt.wd != 0 {
				stream[5] = tt.wd // a larger window than the frame needs decodes the same
			}
			var h zstd.Header
			if err := h.Decode(stream); err != nil {
				t.Fatal(err)
			}
			want := int64(h.WindowSize)
			if h.SingleSegment {
				want = int64(h.FrameContentSize)
			}
			d, err := newZstdImage(bytes.NewReader(stream))
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(d)
			if err != nil || !bytes.Equal(got, raw) {
				t.Fatalf("decoded %d bytes, %v; want the %d raw", len(got), err, len(raw))
			}
			if d.z.windows != want || (tt.name == "single segment") != h.SingleSegment {
				t.Errorf("window read = %d, the library reads %d (single segment %v)", d.z.windows, want, h.SingleSegment)
			}
			for len(zstdDecoders) > 0 { // none kept by earlier writes
				<-zstdDecoders
			}
			d.Close()
			if kept := len(zstdDecoders) == 1; kept != tt.kept {
				t.Errorf("decoder kept = %v, want %v", kept, tt.kept)
			}
		})
	}
}
