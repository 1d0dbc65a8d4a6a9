// Command benchcmd is the Go side of ramdisk/disk/bench.sh: it generates the
// benchmark images and times disk.WriteImage on them, so the script can set
// it against `zstd -dc | dd` in the same run.
//
//	benchcmd gen -kind full|sparse -size BYTES -out FILE
//	benchcmd write -image FILE.zst -compression zstd -disk FILE [-cpuprofile FILE]
package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"runtime/pprof"
	"syscall"
	"time"

	"github.com/better-compute/better-compute/ramdisk/disk"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchcmd:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("usage: benchcmd gen|write [flags]")
	}
	fs := flag.NewFlagSet(args[0], flag.ContinueOnError)
	switch args[0] {
	case "gen":
		kind := fs.String("kind", "full", "full (all blocks data) or sparse (5% of blocks data)")
		size := fs.Int64("size", 1<<30, "image size in bytes")
		path := fs.String("out", "", "raw image to write")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return gen(*path, *kind, *size)
	case "write":
		image := fs.String("image", "", "image file as served")
		comp := fs.String("compression", "zstd", "none, gzip, zstd or xz")
		target := fs.String("disk", "", "disk: a file or a block device")
		prof := fs.String("cpuprofile", "", "write a CPU profile of the timed WriteImage to this file")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return write(ctx, out, *image, *comp, *target, *prof)
	}
	return fmt.Errorf("unknown subcommand %q", args[0])
}

// gen writes a raw image: data blocks of compressible pseudo-random bytes
// (runs of 64 equal bytes with 4 bits of entropy), zero blocks elsewhere.
func gen(path, kind string, size int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 4<<20)
	r := rand.New(rand.NewPCG(7, 11))
	blk := make([]byte, 4<<20)
	for off := int64(0); off < size; off += int64(len(blk)) {
		b := blk[:min(int64(len(blk)), size-off)]
		clear(b)
		if kind == "full" || r.IntN(20) == 0 {
			for i := 0; i < len(b); i += 64 {
				v := byte(r.IntN(16) + 1)
				for j := i; j < min(len(b), i+64); j++ {
					b[j] = v
				}
			}
		}
		if _, err := w.Write(b); err != nil {
			return err
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

// write hashes the image (as the catalog would have, outside the timed
// part), then times WriteImage from the file to the disk and prints
// "seconds bytes wait write sync sha256 cpu": where the writer's time went
// (ImageResult's WaitData: waiting for decompressed data; WriteTime: writes
// and zeroing; SyncTime: fdatasync) and how long the sha256 of the stream
// alone took, which WriteImage does in-stream; and the CPU seconds of the
// WriteImage.
func write(ctx context.Context, out io.Writer, image, comp, target, prof string) error {
	f, err := os.Open(image)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	hashStart := time.Now()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	hashed := time.Since(hashStart)
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	st, err := os.Stat(target)
	if err != nil {
		return err
	}
	d := disk.Disk{Name: "serial-BENCH", Serial: "BENCH", Path: target, SizeBytes: st.Size()}
	spec := disk.ImageSpec{Digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), Compression: comp, Format: "raw"}
	if prof != "" {
		pf, err := os.Create(prof)
		if err != nil {
			return err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	cpu0 := cpuTime()
	start := time.Now()
	res, err := disk.WriteImage(ctx, f, spec, d, 0, nil)
	if err != nil {
		return err
	}
	took, cpu := time.Since(start), cpuTime()-cpu0
	fmt.Fprintf(out, "%.3f %d %.3f %.3f %.3f %.3f %.3f\n", took.Seconds(), res.ImageBytes,
		res.WaitData.Seconds(), res.WriteTime.Seconds(), res.SyncTime.Seconds(), hashed.Seconds(), cpu.Seconds())
	return nil
}

// cpuTime is the process's CPU time so far, user and system: steadier than
// wall time on a shared machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
