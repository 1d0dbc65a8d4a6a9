// Package relay owns the site agent's relay for ramdisks: the in-memory hub
// that hands a node's commands to its connected ramdisk and waits for their
// results, and the HTTPS endpoints a ramdisk talks to (join proxy, long-poll
// for the next command, progress, result). A ramdisk is known by its client
// certificate (role ramdisk, identity node_…) and may fetch and answer only
// its own node's commands. Command ids are stable across activity retries;
// a result nobody waits for is kept for a while, so a retried activity gets
// it at once instead of running the command again.
package relay

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"go.opentelemetry.io/otel/trace"

	v1 "github.com/better-compute/better-compute/api/gen/bettercompute/v1"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/internal/tracing"
	"github.com/better-compute/better-compute/kinds"
)

// JoinFunc forwards a ramdisk's join to the control plane's JoinService.
type JoinFunc func(ctx context.Context, req *v1.JoinRequest) (*v1.JoinResponse, error)

// RenewFunc forwards the renewal of an installed machine's node
// certificate (PEM), whose key the relay saw it hold, to the control plane.
type RenewFunc func(ctx context.Context, certPEM []byte) (*v1.JoinResponse, error)

// Config configures a Relay.
type Config struct {
	// TrustDomain is the SPIFFE trust domain of the ramdisks' certificates.
	TrustDomain string
	// Join forwards POST /v1/join; nil answers UNSUPPORTED.
	Join JoinFunc
	// Renew forwards POST /v1/renew; nil answers UNSUPPORTED.
	Renew RenewFunc
	// KeepResults is how long an unclaimed result (or an answered-to-nobody
	// command) is kept; one hour when zero.
	KeepResults time.Duration
	// MaxWait caps a long poll's ?wait; one minute when zero.
	MaxWait time.Duration
	// Seen, if set, learns each time a node's ramdisk (its certificate
	// verified) talks to the relay: its boot reached the relay.
	Seen func(nodeID string)
	// JoinRefused, if set, learns each ramdisk join the control plane
	// refused (any kind but UNAVAILABLE, which a ramdisk retries; it gives up
	// on the others: a token spent, expired or unknown, an internal error),
	// with the token, so the boot that carried it can be failed at once.
	JoinRefused func(token string, err error)
	Logger      *slog.Logger
	// Tracer records each command from its hand-out to its result, a child
	// of the waiting activity's span (see trace.go); nil for none.
	Tracer trace.TracerProvider
}

type state int

const (
	pending state = iota // queued, not yet taken by the ramdisk
	taken                // handed to the ramdisk, no result yet
)

// command is one command in flight.
type command struct {
	cmd     kinds.Command
	state   state
	takenBy string // the ramdisk boot (its certificate's serial) that took it
	waiters int
	since   time.Time // when it was last queued
	done    chan struct{}
	result  kinds.Result
	// progress is the last reported progress; changed is closed and
	// replaced on each report.
	progress kinds.Progress
	changed  chan struct{}
	// parent is the span of the activity waiting for the command; span runs
	// from the hand-out to the result (nil when not handed out).
	parent trace.SpanContext
	span   trace.Span
}

// queue is one node's pending commands.
type queue struct {
	ids  []string
	wake chan struct{} // closed and replaced when a command is queued
}

type keptKey struct{ node, id string }

type kept struct {
	res kinds.Result
	at  time.Time
}

// Relay is the hub between relay activities and ramdisks. Its methods are
// safe for concurrent use.
type Relay struct {
	cfg    Config
	log    *slog.Logger
	tracer trace.Tracer

	mu      sync.Mutex
	cmds    map[string]*command
	queues  map[string]*queue
	kept    map[keptKey]kept
	started time.Time
	heard   map[string]time.Time // by node: when its ramdisk last talked to the relay
	polling map[string]int       // by node: its ramdisk's long polls open now
}

