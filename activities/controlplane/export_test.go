package controlplane

import (
	"time"

	"github.com/better-compute/better-compute/kinds"
)

// StallWriter makes a's command-log writer a full queue nobody reads, as a
// writer far behind is, before a's first command.queue.
func StallWriter(a *Activities) {
	a.behind.once.Do(func() { a.behind.ch = make(chan kinds.CommandQueue) })
}

// LingerWriter makes a's command-log writer gather for d, before a's first
// command.queue.
func LingerWriter(a *Activities, d time.Duration) { a.behind.linger = d }

// WriterWrites is how many writes a's command-log writer sent.
func WriterWrites(a *Activities) int64 { return a.behind.writes.Load() }
