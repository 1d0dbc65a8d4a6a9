package workflows

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/sdk"
	"github.com/better-compute/better-compute/steps"
)

// planOf is the plan profile.get resolved against the control plane's step
// registry, or, for a run from before the registry (whose profile.get
// result in history has none), the plan the built-in steps made then.
func planOf(p kinds.Profile) (sdk.Plan, error) {
	if p.Plan != nil {
		return *p.Plan, nil
	}
	return legacyPlan(p.Steps)
}

// legacyPlan plans a profile as the deploy workflow did before the step
// registry: only the four built-in steps, with their inputs as given. It
// must keep making the commands those runs' histories hold.
func legacyPlan(ps []kinds.ProfileStep) (sdk.Plan, error) {
	var plan sdk.Plan
	for i, s := range ps {
		p := sdk.PlannedStep{Index: i, Use: s.Use, With: sdk.Values{}, Timeout: steps.BMCTimeout}
		maps.Copy(p.With, s.With)
		switch s.Use {
		case kinds.DeployImage:
			p.RunsOn, p.Needs, p.Image, p.Timeout = sdk.Ramdisk, []sdk.Need{sdk.NeedsRamdisk}, "image", steps.DeployTimeout
			if str(s.With, "format") == "" {
				p.With["format"] = "raw"
			}
		case kinds.BootKexec:
			p.RunsOn = sdk.Ramdisk
		case kinds.PowerSetPower, kinds.ManagementSetBootDevice:
			p.RunsOn = sdk.Site
		default:
			return sdk.Plan{}, errs.New(errs.Unsupported, "step %q (steps[%d]) is not a built-in step (%s, %s, %s, %s)", s.Use, i,
				kinds.DeployImage, kinds.BootKexec, kinds.PowerSetPower, kinds.ManagementSetBootDevice)
		}
		plan.Steps = append(plan.Steps, p)
	}
	return plan, nil
}

// deployer runs a plan's steps, remembering whether the ramdisk is up and
// each step's outputs, by step id, for a later fromStep.
type deployer struct {
	*run
	ramdiskUp bool
	from      map[string]sdk.Values
	owner     string            // the profile's tenant: its images and user data are its
	pinned    map[string]pinned // by image id, pinned before the node moved (pinPlanned)
}

// step runs one planned step: its image pinned at the site first, the
// ramdisk booted first when the step needs it and it is not up.
func (d *deployer) step(s sdk.PlannedStep) error {
	if needs(s, sdk.NeedsRamdisk) {
		if err := d.needsRamdisk(s.Use); err != nil {
			return err
		}
	}
	in, err := d.inputs(s)
	if err != nil {
		return err
	}
	run := func() error {
		out, err := d.run1(s, in)
		if err == nil {
			d.from[s.Use] = out
		}
		return err
	}
	if needs(s, sdk.NeedsRamdisk) && !d.ramdiskUp {
		err = d.withRamdisk(run)
		d.ramdiskUp = err == nil
	} else if s.RunsOn == sdk.Ramdisk && d.ramdiskUp && s.Use != kinds.BootKexec {
		// boot.kexec is not resent: it points the machine at its disk first,
		// which a fresh ramdisk boot must not race.
		err = d.onRamdisk(run)
	} else {
		err = run()
	}
	if s.Use == kinds.BootKexec { // the ramdisk is gone: the machine runs its OS
		d.ramdiskUp = false
		err = d.kexecGone(err)
	}
	return err
}

// kexecGone is the workflow.GetVersion change id of power-cycling a machine
// whose boot.kexec failed BOOT_STALLED: histories from before failed the
// verb there.
const kexecGone = "kexec-gone-power-cycles"