// New returns a relay.
func New(cfg Config) (*Relay, error) {
	if cfg.TrustDomain == "" {
		return nil, errs.Invalid("trustDomain", "the relay needs the trust domain of the ramdisks' certificates")
	}
	if cfg.KeepResults <= 0 {
		cfg.KeepResults = time.Hour
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = time.Minute
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Relay{cfg: cfg, log: log, tracer: tracing.Tracer(cfg.Tracer, "better-compute/relay"),
		cmds: map[string]*command{}, queues: map[string]*queue{}, kept: map[keptKey]kept{}, heard: map[string]time.Time{}, polling: map[string]int{}, started: time.Now()}, nil
}

// Run sends cmd to its node's ramdisk and waits for the result. A result
// already kept for cmd returns at once without sending; a command already in
// flight is joined; a command handed out before but no longer waited for (a
// retried activity) is handed out again, and the ramdisk, which never runs
// one command twice, answers it again.
func (r *Relay) Run(ctx context.Context, cmd kinds.Command, progress func(kinds.Progress)) (kinds.Result, error) {
	if cmd.ID == "" || cmd.NodeID == "" || cmd.Kind == "" {
		return kinds.Result{}, errs.Invalid("command", "a relayed command needs an id, a node and a kind")
	}
	c, res, ok, err := r.attach(cmd, trace.SpanContextFromContext(ctx))
	if err != nil || ok {
		return res, err
	}
	defer r.detach(c)
	for {
		r.mu.Lock()
		changed := c.changed
		r.mu.Unlock()
		select {
		case <-c.done:
			return c.result, nil
		case <-ctx.Done():
			return kinds.Result{}, ctx.Err()
		case <-changed:
			r.mu.Lock()
			p := c.progress
			r.mu.Unlock()
			if progress != nil {
				progress(p)
			}
		}
	}
}

// Heard is when node's ramdisk last talked to the relay (a poll for its
// next command, progress, a result), with known true, or when the relay
// started if none has since, and whether one is polling right now. A
// running ramdisk polls at least every long poll's wait (at most MaxWait)
// and retries a failed poll within seconds, so a node not heard from for
// much longer runs no ramdisk.
func (r *Relay) Heard(node string) (at time.Time, known, polling bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	at, known = r.heard[node]
	if !known {
		at = r.started
	}
	return at, known, r.polling[node] > 0
}

func (r *Relay) hear(node string) {
	r.mu.Lock()
	r.heard[node] = time.Now()
	r.mu.Unlock()
}

// attach finds or queues cmd and counts a waiter on it, or returns a kept
// result. parent is the waiting activity's span.
func (r *Relay) attach(cmd kinds.Command, parent trace.SpanContext) (*command, kinds.Result, bool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.sweepLocked()
	k := keptKey{cmd.NodeID, cmd.ID}
	if kr, ok := r.kept[k]; ok {
		delete(r.kept, k)
		r.log.Info("returning a result that arrived before its activity", "node", cmd.NodeID, "command", cmd.ID)
		return nil, kr.res, true, nil
	}
	c := r.cmds[cmd.ID]
	switch {
	case c == nil:
		c = &command{cmd: cmd, done: make(chan struct{}), changed: make(chan struct{}), parent: parent}
		r.cmds[cmd.ID] = c
		r.enqueueLocked(c)
	case c.cmd.NodeID != cmd.NodeID || c.cmd.Kind != cmd.Kind:
		return nil, kinds.Result{}, false, errs.New(errs.InvalidState,
			"command id %s is already in flight for %s (%s)", cmd.ID, c.cmd.NodeID, c.cmd.Kind)
	case c.waiters == 0 && c.state == taken:
		endSpan(c, "taken again by a retried activity")
		c.parent = parent
		r.enqueueLocked(c)
	}
	c.waiters++
	return c, kinds.Result{}, false, nil
}

// detach drops a waiter. A command nobody waits for any more is withdrawn if
// the ramdisk has not taken it yet.
func (r *Relay) detach(c *command) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c.waiters--
	if c.waiters > 0 || r.cmds[c.cmd.ID] != c {
		return
	}
	if c.state == pending {
		r.dequeueLocked(c)
		delete(r.cmds, c.cmd.ID)
	}
}

func (r *Relay) enqueueLocked(c *command) {
	c.state, c.since = pending, time.Now()
	q := r.queueLocked(c.cmd.NodeID)
	q.ids = append(q.ids, c.cmd.ID)
	close(q.wake)
	q.wake = make(chan struct{})
}

func (r *Relay) dequeueLocked(c *command) {
	q := r.queueLocked(c.cmd.NodeID)
	for i, id := range q.ids {
		if id == c.cmd.ID {
			q.ids = append(q.ids[:i], q.ids[i+1:]...)
			break
		}
	}
}

func (r *Relay) queueLocked(node string) *queue {
	q := r.queues[node]
	if q == nil {
		q = &queue{wake: make(chan struct{})}
		r.queues[node] = q
	}
	return q
}

// sweepLocked drops kept results and unwaited taken commands older than
// KeepResults.
func (r *Relay) sweepLocked() {
	cutoff := time.Now().Add(-r.cfg.KeepResults)
	for k, kr := range r.kept {
		if kr.at.Before(cutoff) {
			delete(r.kept, k)
		}
	}
	for id, c := range r.cmds {
		if c.waiters == 0 && c.state == taken && c.since.Before(cutoff) {
			endSpan(c, "no result")
			delete(r.cmds, id)
		}
	}
}
