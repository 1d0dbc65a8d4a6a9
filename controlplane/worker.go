package controlplane

import (
	"context"
	"log/slog"
	"time"

	"go.temporal.io/sdk/log"

	"github.com/better-compute/better-compute/activities/controlplane"
	"github.com/better-compute/better-compute/api"
	"github.com/better-compute/better-compute/errs"
	"github.com/better-compute/better-compute/steps"
	"github.com/better-compute/better-compute/worker"
)

// startWorker runs the control plane's Temporal worker: the metal verbs'
// workflows and the control-plane activities.
func (cp *ControlPlane) startWorker() error {
	reg, err := steps.Registry(cp.cfg.Plugins...)
	if err != nil {
		return errs.Wrap(errs.InvalidInput, err, "the control plane's plugins")
	}
	acts := &controlplane.Activities{Store: cp.store, CA: cp.ca, Metrics: cp.metrics, Steps: reg, Artifacts: controlplane.ArtifactStore{}}
	if cp.ca != nil { // a join token admits an agent only where the CA certifies it
		acts.PKI = controlplane.JoinTokens{}
	}
	w, err := worker.ControlPlane(cp.client, acts, cp.metrics)
	if err != nil {
		return errs.Wrap(errs.InvalidInput, err, "the control plane's steps")
	}
	if err := w.Start(); err != nil {
		return errs.Wrap(errs.Unavailable, err, "start the control-plane worker")
	}
	// Profiles are resolved against the control-plane steps this worker runs.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := api.PublishControlPlaneSteps(ctx, cp.store, acts.Steps); err != nil {
		w.Stop()
		return err
	}
	// The plugins' profiles, public in the root tenant: nobody creates them.
	if err := api.StorePluginProfiles(ctx, cp.store, reg, cp.log); err != nil {
		w.Stop()
		return err
	}
	cp.worker = w
	return nil
}

// temporalLogger routes the Temporal SDK's logs to slog.
func temporalLogger(l *slog.Logger) log.Logger { return log.NewStructuredLogger(l) }
