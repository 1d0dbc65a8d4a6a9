// Command benchcmd is the Go side of ramdisk/disk/bench.sh: it generates the
// benchmark images and times disk.WriteImage on them, so the script can set
// it against `zstd -dc | dd` in the same run.
//
//	benchcmd gen -kind full|sparse -size BYTES -out FILE
//	benchcmd write -image FILE.zst -compression zstd -disk FILE
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
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		return write(ctx, out, *image, *comp, *target)
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

// write hashes the image (untimed, as the catalog would have), then times
// WriteImage from the file to the disk and prints "seconds bytes".
func write(ctx context.Context, out io.Writer, image, comp, target string) error {
	f, err := os.Open(image)
	if err != nil {
		return err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	st, err := os.Stat(target)
	if err != nil {
		return err
	}
	d := disk.Disk{Name: "serial-BENCH", Serial: "BENCH", Path: target, SizeBytes: st.Size()}
	spec := disk.ImageSpec{Digest: "sha256:" + hex.EncodeToString(h.Sum(nil)), Compression: comp, Format: "raw"}
	start := time.Now()
	res, err := disk.WriteImage(ctx, f, spec, d, 0, nil)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%.3f %d\n", time.Since(start).Seconds(), res.ImageBytes)
	return nil
}
