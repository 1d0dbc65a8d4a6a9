package site

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
)

// heartbeatEvery is how often a waiting activity heartbeats with no news.
const heartbeatEvery = 5 * time.Second

// SetBootEntry is boot.setEntry.
func (a *Activities) SetBootEntry(ctx context.Context, e kinds.BootEntry) error {
	if a.Boot == nil {
		return toTemporal(errs.New(errs.Unsupported, "this site agent serves no boot table").WithOp(kinds.BootSetEntry))
	}
	if err := a.Boot.SetEntry(e); err != nil {
		return toTemporal(withOp(err, kinds.BootSetEntry))
	}
	a.log().InfoContext(ctx, "boot entry set", "node", e.NodeID, "macs", e.MACs, "ramdisk", e.Ramdisk)
	return nil
}

// ClearBootEntry is boot.clearEntry.
func (a *Activities) ClearBootEntry(ctx context.Context, in kinds.ClearEntryInput) error {
	if a.Boot == nil {
		return toTemporal(errs.New(errs.Unsupported, "this site agent serves no boot table").WithOp(kinds.BootClearEntry))
	}
	if err := a.Boot.ClearEntry(in.NodeID); err != nil {
		return toTemporal(withOp(err, kinds.BootClearEntry))
	}
	a.log().InfoContext(ctx, "boot entry cleared", "node", in.NodeID)
	return nil
}

// EnsureImage is cache.ensureImage; it heartbeats with the bytes downloaded,
// and every heartbeatEvery while nothing arrives.
func (a *Activities) EnsureImage(ctx context.Context, in kinds.EnsureImageInput) (kinds.EnsureImageOutput, error) {
	if a.Cache == nil {
		return kinds.EnsureImageOutput{}, toTemporal(errs.New(errs.Unsupported, "this site agent has no image cache").WithOp(kinds.CacheEnsureImage))
	}
	last := &atomic.Pointer[kinds.Progress]{}
	last.Store(&kinds.Progress{Total: in.Size})
	stop := heartbeatLoop(ctx, last) // also while the download stalls or another call's runs
	defer stop()
	out, err := a.Cache.Ensure(ctx, in, func(n int64) {
		p := kinds.Progress{Bytes: n, Total: in.Size}
		last.Store(&p)
		activity.RecordHeartbeat(ctx, p)
	})
	if err != nil {
		return out, toTemporal(withOp(err, kinds.CacheEnsureImage))
	}
	a.log().InfoContext(ctx, "image ready", "image", in.ImageID, "path", out.Path, "size", out.Size)
	return out, nil
}

// RelayCommand runs a ramdisk kind: it hands cmd to the node's ramdisk
// through the relay, heartbeats with the ramdisk's progress, and returns its
// result; a failed result becomes an application error of its ErrorKind.
func (a *Activities) RelayCommand(ctx context.Context, cmd kinds.Command) (kinds.Result, error) {
	info := activity.GetInfo(ctx)
	name := info.ActivityType.Name
	if a.Relay == nil {
		return kinds.Result{}, toTemporal(errs.New(errs.Unsupported, "this site agent relays no ramdisk commands").WithOp(name))
	}
	if cmd.Kind == "" {
		cmd.Kind = name
	}
	if cmd.Kind != name { // Register registers it under ramdisk step ids only
		return kinds.Result{}, toTemporal(errs.Invalid("kind", "command kind %q sent as activity %q", cmd.Kind, name).WithOp(name))
	}
	if cmd.NodeID == "" {
		return kinds.Result{}, toTemporal(errs.Invalid("nodeId", "a ramdisk command needs its node").WithOp(name))
	}
	if cmd.ID == "" {
		cmd.ID = commandID(info)
	}
	if len(cmd.Payload) == 0 {
		cmd.Payload = json.RawMessage("{}")
	}
	outcome := "failed" // until it is known to have done better
	defer func() { a.countRelayed(cmd.Kind, outcome) }()
	last := &atomic.Pointer[kinds.Progress]{}
	last.Store(&kinds.Progress{CommandID: cmd.ID})
	var before kinds.Progress // the last attempt's last heartbeat
	if activity.HasHeartbeatDetails(ctx) {
		_ = activity.GetHeartbeatDetails(ctx, &before)
	}
	stop := heartbeatLoop(ctx, last)
	defer stop()
	rctx, stalled := context.WithCancelCause(ctx)
	defer stalled(nil)
	go a.watchBoot(rctx, cmd.NodeID, before.RamdiskHeard, last, stalled)
	res, err := a.Relay.Run(rctx, cmd, func(p kinds.Progress) {
		last.Store(&p)
		activity.RecordHeartbeat(ctx, p)
	})
	if cause := context.Cause(rctx); err != nil && errs.Is(cause, errs.BootStalled) {
		a.log().WarnContext(ctx, "ramdisk boot stalled", "node", cmd.NodeID, "kind", cmd.Kind, "err", cause)
		outcome = "stalled"
		return kinds.Result{}, toTemporal(withOp(cause, name))
	}
	if err != nil {
		return kinds.Result{}, toTemporal(withOp(err, name))
	}
	if !res.OK {
		k := errs.Kind(res.ErrorKind)
		if k == "" {
			k = errs.Internal
		}
		return res, toTemporal(&errs.Error{Kind: k, Op: name, Msg: "the ramdisk of " + cmd.NodeID + " says: " + res.Error})
	}
	a.log().InfoContext(ctx, "ramdisk command done", "node", cmd.NodeID, "kind", cmd.Kind, "command", cmd.ID)
	outcome = "succeeded"
	a.countWritten(cmd.Kind, res)
	return res, nil
}

