package api

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	failurepb "go.temporal.io/api/failure/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/temporal"

	"github.com/better-compute/better-compute/codec"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/store"
	wf "github.com/better-compute/better-compute/workflows"
)

// pending is what one pending activity of a node's workflow last reported.
type pending struct {
	kind, step string
	progress   kinds.Progress
	// running: an attempt is under way (not waiting for its retry).
	running bool
	// attempt, and the failure of the attempt before it ("" on the first).
	attempt     int32
	lastFailure string
	// untaken: how long its first attempt has waited for a worker of queue
	// to take it (0 once one did).
	untaken time.Duration
	queue   string
}

// untakenNotice is how long a command waits for a worker before its
// progress says so: a site's commands are taken within milliseconds unless
// its agent is down or every slot of it is busy.
const untakenNotice = 15 * time.Second

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
		p := pending{kind: pa.GetActivityType().GetName(), step: pa.GetActivityId(),
			running: pa.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED, attempt: pa.GetAttempt()}
		if pa.GetAttempt() > 1 && pa.GetLastFailure() != nil {
			p.lastFailure = s.failureMessage(pa.GetLastFailure())
		}
		if hb := pa.GetHeartbeatDetails(); hb != nil {
			_ = s.dc.FromPayloads(hb, &p.progress)
		}
		if pa.GetState() == enumspb.PENDING_ACTIVITY_STATE_SCHEDULED && pa.GetLastFailure() == nil && pa.GetScheduledTime() != nil {
			p.untaken, p.queue = time.Since(pa.GetScheduledTime().AsTime()), pa.GetActivityOptions().GetTaskQueue().GetName()
		}
		out[p.step] = p
	}
	return out
}

// failureMessage is a failure's message, decoded: the payload codec moves
// it into the failure's encoded attributes ("Encoded failure" in clear).
func (s *Server) failureMessage(f *failurepb.Failure) string {
	err := codec.NewFailureConverter(s.dc).FailureToError(f)
	var ae *temporal.ApplicationError
	if errors.As(err, &ae) {
		return ae.Message()
	}
	return err.Error()
}

// describeProgress says what a progress report means to an operator.
func describeProgress(p kinds.Progress) string {
	switch {
	case p.BMC != "":
		return p.BMC
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
		if describePending(p) != "" {
			steps = append(steps, step)
		}
	}
	if len(steps) == 0 {
		return ""
	}
	sort.Strings(steps)
	p := ps[steps[len(steps)-1]]
	return p.kind + ": " + describePending(p)
}

// describePending says what a pending command does: its progress while an
// attempt runs and reports some, else, when it is retrying, that it is and
// why ("retrying (attempt 3): <the last attempt's error>"), so a node
// whose BMC does not answer shows it between attempts too; and, when no
// worker has taken its first attempt for untakenNotice, whose it waits for.
func describePending(p pending) string {
	now := describeProgress(p.progress)
	if now == "" && p.lastFailure == "" && p.untaken >= untakenNotice {
		return fmt.Sprintf("no worker has taken it for %s (%s)", p.untaken.Round(time.Second), whoTakes(p.queue))
	}
	if p.lastFailure == "" || (p.running && now != "") {
		return now
	}
	return fmt.Sprintf("retrying (attempt %d): %s", p.attempt, strings.TrimPrefix(p.lastFailure, p.kind+": "))
}

// whoTakes says which worker takes a command of task queue q.
func whoTakes(q string) string {
	switch site, ok := strings.CutPrefix(q, kinds.SiteTaskQueue("")); {
	case ok:
		return "is the agent of site " + site + ", bcd site, running and connected?"
	case q == wf.ControlPlaneQueue:
		return "is a control plane's worker, serve, running?"
	}
	return "task queue " + q
}

// listProgress is nodeProgress for each node of tenant's list a workflow
// works on, read a few at a time, so `metal list` shows a BMC that does
// not answer and a command that is retrying too: each active node, and
// each resting node whose verb has not moved it yet (a deploy fetching its
// image at the site), found in one visibility query (runningOn), asked
// only when the list holds a resting node.
func (s *Server) listProgress(ctx context.Context, tenant string, nodes []store.Node) map[string]string {
	out := make(map[string]string, len(nodes))
	var busy map[string]bool
	if slices.ContainsFunc(nodes, func(n store.Node) bool { return !n.State.Active() }) {
		busy = s.runningOn(ctx, tenant)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, listProgressReaders)
	for _, n := range nodes {
		if !n.State.Active() && !busy[n.ID] {
			continue
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if p := nodeProgress(s.pendingOf(ctx, n.ID)); p != "" {
				mu.Lock()
				out[n.ID] = p
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}

// runningOn is the nodes of tenant a workflow runs on, as much as
// Temporal's visibility lists of them (progress is a view, never an error).
func (s *Server) runningOn(ctx context.Context, tenant string) map[string]bool {
	if s.temporal == nil {
		return nil
	}
	query := fmt.Sprintf("TenantId = %s AND ExecutionStatus = 'Running'", quoteQuery(tenant))
	out := map[string]bool{}
	var token []byte
	for {
		resp, err := s.temporal.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Namespace: s.namespace, Query: query, NextPageToken: token, PageSize: 1000})
		if err != nil {
			return out
		}
		for _, e := range resp.Executions {
			out[attrString(e.GetSearchAttributes().GetIndexedFields(), "NodeId")] = true
		}
		if token = resp.NextPageToken; len(token) == 0 {
			return out
		}
	}
}

// listProgressReaders bounds the workflow descriptions a list reads at once.
const listProgressReaders = 8
