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
		err := watchPhase(ctx, "m-0001", "node-1", "deployed", stall, poll, func(_ context.Context, describe bool) (phaseSeen, error) {
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
		err := watchPhase(ctx, "m-0002", "node-2", "deployed", stall, poll, func(_ context.Context, describe bool) (phaseSeen, error) {
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
		err := watchPhase(ctx, "m-0003", "node-3", "deployed", stall, poll, func(_ context.Context, describe bool) (phaseSeen, error) {
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

	t.Run("workflow failed", func(t *testing.T) {
		err := watchPhase(ctx, "m-0004", "node-4", "ready", stall, poll, func(_ context.Context, describe bool) (phaseSeen, error) {
			return phaseSeen{State: "failed", FailedFrom: "undeploying", Closed: true, Result: "wipe: UNVERIFIED_WIPE"}, nil
		})
		if err == nil || !strings.Contains(err.Error(), "node-4") || !strings.Contains(err.Error(), "UNVERIFIED_WIPE") {
			t.Fatalf("a failed workflow: %v, want its error naming the node", err)
		}
	})
}
