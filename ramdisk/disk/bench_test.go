package disk

import (
	"bytes"
	"context"
	"math/rand/v2"
	"testing"
	"time"
)

// benchImage is a raw image of size bytes in which roughly dataPct percent of
// the 4 MiB blocks hold compressible pseudo-random data.
func benchImage(size int64, dataPct int) []byte {
	img := make([]byte, size)
	r := rand.New(rand.NewPCG(3, 4))
	for off := int64(0); off < size; off += blockSize {
		if r.IntN(100) >= dataPct {
			continue
		}
		blk := img[off:min(size, off+blockSize)]
		for i := 0; i < len(blk); i += 64 {
			v := byte(r.IntN(16) + 1)
			for j := i; j < min(len(blk), i+64); j++ {
				blk[j] = v
			}
		}
	}
	return img
}

func BenchmarkWriteImageZstd(b *testing.B) {
	for _, bc := range []struct {
		name    string
		size    int64
		dataPct int
	}{
		{"full-512MiB", 512 << 20, 100},
		{"sparse-1GiB-5pct", 1 << 30, 5},
	} {
		b.Run(bc.name, func(b *testing.B) {
			raw := benchImage(bc.size, bc.dataPct)
			stream := compress(b, raw, "zstd")
			raw = nil
			spec := ImageSpec{Digest: digestOf(stream), Compression: "zstd"}
			d := newFakeDisk(b, Disk{Serial: "BENCH", SizeBytes: bc.size})
			b.SetBytes(bc.size)
			var wait, write, sync time.Duration
			for b.Loop() {
				res, err := WriteImage(context.Background(), bytes.NewReader(stream), spec, d, 0, nil)
				if err != nil {
					b.Fatal(err)
				}
				wait, write, sync = wait+res.WaitData, write+res.WriteTime, sync+res.SyncTime
			}
			b.ReportMetric(float64(len(stream))/float64(bc.size), "stream/image")
			// where the writer's time went (ImageResult), per op
			b.ReportMetric(wait.Seconds()/float64(b.N), "wait-s/op")
			b.ReportMetric(write.Seconds()/float64(b.N), "write-s/op")
			b.ReportMetric(sync.Seconds()/float64(b.N), "sync-s/op")
		})
	}
}

func BenchmarkQuickWipe16TiB(b *testing.B) {
	d := newFakeDisk(b, Disk{WWN: "0x5000c500a1b2c3d4", SizeBytes: 16 * tib})
	for b.Loop() {
		b.StopTimer()
		scribble(b, d, 0, 8*tib, d.SizeBytes)
		b.StartTimer()
		res, err := Wipe(context.Background(), d, Quick, nil)
		if err != nil || !res.Verified {
			b.Fatalf("Wipe() = %+v, %v", res, err)
		}
	}
}
