package disk

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// BenchmarkWriteImageStages splits a WriteImage into what it does, each
// stage timed alone on the same stream, so that a write's time can be set
// against its parts:
//
//	hash           the stream's sha256 alone
//	decompress     decompression into nothing (the decoder as WriteImage sets it up, long zero runs as counts)
//	hash+decompress both, as WriteImage reads
//	devnull        the whole writer onto a disk that drops everything (no writes, no fdatasync)
//	nohash         the whole writer onto the file, with the hashing skipped
//	all            WriteImage onto the file
//
// bench.sh sets DISK_BENCH_IMAGE to its zstd image (made by the zstd tool)
// and DISK_BENCH_DIR to the file system of its peers' target file; without
// them the stages run on two generated images in a temporary directory.
func BenchmarkWriteImageStages(b *testing.B) {
	dir := os.Getenv("DISK_BENCH_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	if path := os.Getenv("DISK_BENCH_IMAGE"); path != "" {
		stream, err := os.ReadFile(path)
		if err != nil {
			b.Fatal(err)
		}
		benchStages(b, filepath.Base(path), stream, dir)
		return
	}
	for _, bc := range []struct {
		name    string
		size    int64
		dataPct int
	}{
		{"full-512MiB", 512 << 20, 100},
		{"sparse-1GiB-5pct", 1 << 30, 5},
	} {
		benchStages(b, bc.name, compress(b, benchImage(bc.size, bc.dataPct), "zstd"), dir)
	}
}

func benchStages(b *testing.B, name string, stream []byte, dir string) {
	sum := sha256.Sum256(stream)
	spec := ImageSpec{Digest: "sha256:" + hex.EncodeToString(sum[:]), Compression: "zstd"}
	size := decodeInto(b, stream, sha256.New())
	run := func(stage string, f func(b *testing.B)) {
		b.Run(name+"/"+stage, func(b *testing.B) {
			b.SetBytes(size)
			f(b)
		})
	}
	run("hash", func(b *testing.B) {
		for b.Loop() {
			sha256.Sum256(stream)
		}
	})
	run("decompress", func(b *testing.B) {
		for b.Loop() {
			decodeInto(b, stream, skipHash{sum[:]})
		}
	})
	run("hash+decompress", func(b *testing.B) {
		for b.Loop() {
			decodeInto(b, stream, sha256.New())
		}
	})
	run("devnull", func(b *testing.B) {
		for b.Loop() {
			stageWrite(b, stream, sha256.New(), spec, dropDev{}, size)
		}
	})
	run("nohash", func(b *testing.B) {
		writeStage(b, stream, func() hash.Hash { return skipHash{sum[:]} }, spec, dir, size)
	})
	run("all", func(b *testing.B) { writeStage(b, stream, sha256.New, spec, dir, size) })
}

// writeStage writes the image onto a fresh sparse file per op, as bench.sh
// gives its peers, synced (outside the timer) before each op so that one
// op's writeback does not land on the next.
func writeStage(b *testing.B, stream []byte, newHash func() hash.Hash, spec ImageSpec, dir string, size int64) {
	path := filepath.Join(dir, "stages.disk")
	defer os.Remove(path)
	for b.Loop() {
		b.StopTimer()
		if err := os.Truncate(path, 0); err != nil && !os.IsNotExist(err) {
			b.Fatal(err)
		}
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			b.Fatal(err)
		}
		if err := os.Truncate(path, size); err != nil {
			b.Fatal(err)
		}
		unix.Sync()
		t, err := openTarget(Disk{Name: "BENCH", Path: path})
		if err != nil {
			b.Fatal(err)
		}
		t.openDirect()
		b.StartTimer()
		stageWrite(b, stream, newHash(), spec, t, size)
		t.Close()
	}
}

func stageWrite(b *testing.B, stream []byte, h hash.Hash, spec ImageSpec, dev blockDev, size int64) {
	res, err := writeImage(context.Background(), bytes.NewReader(stream), h, spec, dev, "BENCH", size, 0, nil)
	if err != nil || res.ImageBytes != size {
		b.Fatalf("writeImage() = %d bytes, %v; want %d", res.ImageBytes, err, size)
	}
}

// decodeInto hashes (with h) and decompresses stream into nothing, as
// WriteImage reads it, and returns the image's size.
func decodeInto(b *testing.B, stream []byte, h hash.Hash) int64 {
	counted := &countingReader{r: bytes.NewReader(stream), h: h}
	dec, closeDec, err := decompressor(bufio.NewReaderSize(counted, 1<<20), "zstd")
	if err != nil {
		b.Fatal(err)
	}
	defer closeDec()
	d := &discardTail{zeros: make([]byte, zeroCmp)}
	if c, ok := dec.(interface{ cutZerosTo(zeroWriter) }); ok {
		c.cutZerosTo(d) // long zero runs come as counts, as in WriteImage
	}
	if _, err := io.Copy(d, dec); err != nil {
		b.Fatalf("decompress after %d bytes: %v", d.tail.n, err)
	}
	return d.tail.n
}

// discardTail keeps nothing of what is written to it but its outTail.
type discardTail struct {
	tail  outTail
	zeros []byte
}

func (d *discardTail) Write(p []byte) (int, error) { d.tail.add(p, false, d.zeros); return len(p), nil }
func (d *discardTail) WriteZeros(n int64) error    { d.tail.addZeros(n); return nil }
func (d *discardTail) seen() outTail               { return d.tail }

// skipHash is a hash that reads nothing and sums to the digest it was given:
// the writer's digest check passes without the hashing.
type skipHash struct{ sum []byte }

func (skipHash) Write(p []byte) (int, error) { return len(p), nil }
func (s skipHash) Sum(b []byte) []byte       { return append(b, s.sum...) }
func (skipHash) Reset()                      {}
func (skipHash) Size() int                   { return sha256.Size }
func (skipHash) BlockSize() int              { return sha256.BlockSize }

// dropDev is a disk that takes every write and zeroing and keeps nothing.
type dropDev struct{}

func (dropDev) WriteAt(p []byte, _ int64) (int, error) { return len(p), nil }
func (dropDev) ReadAt(p []byte, _ int64) (int, error)  { clear(p); return len(p), nil }
func (dropDev) zeroRange(_, _ int64) error             { return nil }
func (dropDev) Sync() error                            { return nil }
