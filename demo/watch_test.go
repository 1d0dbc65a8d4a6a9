package demo

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// A phase is bounded by a lack of progress, not by its length: a machine
// that keeps moving (a new command status, or only its pending activity's
// heartbeat) for five times the stall window gets there; one that stops
// fails after the window, naming the node, its state and the step it is on.
func TestWatchPhase(t *testing.T) {
	const stall, poll = 300 * time.Millisecond, 10 * time.Millisecond
	steps := []string{"power.setPower (site) running", "management.setBootDevice (site) running", "deploy.image (ramdisk) queued",
		"deploy.image (ramdisk) running", "boot.kexec (ramdisk) running"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	t.Run("slow but progressing", func(t *testing.T) {
		start := time.Now()
		err := watchPhase(ctx, "m-0001", "node-1", "deployed", stall, poll, nil, func(_ context.Context, describe bool) (phaseSeen, error) {
			i := int(time.Since(start) / (stall / 2)) // a new step every half window
			if i >= 10 {                              // five windows
				return phaseSeen{State: "deployed", Command: steps[len(steps)-1] + " succeeded", Events: 40, Closed: true}, nil
			}
			return phaseSeen{State: "deploying", Command: steps[i%len(steps)] + fmt.Sprint(i), Events: int64(5 + i)}, nil
		})
		if err != nil {
			t.Fatalf("a phase of %v, progressing every %v, failed: %v", time.Since(start), stall/2, err)
		}
		if took := time.Since(start); took < 5*stall {
			t.Fatalf("the phase took %v, want the whole 5 × %v", took, stall)
		}
	})

	t.Run("only heartbeats", func(t *testing.T) {
		start := time.Now()
		err := watchPhase(ctx, "m-0002", "node-2", "deployed", stall, poll, nil, func(_ context.Context, describe bool) (phaseSeen, error) {
			s := phaseSeen{State: "deploying", Command: "deploy.image (ramdisk) running"}
			if time.Since(start) > 4*stall {
				return phaseSeen{State: "deployed", Command: "boot.kexec (ramdisk) succeeded", Closed: true}, nil
			}
			if describe { // the image write heartbeats; nothing else moves
				s.Events, s.Pending = 9, "deploy.image started attempt 1, last heartbeat "+time.Now().Format(time.RFC3339Nano)
			}
			return s, nil
		})
		if err != nil {
			t.Fatalf("a heartbeating phase failed: %v", err)
		}
	})

	t.Run("stuck", func(t *testing.T) {
		start := time.Now()
		looks := 0
		err := watchPhase(ctx, "m-0003", "node-3", "deployed", stall, poll, nil, func(_ context.Context, describe bool) (phaseSeen, error) {
			looks++
			return phaseSeen{State: "deploying", Command: "deploy.image (ramdisk) running",
				Events: 9, Pending: "deploy.image started attempt 1, last heartbeat 2026-12-03T01:00:00Z"}, nil
		})
		took := time.Since(start)
		if err == nil {
			t.Fatal("a phase without progress did not fail")
		}
		for _, want := range []string{"m-0003 (node-3)", "no progress toward deployed", "it is deploying", "deploy.image (ramdisk) running", "deploy.image started"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("error %q does not say %q", err, want)
			}
		}
		if took < stall || took > stall+time.Second {
			t.Errorf("failed after %v, want just after the %v window", took, stall)
		}
	})

	// With the workflow's result on closed, the node in want is described
	// every stall/5 only, not every poll: the close ends the wait.
	t.Run("close from the result", func(t *testing.T) {
		closed := make(chan string, 1)
		start, describes, looks := time.Now(), 0, 0
		err := watchPhase(ctx, "m-0005", "node-5", "ready", stall, poll, closed, func(_ context.Context, describe bool) (phaseSeen, error) {
			looks++
			if describe {
				describes++
			}
			if time.Since(start) > stall/2 && len(closed) == 0 && describes < 100 {
				closed <- ""
			}
			return phaseSeen{State: "ready", Command: "disk.wipe (ramdisk) succeeded"}, nil
		})
		if err != nil {
			t.Fatalf("a phase whose workflow completed: %v", err)
		}
		if describes*2 > looks {
			t.Errorf("the workflow was described at %d of %d looks, want every stall/5 only", describes, looks)
		}
	})

	t.Run("failure from the result", func(t *testing.T) {
		closed := make(chan string, 1)
		closed <- "workflow execution error: wipe: UNVERIFIED_WIPE"
		err := watchPhase(ctx, "m-0006", "node-6", "ready", stall, poll, closed, func(_ context.Context, describe bool) (phaseSeen, error) {
			return phaseSeen{State: "undeploying", Command: "disk.wipe (ramdisk) failed"}, nil
		})
		if err == nil || !strings.Contains(err.Error(), "node-6") || !strings.Contains(err.Error(), "UNVERIFIED_WIPE") {
			t.Fatalf("a failed workflow: %v, want its error naming the node", err)
		}
	})

	t.Run("workflow failed", func(t *testing.T) {
		err := watchPhase(ctx, "m-0004", "node-4", "ready", stall, poll, nil, func(_ context.Context, describe bool) (phaseSeen, error) {
			return phaseSeen{State: "failed", FailedFrom: "undeploying", Closed: true, Result: "wipe: UNVERIFIED_WIPE"}, nil
		})
		if err == nil || !strings.Contains(err.Error(), "node-4") || !strings.Contains(err.Error(), "UNVERIFIED_WIPE") {
			t.Fatalf("a failed workflow: %v, want its error naming the node", err)
		}
	})
}
