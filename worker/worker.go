// Package worker builds the Temporal workers of better-compute: the control
// plane's (the metal verbs' workflows and the control-plane activities) and a
// site's (the site's activities, served by `bcd site`). Everything is
// registered under its explicit name.
package worker

import (
	"log/slog"

	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/better-compute/better-compute/activities/controlplane"
	"github.com/better-compute/better-compute/kinds"
	wf "github.com/better-compute/better-compute/workflows"
)

// Workflows maps each workflow name to its function.
func Workflows() map[string]any {
	return map[string]any{
		wf.Enroll:   wf.EnrollWorkflow,
		wf.Manage:   wf.ManageWorkflow,
		wf.Inspect:  wf.InspectWorkflow,
		wf.Provide:  wf.ProvideWorkflow,
		wf.Deploy:   wf.DeployWorkflow,
		wf.Undeploy: wf.UndeployWorkflow,
		wf.Rescue:   wf.RescueWorkflow,
		wf.Unrescue: wf.UnrescueWorkflow,
		wf.Recover:  wf.RecoverWorkflow,
		wf.Retire:   wf.RetireWorkflow,
		wf.Power:    wf.PowerWorkflow,
		// Not a verb: checks and saves a node's BMC settings (metal.update).
		wf.UpdateBMC: wf.UpdateBMCWorkflow,
	}
}

// RegisterWorkflows registers every workflow on r (a worker or a replayer).
func RegisterWorkflows(r sdkworker.WorkflowRegistry) {
	for name, f := range Workflows() {
		r.RegisterWorkflowWithOptions(f, workflow.RegisterOptions{Name: name})
	}
}

// ControlPlane returns the control plane's worker on wf.ControlPlaneQueue;
// verbs, when not nil, hears each verb's workflow start and end.
func ControlPlane(c client.Client, acts *controlplane.Activities, vo VerbObserver) sdkworker.Worker {
	opts := sdkworker.Options{DisableRegistrationAliasing: true}
	if vo != nil {
		opts.Interceptors = append(opts.Interceptors, &verbs{o: vo})
	}
	w := sdkworker.New(c, wf.ControlPlaneQueue, opts)
	RegisterWorkflows(w)
	acts.Register(w)
	return w
}

// ActivityRegistrar is what a site's activities offer.
type ActivityRegistrar interface {
	Register(r sdkworker.ActivityRegistry)
}

// SiteOptions are a site worker's dependencies.
type SiteOptions struct {
	Attempts     AttemptReporter // nil: retries are not reported
	Logger       *slog.Logger
	OnFatalError func(error)
}

// Site returns a site agent's worker on the site's task queue.
func Site(c client.Client, siteID string, acts ActivityRegistrar, o SiteOptions) sdkworker.Worker {
	opts := sdkworker.Options{DisableRegistrationAliasing: true, OnFatalError: o.OnFatalError}
	if o.Attempts != nil {
		log := o.Logger
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		opts.Interceptors = append(opts.Interceptors, &attempts{r: o.Attempts, log: log})
	}
	w := sdkworker.New(c, kinds.SiteTaskQueue(siteID), opts)
	acts.Register(w)
	return w
}