// kexecGone is boot.kexec's err, or, when the site says BOOT_STALLED (no
// ramdisk of the node is there: it died before taking the command, or it
// kexeced and its result was lost in a site agent restart), the power
// cycle that boots the OS from the disk instead: run1 set the node's boot
// entry and boot device to its disk before sending boot.kexec, and the image
// is written and verified. boot.kexec is not resent (a fresh ramdisk boot
// would race the disk boot; see step).
func (d *deployer) kexecGone(err error) error {
	if kindOf(err) != errs.BootStalled ||
		workflow.GetVersion(d.ctx, kexecGone, workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return err
	}
	workflow.GetLogger(d.ctx).Warn("no ramdisk to kexec the OS; power-cycling the machine into its disk", "node", d.in.NodeID, "err", err)
	return d.power(bmc.PowerCycle)
}

// inputs are the step's with values, the fields it reads from an earlier
// step filled from that step's outputs, and its image input replaced by the
// image pinned at the node's site.
func (d *deployer) inputs(s sdk.PlannedStep) (sdk.Values, error) {
	in := sdk.Values{}
	maps.Copy(in, s.With)
	for _, f := range s.FromFields {
		v, ok := d.from[s.FromStep][f]
		if !ok {
			return nil, errs.New(errs.InvalidInput, "steps[%d] (%s) reads %s from %s, which did not output it", s.Index, s.Use, f, s.FromStep)
		}
		in[f] = v
	}
	if s.Image != "" {
		img, ok := d.pinned[in.String(s.Image)]
		if !ok {
			var err error
			if img, err = d.pinImage(in.String(s.Image)); err != nil {
				return nil, err
			}
		}
		delete(in, s.Image)
		if err := merge(in, sdk.Values{"imageId": img.ImageID, "path": img.Path, "digest": img.Digest,
			"compression": img.Compression, "size": img.Size}); err != nil {
			return nil, err
		}
	}
	return in, d.userData(s, in)
}

// userData replaces deploy.image's userDataRef (the profile's template, a
// secret) by where the node's site serves it rendered with its token
// (userdata.render, after the image is pinned so the token's life starts
// late): neither the data nor the token enters a command or the history.
func (d *deployer) userData(s sdk.PlannedStep, in sdk.Values) error {
	ref := in.String("userDataRef")
	if s.Use != kinds.DeployImage || ref == "" ||
		workflow.GetVersion(d.ctx, "render-user-data", workflow.DefaultVersion, 1) == workflow.DefaultVersion {
		return nil // a run from before passed the reference through
	}
	owner := d.owner
	if owner == "" {
		owner = d.in.TenantID
	}
	ud := kinds.UserDataInput{TenantID: d.in.TenantID, NodeID: d.in.NodeID, Owner: owner, Ref: ref,
		Field: fmt.Sprintf("profile.steps[%d].with.userDataRef", s.Index)}
	var out kinds.UserDataOutput
	if err := workflow.ExecuteActivity(d.cp(), kinds.ActRenderUserData, ud).Get(d.ctx, &out); err != nil {
		return err
	}
	in["userDataRef"], in["userDataSha256"] = out.Path, out.SHA256
	return nil
}

// pinned is an image made present and verified at the node's site.
type pinned struct {
	kinds.EnsureImageInput
	Path string
}

// pinPlanned pins, in plan order, each image a step of the plan names in
// its own with (an image an earlier step outputs is pinned as its step
// comes), so a site that cannot fetch one refuses the deploy before the
// node moves.
func (d *deployer) pinPlanned(plan sdk.Plan) error {
	for _, s := range plan.Steps {
		id := s.With.String(s.Image)
		if s.Image == "" || id == "" || slices.Contains(s.FromFields, s.Image) {
			continue
		}
		if _, ok := d.pinned[id]; ok {
			continue
		}
		img, err := d.pinImage(id)
		if err != nil {
			return err
		}
		d.pinned[id] = img
	}
	return nil
}

// pinImage reads the catalog image and has the node's site cache it.
func (d *deployer) pinImage(id string) (pinned, error) {
	var img kinds.EnsureImageInput
	if err := workflow.ExecuteActivity(d.cp(), kinds.ActGetImage,
		kinds.ImageInput{TenantID: d.in.TenantID, ImageID: id, Owner: d.owner}).Get(d.ctx, &img); err != nil {
		return pinned{}, err
	}
	// The site heartbeats every 5 s while it fetches or waits for the
	// image, so a site agent that dies under it is noticed within 20 s and
	// the fetch retried, not after its step's timeout.
	var cached kinds.EnsureImageOutput
	step, _ := d.next(kinds.CacheEnsureImage)
	if err := d.command(step, kinds.CacheEnsureImage, "site", d.siteOptions(step, steps.Timeout(kinds.CacheEnsureImage), siteHeartbeat), img, &cached); err != nil {
		return pinned{}, err
	}
	return pinned{EnsureImageInput: img, Path: cached.Path}, nil
}

