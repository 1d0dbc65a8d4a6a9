package agent

import (
	"bytes"
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
)

const (
	maxLogLines   = 2000 // lines logs.collect returns at most (the newest)
	maxLogLineLen = 2048 // longer lines are cut
)

// LogsOutput is logs.collect's result: the agent's newest log lines, oldest
// first, and how many older ones were dropped.
type LogsOutput struct {
	Lines   []string `json:"lines"`
	Dropped int64    `json:"dropped"`
}

// ring keeps the newest lines written to it.
type ring struct {
	mu      sync.Mutex
	lines   []string
	next    int
	full    bool
	dropped int64
}

func newRing(n int) *ring { return &ring{lines: make([]string, n)} }

// Write stores each line of p.
func (r *ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, l := range bytes.Split(bytes.TrimRight(p, "\n"), []byte("\n")) {
		if len(l) > maxLogLineLen {
			l = append(l[:maxLogLineLen:maxLogLineLen], "…"...)
		}
		if r.full {
			r.dropped++
		}
		r.lines[r.next] = string(l)
		r.next = (r.next + 1) % len(r.lines)
		r.full = r.full || r.next == 0
	}
	return len(p), nil
}

func (r *ring) snapshot() LogsOutput {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	if r.full {
		out = append(out, r.lines[r.next:]...)
	}
	out = append(out, r.lines[:r.next]...)
	return LogsOutput{Lines: out, Dropped: r.dropped}
}

// tee sends every record to the configured handler and, as text, to the ring.
type tee struct {
	inner slog.Handler
	ring  slog.Handler
}

func newTee(inner slog.Handler, r *ring) slog.Handler {
	return tee{inner: inner, ring: slog.NewTextHandler(r, &slog.HandlerOptions{Level: slog.LevelDebug})}
}

func (t tee) Enabled(ctx context.Context, l slog.Level) bool {
	return t.ring.Enabled(ctx, l) || t.inner.Enabled(ctx, l)
}

func (t tee) Handle(ctx context.Context, r slog.Record) error {
	var err error
	if t.inner.Enabled(ctx, r.Level) {
		err = t.inner.Handle(ctx, r.Clone())
	}
	if t.ring.Enabled(ctx, r.Level) {
		_ = t.ring.Handle(ctx, r)
	}
	return err
}

func (t tee) WithAttrs(as []slog.Attr) slog.Handler {
	return tee{inner: t.inner.WithAttrs(as), ring: t.ring.WithAttrs(as)}
}

func (t tee) WithGroup(name string) slog.Handler {
	return tee{inner: t.inner.WithGroup(name), ring: t.ring.WithGroup(name)}
}

// collectLogs is logs.collect: the agent's recent log lines, bounded.
func (a *agent) collectLogs(_ context.Context, _ kinds.Command, _ *tracker) (any, error) {
	return a.logs.snapshot(), nil
}

// diagNVML is diag.nvml. Without the NVIDIA kernel driver there is nothing
// to ask; with it, this ramdisk still has no NVML bindings, and says so.
func (a *agent) diagNVML(_ context.Context, _ kinds.Command, _ *tracker) (any, error) {
	if _, err := os.Stat(filepath.Join(a.cfg.Root, "proc/driver/nvidia")); err != nil {
		return nil, errs.New(errs.Unsupported, "no NVIDIA driver: %s is absent, so there is no GPU to diagnose", "/proc/driver/nvidia")
	}
	return nil, errs.New(errs.Unsupported, "the NVIDIA driver is loaded but this ramdisk is built without NVML bindings (libnvidia-ml); diag.nvml cannot run here")
}
