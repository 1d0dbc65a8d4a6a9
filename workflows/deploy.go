package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/better-compute/better-compute/bmc"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/kinds"
	"github.com/better-compute/better-compute/nodestate"
)

// Built-in steps a deploy profile may use. Steps registered by plugins come
// with the step registry; until then any other step is UNSUPPORTED.
const (
	StepDeployImage   = kinds.DeployImage
	StepBootKexec     = kinds.BootKexec
	StepSetPower      = kinds.PowerSetPower
	StepSetBootDevice = kinds.ManagementSetBootDevice
)

// BuiltinSteps lists the steps a profile may use today.
func BuiltinSteps() []string {
	return []string{StepDeployImage, StepBootKexec, StepSetPower, StepSetBootDevice}
}

// DeployWorkflow writes an OS onto a ready machine by running the deploy
// profile's steps: deploy.image streams the catalog image from the site cache
// into the disk from the ramdisk (booted with its own discovery token), and
// boot.kexec boots it. The user data travels only as a reference.
func DeployWorkflow(ctx workflow.Context, in Input) (Result, error) {
	return verb(ctx, in, nodestate.Deploy, func(r *run) (*WipeAttestation, error) {
		var p Profile
		pin := ProfileInput{TenantID: in.TenantID, ProfileID: in.ProfileID, Version: in.ProfileVersion}
		if err := workflow.ExecuteActivity(r.cp(time.Minute), ActGetProfile, pin).Get(r.ctx, &p); err != nil {
			return nil, err
		}
		if err := r.move(nodestate.Deploying); err != nil {
			return nil, err
		}
		d := deployer{run: r}
		for i, s := range p.Steps {
			if err := d.step(i, s); err != nil {
				return nil, err
			}
		}
		rec := DeploymentInput{TenantID: in.TenantID, NodeID: in.NodeID, ProfileID: p.ID, ProfileVersion: p.Version, Role: p.Role}
		if err := workflow.ExecuteActivity(r.cp(time.Minute), ActRecordDeployment, rec).Get(r.ctx, nil); err != nil {
			return nil, err
		}
		return nil, r.move(nodestate.Deployed)
	})
}

// deployer runs a profile's steps, remembering what the machine runs.
type deployer struct {
	*run
	ramdiskUp bool
	disk      string // where deploy.image wrote
}

func (d *deployer) step(i int, s ProfileStep) error {
	switch s.Use {
	case StepDeployImage:
		return d.deployImage(i, s)
	case StepBootKexec:
		if !d.ramdiskUp {
			return errs.Invalid(fmt.Sprintf("steps[%d]", i), "boot.kexec needs a deploy.image before it")
		}
		if err := d.bootLocal(); err != nil {
			return err
		}
		_, err := d.ramdisk(kinds.BootKexec, bmcTimeout, kinds.KexecInput{Disk: d.disk}, nil)
		d.ramdiskUp = false
		return err
	case StepSetPower:
		a, err := bmc.ParsePowerAction(str(s.With, "action"))
		if err != nil {
			return err
		}
		return d.power(a)
	case StepSetBootDevice:
		dev, err := bmc.ParseBootDevice(str(s.With, "device"))
		if err != nil {
			return err
		}
		return d.bootDevice(dev, false)
	}
	return errs.New(errs.Unsupported, "step %q (steps[%d]) is not a built-in step (%v); plugin steps come with the step registry",
		s.Use, i, BuiltinSteps())
}

func (d *deployer) deployImage(i int, s ProfileStep) error {
	if err := d.needsRamdisk("deploy.image"); err != nil {
		return err
	}
	var img kinds.EnsureImageInput
	if err := workflow.ExecuteActivity(d.cp(time.Minute), ActGetImage,
		ImageInput{TenantID: d.in.TenantID, ImageID: str(s.With, "image")}).Get(d.ctx, &img); err != nil {
		return err
	}
	var cached kinds.EnsureImageOutput
	if err := d.send(kinds.CacheEnsureImage, "site", cacheTimeout, img, &cached); err != nil {
		return err
	}
	var out kinds.DeployImageOutput
	in := kinds.DeployImageInput{ImageID: img.ImageID, Path: cached.Path, Digest: img.Digest,
		Compression: img.Compression, Format: str(s.With, "format"), Size: img.Size, Disk: str(s.With, "disk"),
		UserDataRef: str(s.With, "userDataRef")}
	if in.Format == "" {
		in.Format = "raw"
	}
	write := func() error {
		_, err := d.ramdisk(kinds.DeployImage, deployTimeout, in, &out)
		return err
	}
	var err error
	if d.ramdiskUp {
		err = write()
	} else {
		err = d.withRamdisk(write)
		d.ramdiskUp = err == nil
	}
	if err != nil {
		return err
	}
	d.disk = out.Disk
	return nil
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}
