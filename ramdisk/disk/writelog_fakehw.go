//go:build fakehw

package disk

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/better-compute/better-compute/errs"
)

// Under the fakehw build, WriteImage keeps a write log beside each fake disk
// it writes, <dir>/<name>.writes: a line "image" when a run starts, then a
// line per block put on the disk once it is there, "write <off> <n>" or
// "zero <off> <n>". Tests read it with ImageWrites to prove what a resumed
// write did not write again; the sparse file alone cannot tell a block
// written once from one written twice.

const writeLogExt = ".writes"

func writeLogPath(imgPath string) string { return strings.TrimSuffix(imgPath, fakeExt) + writeLogExt }

// logWrites returns t recording its writes when t is a fake disk (a regular
// file), and the log's closer.
func logWrites(t *target) (blockDev, func(), error) {
	if t.isDev {
		return t, func() {}, nil
	}
	p := writeLogPath(t.f.Name())
	f, err := os.OpenFile(p, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		return nil, nil, errs.Wrap(errs.DriverError, err, "open the write log of fake disk %s", t.name)
	}
	w := &writeLog{target: t, f: f}
	if err := w.line("image"); err != nil {
		f.Close()
		return nil, nil, err
	}
	return w, func() { f.Close() }, nil
}

// writeLog is a fake disk that appends each write and zeroing to its log.
// Only WriteImage's writing goroutine calls WriteAt and zeroRange.
type writeLog struct {
	*target
	f *os.File
}

func (w *writeLog) WriteAt(p []byte, off int64) (int, error) {
	n, err := w.target.WriteAt(p, off)
	if n > 0 {
		err = errors.Join(err, w.line(fmt.Sprintf("write %d %d", off, n)))
	}
	return n, err
}

func (w *writeLog) zeroRange(off, n int64) error {
	if err := w.target.zeroRange(off, n); err != nil {
		return err
	}
	return w.line(fmt.Sprintf("zero %d %d", off, n))
}

// line appends one line with one write, so a reader never sees half of it.
func (w *writeLog) line(s string) error {
	if _, err := w.f.WriteString(s + "\n"); err != nil {
		return errs.Wrap(errs.DriverError, err, "append to the write log of fake disk %s", w.name)
	}
	return nil
}

// Extent is N bytes at Off that a WriteImage run put on a fake disk: data,
// or zeros made without writing data.
type Extent struct {
	Off, N int64
	Zero   bool
}

// ImageWrites reads the write log of the fake disk at imgPath (its .img
// file): the extents of each WriteImage run on it so far, oldest run first,
// each run's in the order written. A disk never written has no runs.
func ImageWrites(imgPath string) ([][]Extent, error) {
	f, err := os.Open(writeLogPath(imgPath))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, errs.Wrap(errs.DriverError, err, "open the write log of %s", imgPath)
	}
	defer f.Close()
	var runs [][]Extent
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		if sc.Text() == "image" {
			runs = append(runs, []Extent{})
			continue
		}
		var e Extent
		var op string
		if _, err := fmt.Sscanf(sc.Text(), "%s %d %d", &op, &e.Off, &e.N); err != nil || len(runs) == 0 || (op != "write" && op != "zero") {
			return nil, errs.New(errs.DriverError, "write log of %s, line %d: %q is not a write of a run", imgPath, n, sc.Text())
		}
		e.Zero = op == "zero"
		runs[len(runs)-1] = append(runs[len(runs)-1], e)
	}
	if err := sc.Err(); err != nil {
		return nil, errs.Wrap(errs.DriverError, err, "read the write log of %s", imgPath)
	}
	return runs, nil
}