// countWritten counts the bytes a succeeded deploy.image result says it
// wrote. The workflow checks the result; an undecodable one counts nothing
// here.
func (a *Activities) countWritten(kind string, res kinds.Result) {
	if a.ImageWrote == nil || kind != kinds.DeployImage {
		return
	}
	var out kinds.DeployImageOutput
	if json.Unmarshal(res.Payload, &out) == nil {
		a.ImageWrote(out.BytesWritten)
	}
}

// countRelayed counts a relayed command's outcome (succeeded, failed,
// stalled): each attempt, as the site saw it.
func (a *Activities) countRelayed(kind, outcome string) {
	if a.Relayed != nil {
		a.Relayed(kind, outcome)
	}
}

// watchBoot heartbeats where the node's ramdisk boot is while the command
// waits for that ramdisk (`commands list` and `metal get` show it), and ends
// the command when the boot stalls (see BootTable.Stalled) or, with no boot
// in progress, when no ramdisk of the node is there (see ramdiskGone),
// until ctx ends.
func (a *Activities) watchBoot(ctx context.Context, nodeID string, heardBefore time.Time, last *atomic.Pointer[kinds.Progress], stalled context.CancelCauseFunc) {
	after := a.BootStall
	if after <= 0 {
		after = DefaultBootStall
	}
	gone := a.RamdiskGone
	if gone <= 0 {
		gone = DefaultRamdiskGone
	}
	t := time.NewTicker(min(time.Second, after/4, gone/4))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if a.Boot != nil {
				if err := a.Boot.Stalled(nodeID, after); err != nil {
					stalled(err)
					return
				}
			}
			heard, err := a.ramdiskGone(nodeID, gone, heardBefore)
			if err != nil {
				stalled(err)
				return
			}
			if p := *last.Load(); !heard.IsZero() && !p.RamdiskHeard.Equal(heard) {
				p.RamdiskHeard = heard // the heartbeats carry it to the next attempt
				last.Store(&p)
			}
			if a.Boot == nil {
				continue
			}
			if where := a.Boot.Progress(nodeID); where != "" {
				p := *last.Load()
				p.Boot = where
				last.Store(&p)
				activity.RecordHeartbeat(ctx, p)
			}
		}
	}
}

// ramdiskGone is BOOT_STALLED when no ramdisk boot of the node is in
// progress (none followed, or its ramdisk joined) and no ramdisk of the node
// has talked to the relay for gone: a running ramdisk polls the relay all
// the time, so none runs - it died before or while it ran the command (a
// boot.kexec whose machine then booted its disk, or that kexeced and whose
// result this agent lost in a restart), and nothing will ever answer. The
// silence counts from when the relay last heard the ramdisk, or, if it
// never did (this agent restarted), from heardBefore, what the last
// attempt's heartbeats said, or else the relay's start. It returns that
// time (zero while a boot is in progress, or the relay cannot tell: a Relay
// without Heard).
func (a *Activities) ramdiskGone(nodeID string, gone time.Duration, heardBefore time.Time) (time.Time, error) {
	h, ok := a.Relay.(RamdiskHearing)
	if !ok || (a.Boot != nil && a.Boot.Progress(nodeID) != "") {
		return time.Time{}, nil
	}
	at, known, polling := h.Heard(nodeID)
	if polling {
		return time.Now(), nil
	}
	if !known && !heardBefore.IsZero() && heardBefore.Before(at) {
		at = heardBefore
	}
	quiet := time.Since(at)
	if quiet <= gone {
		return at, nil
	}
	return at, errs.New(errs.BootStalled, "no ramdisk of %s has talked to this site agent's relay for %s, and no ramdisk "+
		"boot of it is in progress: none runs (it stopped or died before answering, or the machine booted its disk); "+
		"boot the ramdisk again", nodeID, quiet.Round(time.Second))
}

// heartbeatLoop heartbeats the last progress every heartbeatEvery until
// stopped, so an activity waiting for a ramdisk that is still booting stays
// alive.
func heartbeatLoop(ctx context.Context, last *atomic.Pointer[kinds.Progress]) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		t := time.NewTicker(heartbeatEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx, *last.Load())
			}
		}
	}()
	return cancel
}

// commandID derives a command id stable across retries from the workflow,
// its run and the activity id.
func commandID(info activity.Info) string {
	sum := sha256.Sum256([]byte(info.WorkflowExecution.ID + "\x00" + info.WorkflowExecution.RunID + "\x00" + info.ActivityID))
	return "cmd_" + hex.EncodeToString(sum[:16])
}