// run1 runs the step where it runs and returns its outputs.
func (d *deployer) run1(s sdk.PlannedStep, in sdk.Values) (sdk.Values, error) {
	var out sdk.Values
	switch s.RunsOn {
	case sdk.Ramdisk:
		if s.Use == kinds.BootKexec { // the machine boots its disk from now on
			if err := d.bootLocal(); err != nil {
				return nil, err
			}
			in = sdk.Values{"disk": d.from[kinds.DeployImage].String("disk")}
		}
		_, err := d.ramdisk(s.Use, s.Timeout, in, &out)
		return out, err
	case sdk.Site:
		in["bmc"] = d.bmc()
		step, _ := d.next(s.Use)
		// Every site step a profile may use heartbeats (a BMC call through
		// the site's BMC gate, a plugin's through its activity), so a
		// retry-safe one whose agent died is retried siteHeartbeat later;
		// one that is not retry-safe gets no heartbeat timeout: a
		// timed-out attempt (its agent died under it) is its last.
		if s.RetrySafe {
			return out, d.command(step, s.Use, "site", d.siteOptions(step, s.Timeout, siteHeartbeat), in, &out)
		}
		actx := workflow.WithScheduleToCloseTimeout(d.siteOptions(step, s.Timeout, 0), s.Timeout)
		return out, d.command(step, s.Use, "site", actx, in, &out)
	case sdk.ControlPlane:
		return d.controlPlane(s, in)
	}
	return nil, errs.New(errs.Unsupported, "steps[%d] (%s) runs on %q, which no worker serves", s.Index, s.Use, s.RunsOn)
}

// controlPlane runs a control-plane step as the activity named by its id
// on the control plane's queue: retried while it says NotReady (the
// activity's error asks for the delay) until the step's timeout.
func (d *deployer) controlPlane(s sdk.PlannedStep, in sdk.Values) (sdk.Values, error) {
	call := sdk.Call{Node: d.sdkNode(), Use: s.Use, WorkflowID: d.info.WorkflowExecution.ID,
		RunID: d.info.WorkflowExecution.RunID, With: in, From: d.from}
	call.Step, _ = d.next(s.Use)
	actx := workflow.WithActivityOptions(d.ctx, workflow.ActivityOptions{
		TaskQueue: ControlPlaneQueue, ActivityID: call.Step, ScheduleToCloseTimeout: s.Timeout,
		RetryPolicy: &temporal.RetryPolicy{InitialInterval: time.Second, MaximumInterval: time.Minute,
			NonRetryableErrorTypes: errs.FinalKinds()},
	})
	var out sdk.Values
	err := d.command(call.Step, s.Use, string(sdk.ControlPlane), actx, call, &out)
	return out, err
}

func (d *deployer) sdkNode() sdk.Node {
	n := d.node
	return sdk.Node{ID: n.NodeID, TenantID: n.TenantID, SiteID: n.SiteID, PoolID: n.PoolID, MACs: n.MACs,
		ProductUUID: n.ProductUUID, BMCDriver: n.BMC.Driver}
}

func needs(s sdk.PlannedStep, n sdk.Need) bool {
	for _, x := range s.Needs {
		if x == n {
			return true
		}
	}
	return false
}

// merge copies v into in, refusing a key in already has.
func merge(in, v sdk.Values) error {
	for _, k := range slices.Sorted(maps.Keys(v)) {
		if _, dup := in[k]; dup {
			return errs.New(errs.InvalidInput, "input %s is also a field of the pinned image", k)
		}
		in[k] = v[k]
	}
	return nil
}
