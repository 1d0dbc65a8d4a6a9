package demo

import (
	"context"
	"fmt"
	"time"

	"github.com/better-compute/better-compute/errs"
)

// Run runs the demo: everything starts, every machine goes through the
// lifecycle, then it prints where to look and keeps serving (or returns with
// Once, an error if any machine failed).
func Run(ctx context.Context, cfg Config) error {
	d, err := Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer d.Stop()
	start := time.Now()
	nodes, failed := d.LoopAll(ctx)
	took := time.Since(start)
	for _, err := range failed {
		d.say("FAILED: %v", err)
	}
	d.say("%d of %d machines went enroll → ready → deploy → deployed → undeploy → ready in %s (%.2f loops/s)",
		len(nodes)-len(failed), len(nodes), took.Round(100*time.Millisecond), float64(len(nodes)-len(failed))/took.Seconds())
	d.say("%s", d.MemoryReport())
	d.CP.PrintBanner(d.cfg.Out, d.cpTook)
	fmt.Fprintf(d.cfg.Out, "\nTry:\n  export BETTER_COMPUTE_DATA_DIR=%s BETTER_COMPUTE_URL=%s\n", d.cfg.DataDir, d.CP.APIURL())
	for name, node := range nodes {
		fmt.Fprintf(d.cfg.Out, "  better-compute commands list --node %s   # %s\n", node, name)
		break
	}
	fmt.Fprintf(d.cfg.Out, "  better-compute metal list\n  better-compute workflows list --node <node> --query \"items[].profileId\"\n")
	if cfg.Once {
		if len(failed) > 0 {
			return errs.New(errs.InvalidState, "%d machine(s) failed", len(failed))
		}
		return nil
	}
	fmt.Fprintf(d.cfg.Out, "\nThe control plane keeps running; Ctrl-C stops it.\n")
	<-ctx.Done()
	return nil
}
