package disk

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"
)

// readAheadDepth is how many 4 MiB blocks the decompressor may run ahead of
// the disk writes.
const readAheadDepth = 4

// chunk is one block of the decompressed image, n bytes, held in buf unless
// zero says the block is all zero (buf then holds something else); or the
// end of the stream (err io.EOF) or a read error, with the last bytes.
// trailing is how many bytes at the end of buf[:n] are zero.
type chunk struct {
	buf      []byte
	n        int
	zero     bool
	trailing int
	err      error
}

// errStopped ends the decompression when the writer has given up.
var errStopped = errors.New("image writer stopped")

// blockBufs are the read-ahead's 4 MiB blocks between image writes: a
// write takes a block only when the decompressor runs ahead of the disk (an
// 8 MiB image needs two or three, not readAheadDepth), and gives each back
// when the write is over (see spares). A fleet benchmark of 200 machines
// spent 1.8% of its CPU allocating and clearing them, and more in the
// collections they caused.
var blockBufs = make(spares[[]byte], 2*readAheadDepth)

// block returns a kept block or a new one, aligned for direct writes.
func block() []byte {
	if b, ok := blockBufs.get(); ok {
		return b
	}
	return alignedBuf(blockSize)
}

// readAhead decompresses in its own goroutine so that decompression and disk
// writes overlap. The goroutine owns dec and closes it (closeDec) before it
// sends the last chunk, so once the consumer has a chunk with err != nil the
// decompressor reads no more of the stream. The consumer hands buffers back
// with recycle and calls release when it is done with every chunk it took,
// or gives up early: the goroutine stops, and the buffers go back to
// blockBufs once it has.
func readAhead(dec io.Reader, closeDec func()) (out <-chan chunk, recycle func([]byte), release func()) {
	free := make(chan []byte, readAheadDepth)
	ch := make(chan chunk, readAheadDepth)
	done := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		f := &blockFiller{free: free, out: ch, done: done, zeros: make([]byte, zeroCmp)}
		if c, ok := dec.(interface{ cutZerosTo(zeroWriter) }); ok {
			c.cutZerosTo(f) // long zero runs come as counts (zstd)
		}
		// io.Copy uses the decompressor's WriteTo where it has one (zstd,
		// gzip): its output buffers come to Write without a copy.
		_, err := io.Copy(f, dec)
		closeDec()
		if errors.Is(err, errStopped) {
			return
		}
		if err == nil {
			err = io.EOF
		}
		f.send(err)
	}()
	release = func() {
		close(done)
		go func() {
			<-ended // nothing fills a block any more; unread chunks stay unread
			for {
				select {
				case b := <-free:
					blockBufs.put(b)
				case c := <-ch:
					if c.buf != nil {
						blockBufs.put(c.buf)
					}
				default:
					return
				}
			}
		}()
	}
	return ch, func(b []byte) { free <- b }, release
}

// blockFiller cuts the decompressed image into blocks of len(buf) bytes. It
// checks each piece for zeros while the decompressor has just written it
// (in the CPU's cache) and copies nothing while a block is all zero, so a
// sparse image's zero runs are read once, not copied and read again.
type blockFiller struct {
	free  <-chan []byte
	taken int // buffers taken from blockBufs: at most readAheadDepth
	out   chan<- chunk
	done  <-chan struct{}
	zeros []byte
	buf   []byte // the block being filled; nil before its first byte
	n     int
	zero  bool // buf[:n] would be all zero, and was not copied
	tail  outTail
}

func (f *blockFiller) Write(p []byte) (int, error) {
	written := 0
	for len(p) > 0 {
		if !f.take() {
			return written, errStopped
		}
		piece := p[:min(len(p), len(f.buf)-f.n)]
		if f.zero && firstNonzero(piece, f.zeros) >= 0 {
			clear(f.buf[:f.n]) // the zeros before this piece were not copied
			f.zero = false
		}
		if !f.zero {
			copy(f.buf[f.n:], piece)
		}
		f.tail.add(piece, f.zero, f.zeros)
		f.n += len(piece)
		p = p[len(piece):]
		written += len(piece)
		if f.n == len(f.buf) && !f.send(nil) {
			return written, errStopped
		}
	}
	return written, nil
}

// WriteZeros adds n zero bytes (a run the decompressor cut out, see
// rleToRaw) without copying them while the block holds only zeros.
func (f *blockFiller) WriteZeros(n int64) error {
	for n > 0 {
		if !f.take() {
			return errStopped
		}
		k := int(min(n, int64(len(f.buf)-f.n)))
		if !f.zero {
			clear(f.buf[f.n : f.n+k])
		}
		f.tail.addZeros(int64(k))
		f.n += k
		n -= int64(k)
		if f.n == len(f.buf) && !f.send(nil) {
			return errStopped
		}
	}
	return nil
}

func (f *blockFiller) seen() outTail { return f.tail }

// take gets a buffer for the next block unless one is being filled: a
// free one, else a new one while fewer than readAheadDepth are out, else it
// waits for one; false when the writer has stopped.
func (f *blockFiller) take() bool {
	if f.buf != nil {
		return true
	}
	select {
	case f.buf = <-f.free:
	default:
		if f.taken < readAheadDepth {
			f.buf = block()
			f.taken++
			break
		}
		select {
		case f.buf = <-f.free:
		case <-f.done:
			return false
		}
	}
	f.n, f.zero = 0, true
	return true
}

// send hands the block filled so far (none when buf is nil) to the writer,
// with err; false when the writer has stopped.
func (f *blockFiller) send(err error) bool {
	c := chunk{buf: f.buf, n: f.n, zero: f.zero && f.n > 0, trailing: int(min(f.tail.zeros, int64(f.n))), err: err}
	f.buf, f.n = nil, 0
	select {
	case f.out <- c:
		return true
	case <-f.done:
		return false
	}
}

// syncer makes writes durable in the background: at each checkpoint the
// writer hands it the offset written so far; it fsyncs and then reports that
// offset as progress, while the writes go on. A checkpoint that arrives while
// a sync runs is dropped: the next one carries a later offset.
type syncer struct {
	dev      blockDev
	progress func(int64)
	ch       chan int64
	wg       sync.WaitGroup
	mu       sync.Mutex
	err      error
	took     time.Duration // in Sync
}

func startSyncer(dev blockDev, progress func(int64)) *syncer {
	s := &syncer{dev: dev, progress: progress, ch: make(chan int64, 1)}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for off := range s.ch {
			started := time.Now()
			err := s.dev.Sync()
			s.mu.Lock()
			s.took += time.Since(started)
			if err != nil && s.err == nil {
				s.err = err
			}
			s.mu.Unlock()
			if err == nil {
				s.progress(off)
			}
		}
	}()
	return s
}

// checkpoint offers off for a background sync without waiting.
func (s *syncer) checkpoint(off int64) {
	select {
	case s.ch <- off:
	default:
	}
}

// finish waits for the background syncs and returns the time they took and
// the first error.
func (s *syncer) finish() (time.Duration, error) {
	close(s.ch)
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.took, s.err
}

// ctxDone reports whether ctx has ended, without blocking.
func ctxDone(ctx context.Context) bool { return ctx.Err() != nil }
