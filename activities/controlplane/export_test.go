package controlplane

import "github.com/better-compute/better-compute/kinds"

// StallWriter makes a's command-log writer a full queue nobody reads, as a
// writer far behind is, before a's first command.queue.
func StallWriter(a *Activities) {
	a.behind.once.Do(func() { a.behind.ch = make(chan kinds.CommandQueue) })
}
