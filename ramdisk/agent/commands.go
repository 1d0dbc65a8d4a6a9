package agent

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
)

// entry is one command id this ramdisk has seen.
type entry struct {
	result *kinds.Result // nil while it runs
}

// handler runs one kind; its output becomes the result's payload.
type handler func(ctx context.Context, cmd kinds.Command, p *tracker) (any, error)

func (a *agent) handlers() map[string]handler {
	h := map[string]handler{
		kinds.InventoryRefresh: a.inventory,
		kinds.DiskWipe:         a.wipe,
		kinds.DeployImage:      a.deployImage,
		kinds.BootKexec:        a.kexec,
		kinds.LogsCollect:      a.collectLogs,
		kinds.DiagNVML:         a.diagNVML,
	}
	for id, s := range a.plugins {
		h[id] = a.pluginStep(s)
	}
	return h
}

// dispatch starts cmd unless its id was seen: a running command is left to
// finish (its result is posted when it does), a finished one has its kept
// result posted again. Only a run that failed UNAVAILABLE (the site went
// away mid-stream) runs again, and deploy.image then resumes.
func (a *agent) dispatch(ctx context.Context, cmd kinds.Command) {
	log := a.log.With("command", cmd.ID, "kind", cmd.Kind)
	if cmd.ID == "" {
		log.Warn("ramdisk: ignoring a command without an id")
		return
	}
	a.mu.Lock()
	e, seen := a.cmds[cmd.ID]
	switch {
	case seen && e.result == nil:
		a.mu.Unlock()
		log.Info("ramdisk: command already running; its result follows when it ends")
		return
	case seen && e.result.ErrorKind != string(errs.Unavailable):
		res := *e.result
		a.mu.Unlock()
		log.Info("ramdisk: command already ran; posting its kept result", "ok", res.OK)
		a.goPost(ctx, res)
		return
	}
	e = &entry{}
	a.cmds[cmd.ID] = e
	a.mu.Unlock()

	a.wg.Add(1)
	go func() {
		defer a.wg.Done()
		ctx, span := a.startSpan(ctx, cmd)
		res := a.execute(ctx, cmd)
		a.mu.Lock()
		e.result = &res
		a.mu.Unlock()
		posted := a.post(ctx, res)
		endSpan(span, res, posted)
		if cmd.Kind == kinds.BootKexec && res.OK {
			if !posted {
				log.Warn("ramdisk: kexec done but its result could not be posted")
			}
			if a.cfg.OnKexec != nil {
				a.cfg.OnKexec()
			}
			a.stop()
		}
	}()
}

// execute runs cmd and returns its signed result.
func (a *agent) execute(ctx context.Context, cmd kinds.Command) (res kinds.Result) {
	log := a.log.With("command", cmd.ID, "kind", cmd.Kind)
	start := time.Now()
	log.Info("ramdisk: running command")
	if a.cfg.OnCommand != nil {
		a.cfg.OnCommand(cmd.Kind)
	}
	p := a.startProgress(ctx, cmd.ID)
	payload, err := a.run(ctx, cmd, p)
	p.stop()
	res = kinds.Result{CommandID: cmd.ID, Kind: cmd.Kind, OK: err == nil}
	if err == nil {
		b, merr := json.Marshal(payload)
		if merr != nil {
			err = errs.Wrap(errs.Internal, merr, "encode the %s result", cmd.Kind)
			res.OK = false
		} else {
			res.Payload = b
		}
	}
	if err != nil {
		res.ErrorKind, res.Error = string(errs.KindOf(err)), err.Error()
		log.Warn("ramdisk: command failed", "errorKind", res.ErrorKind, "err", err, "took", time.Since(start))
	} else {
		log.Info("ramdisk: command done", "took", time.Since(start))
	}
	res.Signature = ed25519.Sign(a.key, res.Payload)
	if kinds.CarriesCertificate(cmd.Kind) {
		res.CertPEM = a.relay.certPEM
	}
	res.Finished = time.Now().UTC()
	return res
}

// run calls the kind's handler, turning a panic into INTERNAL.
func (a *agent) run(ctx context.Context, cmd kinds.Command, p *tracker) (out any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = errs.New(errs.Internal, "%s panicked: %v", cmd.Kind, r)
		}
	}()
	if cmd.NodeID != "" && cmd.NodeID != a.nodeID {
		return nil, errs.New(errs.PermissionDenied, "command %s is for %s, not this machine (%s)", cmd.ID, cmd.NodeID, a.nodeID)
	}
	h, ok := a.handlers()[cmd.Kind]
	if !ok {
		return nil, errs.New(errs.Unsupported, "the ramdisk does not run %q; it runs %s", cmd.Kind,
			strings.Join(slices.Sorted(maps.Keys(a.handlers())), ", "))
	}
	return h(ctx, cmd, p)
}

func (a *agent) goPost(ctx context.Context, res kinds.Result) {
	a.wg.Add(1)
	go func() { defer a.wg.Done(); a.post(ctx, res) }()
}

// post sends res, retrying while the relay is unreachable. False when it
// could not be delivered (ctx ended, or the relay refused it).
func (a *agent) post(ctx context.Context, res kinds.Result) bool {
	bo := backoff{max: a.cfg.MaxBackoff}
	for {
		err := a.relay.result(ctx, res)
		if err == nil {
			return true
		}
		if !retryable(err) || ctx.Err() != nil {
			a.log.Warn("ramdisk: result not delivered", "command", res.CommandID, "err", err)
			return false
		}
		if !sleep(ctx, bo.next()) {
			return false
		}
	}
}

// tracker holds a running command's progress; a goroutine posts it to the
// relay every ProgressEvery while it changes.
type tracker struct {
	mu      sync.Mutex
	p       kinds.Progress
	changed bool
	done    chan struct{}
	stopped chan struct{}
}

// set records progress: bytes done of total on disk.
func (t *tracker) set(disk string, bytes, total int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.p.Disk, t.p.Bytes, t.p.Total = disk, bytes, total
	t.changed = true
}

func (t *tracker) take() (kinds.Progress, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.changed
	t.changed = false
	return t.p, c
}

func (t *tracker) stop() {
	close(t.done)
	<-t.stopped
}

func (a *agent) startProgress(ctx context.Context, id string) *tracker {
	t := &tracker{p: kinds.Progress{CommandID: id}, done: make(chan struct{}), stopped: make(chan struct{})}
	go func() {
		defer close(t.stopped)
		tick := time.NewTicker(a.cfg.ProgressEvery)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.done:
				return
			case <-tick.C:
			}
			if p, changed := t.take(); changed {
				pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				if err := a.relay.progress(pctx, p); err != nil {
					a.log.Debug("ramdisk: progress not posted", "command", id, "err", err)
				}
				cancel()
			}
		}
	}()
	return t
}

// decode reads a command's payload into v; a bad one is INVALID_INPUT.
func decode(cmd kinds.Command, v any) error {
	if len(cmd.Payload) == 0 {
		return nil
	}
	if err := json.Unmarshal(cmd.Payload, v); err != nil {
		return errs.Invalid("payload", "%s payload: %v", cmd.Kind, err)
	}
	return nil
}
