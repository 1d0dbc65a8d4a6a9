package disk

import (
	"context"
	"io"
	"sync"
)

// readAheadDepth is how many 4 MiB blocks the decompressor may run ahead of
// the disk writes.
const readAheadDepth = 4

// chunk is one block of the decompressed image (n bytes of buf), or the end
// of the stream (err io.EOF) or a read error.
type chunk struct {
	buf []byte
	n   int
	err error
}

// readAhead decompresses in its own goroutine so that decompression and disk
// writes overlap. The goroutine owns dec and calls closeDec when it ends; the
// consumer hands buffers back with recycle and calls stop if it gives up
// early. After a chunk with err != nil the goroutine has ended, and whatever
// it read from the stream is visible to the consumer.
func readAhead(dec io.Reader, closeDec func()) (out <-chan chunk, recycle func([]byte), stop func()) {
	free := make(chan []byte, readAheadDepth)
	for range readAheadDepth {
		free <- make([]byte, blockSize)
	}
	ch := make(chan chunk, readAheadDepth)
	done := make(chan struct{})
	go func() {
		defer closeDec()
		for {
			var b []byte
			select {
			case b = <-free:
			case <-done:
				return
			}
			n, err := readBlock(dec, b)
			select {
			case ch <- chunk{buf: b, n: n, err: err}:
			case <-done:
				return
			}
			if err != nil {
				return
			}
		}
	}()
	var once sync.Once
	return ch, func(b []byte) { free <- b }, func() { once.Do(func() { close(done) }) }
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
}

func startSyncer(dev blockDev, progress func(int64)) *syncer {
	s := &syncer{dev: dev, progress: progress, ch: make(chan int64, 1)}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for off := range s.ch {
			if err := s.dev.Sync(); err != nil {
				s.mu.Lock()
				s.err = err
				s.mu.Unlock()
				continue
			}
			s.progress(off)
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

// finish waits for the background syncs and returns the first error.
func (s *syncer) finish() error {
	close(s.ch)
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// ctxDone reports whether ctx has ended, without blocking.
func ctxDone(ctx context.Context) bool { return ctx.Err() != nil }
