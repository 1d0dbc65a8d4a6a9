package agent

import (
	"context"
	"strings"

	"github.com/better-compute/better-compute/attest"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/ramdisk/disk"
)

// wipeInput is kinds.WipeInput plus the workflow id the attestations are
// bound to, when the sender includes it.
// wipe is disk.wipe: every disk of the machine in the given mode, each
// disk's read-back signed as an attestation. A disk whose read-back failed
// is attested Verified=false, never left out; a disk whose wipe could not run
// at all fails the command after the other disks were wiped.
func (a *agent) wipe(ctx context.Context, cmd kinds.Command, p *tracker) (any, error) {
	var in kinds.WipeInput
	if err := decode(cmd, &in); err != nil {
		return nil, err
	}
	primary, err := disk.ParseMode(in.Mode)
	if err != nil {
		return nil, err
	}
	var fallback disk.Mode
	if in.Fallback != "" {
		if fallback, err = disk.ParseMode(in.Fallback); err != nil {
			return nil, err
		}
	}
	if in.Nonce == "" {
		return nil, errs.Invalid("nonce", "disk.wipe needs the release's nonce to bind its attestations")
	}
	disks, err := a.cfg.Disks.Enumerate(ctx)
	if err != nil {
		return nil, err
	}
	if len(disks) == 0 {
		return nil, errs.New(errs.InvalidState, "this machine has no disks to wipe")
	}
	out := []attest.Signed{}
	var failed []string
	var first error
	for _, d := range disks {
		mode := primary
		if !d.Supports(mode) && fallback != "" && d.Supports(fallback) {
			mode = fallback
		}
		res, err := disk.Wipe(ctx, d, mode, func(pr disk.Progress) { p.set(pr.Disk, pr.Done, pr.Total) })
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		if err != nil {
			a.log.Warn("ramdisk: wipe could not run", "disk", d.Name, "mode", string(mode), "err", err)
			failed = append(failed, d.Name)
			if first == nil {
				first = err
			}
			continue
		}
		s, err := attest.Sign(a.key, attest.WipeAttestation{NodeID: a.nodeID, WorkflowID: in.WorkflowID, Nonce: in.Nonce,
			Disk: d.Name, Mode: string(mode), BytesVerified: res.BytesVerified, Verified: res.Verified, Finished: res.Finished})
		if err != nil {
			return nil, err
		}
		if !res.Verified {
			a.log.Warn("ramdisk: wipe read-back failed", "disk", d.Name, "failure", res.Failure)
		} else {
			a.log.Info("ramdisk: wiped and read back", "disk", d.Name, "mode", string(mode),
				"bytesVerified", res.BytesVerified, "bytesRead", res.BytesRead, "took", res.Finished.Sub(res.Started))
		}
		out = append(out, s)
	}
	if first != nil {
		return nil, errs.Wrap(errs.KindOf(first), first, "wipe could not run on %s", strings.Join(failed, ", "))
	}
	return out, nil
}
