package disk

// spares keeps up to cap(s) values between image writes. An emulated rack
// writes every machine's image in one process, where the runtime returned
// what one write freed before the next asked for it again: the 8 MiB a
// small image's write allocated (decoder window, read buffer, blocks) cost
// more in page faults than the write itself (21-27 ms a write of the fleet
// benchmark's image with the memory returned between writes, 3-5 ms with
// it kept; deploy.image at N=1 went from 27-31 to 12 ms). A sync.Pool
// keeps nothing across two collections, and a small heap collects more
// than once a write. A real ramdisk writes one image a boot: what it keeps
// is at most one write's.
type spares[T any] chan T

// get returns a kept value, or false when none is kept.
func (s spares[T]) get() (T, bool) {
	select {
	case v := <-s:
		return v, true
	default:
		var zero T
		return zero, false
	}
}

// put keeps v unless cap(s) values are kept already.
func (s spares[T]) put(v T) {
	select {
	case s <- v:
	default:
	}
}
