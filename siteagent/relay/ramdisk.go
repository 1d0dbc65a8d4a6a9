package relay

import (
	"context"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
)

// Next waits up to wait for node's next command and marks it taken; ok is
// false when none came.
func (r *Relay) Next(ctx context.Context, node, boot string, wait time.Duration) (kinds.Command, bool) {
	cmd, _, ok := r.take(ctx, node, boot, wait)
	return cmd, ok
}

// take is Next, with the span context of the command's hand-out (invalid
// when tracing is off) for the ramdisk's traceparent.
func (r *Relay) take(ctx context.Context, node, boot string, wait time.Duration) (kinds.Command, trace.SpanContext, bool) {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	r.mu.Lock()
	r.reclaimLocked(node, boot)
	r.polling[node]++
	r.mu.Unlock()
	defer func() { // the ramdisk was there until now
		r.mu.Lock()
		r.polling[node]--
		if r.polling[node] == 0 {
			delete(r.polling, node)
		}
		r.heard[node] = time.Now()
		r.mu.Unlock()
	}()
	for {
		r.mu.Lock()
		q := r.queueLocked(node)
		if len(q.ids) > 0 {
			id := q.ids[0]
			q.ids = q.ids[1:]
			c := r.cmds[id]
			if c == nil || c.state != pending {
				r.mu.Unlock()
				continue
			}
			c.state, c.takenBy = taken, boot
			sc := r.handOutLocked(c, boot)
			r.mu.Unlock()
			r.log.Info("command handed to ramdisk", "node", node, "command", id, "kind", c.cmd.Kind)
			return c.cmd, sc, true
		}
		wake := q.wake
		r.mu.Unlock()
		select {
		case <-wake:
		case <-timer.C:
			return kinds.Command{}, trace.SpanContext{}, false
		case <-ctx.Done():
			return kinds.Command{}, trace.SpanContext{}, false
		}
	}
}

// Progress records node's progress on command id. Progress on a command this
// agent does not know (it restarted) is dropped.
func (r *Relay) Progress(node, id string, p kinds.Progress) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.cmds[id]
	if c == nil {
		return nil
	}
	if c.cmd.NodeID != node {
		return errs.New(errs.PermissionDenied, "command %s is not %s's", id, node)
	}
	p.CommandID = id
	c.progress = p
	close(c.changed)
	c.changed = make(chan struct{})
	return nil
}

// Result records node's result for command id. A result for a command this
// agent does not know is kept for KeepResults under node and id, so the
// retried activity of that node's command gets it.
func (r *Relay) Result(node, id string, res kinds.Result) error {
	if res.CommandID == "" {
		res.CommandID = id
	}
	if res.CommandID != id {
		return errs.Invalid("commandId", "result for %s posted to command %s", res.CommandID, id)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.cmds[id]
	if c == nil {
		r.kept[keptKey{node, id}] = kept{res: res, at: time.Now()}
		r.log.Info("kept a result nobody waits for yet", "node", node, "command", id, "ok", res.OK)
		return nil
	}
	if c.cmd.NodeID != node {
		return errs.New(errs.PermissionDenied, "command %s is not %s's", id, node)
	}
	if res.Kind == "" {
		res.Kind = c.cmd.Kind
	}
	if res.Kind != c.cmd.Kind {
		return errs.Invalid("kind", "result of kind %s for a %s command", res.Kind, c.cmd.Kind)
	}
	if c.state == pending {
		r.dequeueLocked(c)
	}
	delete(r.cmds, id)
	endSpan(c, failedAs(res))
	if c.waiters == 0 {
		r.kept[keptKey{node, id}] = kept{res: res, at: time.Now()}
	}
	c.result = res
	close(c.done)
	r.log.Info("ramdisk answered", "node", node, "command", id, "kind", res.Kind, "ok", res.OK, "errorKind", res.ErrorKind)
	return nil
}

// reclaimLocked queues again the node's commands that an earlier ramdisk
// boot took and never answered while an activity still waits for them: a
// machine powered off or rebooted mid-poll leaves its long poll open on this
// side, and the command it was handed would otherwise wait for a ramdisk
// that no longer exists. A boot is known by its certificate (each ramdisk
// boot joins with a key of its own), so the boot that took a command never
// gets it again.
func (r *Relay) reclaimLocked(node, boot string) {
	for _, c := range r.cmds {
		if c.cmd.NodeID == node && c.state == taken && c.takenBy != boot && c.waiters > 0 {
			r.log.Info("command taken by an earlier ramdisk boot of the node; handing it to the new one",
				"node", node, "command", c.cmd.ID, "kind", c.cmd.Kind)
			endSpan(c, "the ramdisk boot that took it went away")
			r.enqueueLocked(c)
		}
	}
}
