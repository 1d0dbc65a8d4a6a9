package api

import (
	"context"
	"fmt"
	"sort"

	"github.com/better-compute/better-compute/kinds"
	wf "github.com/better-compute/better-compute/workflows"
)

// pending is what one pending activity of a node's workflow last reported.
type pending struct {
	kind, step string
	progress   kinds.Progress
}

// pendingOf reads the node's running workflow's pending activities and the
// progress each last heartbeated (decoded with the payload codec), by step.
// Anything unreadable is left out: progress is a view, never an error.
func (s *Server) pendingOf(ctx context.Context, nodeID string) map[string]pending {
	if s.temporal == nil || s.dc == nil {
		return nil
	}
	d, err := s.temporal.DescribeWorkflowExecution(ctx, wf.WorkflowID(nodeID), "")
	if err != nil {
		return nil
	}
	out := map[string]pending{}
	for _, pa := range d.GetPendingActivities() {
		p := pending{kind: pa.GetActivityType().GetName(), step: pa.GetActivityId()}
		if hb := pa.GetHeartbeatDetails(); hb != nil {
			_ = s.dc.FromPayloads(hb, &p.progress)
		}
		out[p.step] = p
	}
	return out
}

// describeProgress says what a progress report means to an operator.
func describeProgress(p kinds.Progress) string {
	switch {
	case p.Boot != "":
		return "ramdisk boot: " + p.Boot
	case p.Total > 0:
		return fmt.Sprintf("%d of %d MiB%s", p.Bytes>>20, p.Total>>20, onDisk(p.Disk))
	case p.Bytes > 0:
		return fmt.Sprintf("%d MiB%s", p.Bytes>>20, onDisk(p.Disk))
	}
	return ""
}

func onDisk(d string) string {
	if d == "" {
		return ""
	}
	return " on " + d
}

// nodeProgress is what the node's running workflow does, as its last
// pending command with something to report says it.
func nodeProgress(ps map[string]pending) string {
	steps := make([]string, 0, len(ps))
	for step, p := range ps {
		if describeProgress(p.progress) != "" {
			steps = append(steps, step)
		}
	}
	if len(steps) == 0 {
		return ""
	}
	sort.Strings(steps)
	p := ps[steps[len(steps)-1]]
	return p.kind + ": " + describeProgress(p.progress)
}
