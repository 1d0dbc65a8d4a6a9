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
	"github.com/better-compute/better-compute/sdk"
	wf "github.com/better-compute/better-compute/workflows"
)

// Pollers is how many long polls each of our workers keeps open on its task
// queue for workflow tasks, and as many for activity tasks (the SDK's
// default is 2 of each). A workflow's first task waits on the queue for any
// of its pollers, the later ones go to the worker that ran the first: with
// a verb started on 20 machines at once, 2 pollers left each first task
// waiting 1.0–1.4 s on 2 cores, 8 pollers 0.14–0.16 s, and the 20
// machines' loops ran 20–29% faster (BenchmarkFleet, its 1st-w column).
const Pollers = 8

// Options are the options every worker of ours starts from: each
// registration under its explicit name, and Pollers.
func Options() sdkworker.Options {
	return sdkworker.Options{DisableRegistrationAliasing: true,
		MaxConcurrentWorkflowTaskPollers: Pollers, MaxConcurrentActivityTaskPollers: Pollers}
}

// RegisterWorkflows registers every workflow on r (a worker or a replayer).
func RegisterWorkflows(r sdkworker.WorkflowRegistry) {
	for name, f := range wf.Workflows() {
		r.RegisterWorkflowWithOptions(f, workflow.RegisterOptions{Name: name})
	}
}

// ControlPlane returns the control plane's worker on wf.ControlPlaneQueue:
// the workflows, the control-plane activities, and the Run of every
// control-plane step of acts.Steps (the built-ins when nil); a
// control-plane step without a Run is an error naming it. verbs, when not
// nil, hears each verb's workflow start and end.
func ControlPlane(c client.Client, acts *controlplane.Activities, vo VerbObserver) (sdkworker.Worker, error) {
	opts := Options()
	if vo != nil {
		opts.Interceptors = append(opts.Interceptors, &verbs{o: vo})
	}
	w := sdkworker.New(c, wf.ControlPlaneQueue, opts)
	RegisterWorkflows(w)
	acts.Register(w)
	if err := acts.RegisterSteps(w); err != nil {
		return nil, err
	}
	return w, nil
}

// ActivityRegistrar is what a site's activities offer: the site and
// ramdisk steps of a registry (activities/site).
type ActivityRegistrar interface {
	Register(r sdkworker.ActivityRegistry, reg *sdk.Registry) error
}

// SiteOptions are a site worker's dependencies.
type SiteOptions struct {
	Attempts     AttemptReporter // nil: retries are not reported
	Logger       *slog.Logger
	OnFatalError func(error)
	// Steps are the steps the site serves (steps.Registry of bcd site's
	// plugins); nil: the built-ins.
	Steps *sdk.Registry
}

// Site returns a site agent's worker on the site's task queue: its
// activities and the site and ramdisk steps of o.Steps; a site step
// without a Run that no activity serves is an error naming it.
func Site(c client.Client, siteID string, acts ActivityRegistrar, o SiteOptions) (sdkworker.Worker, error) {
	opts := Options()
	opts.OnFatalError = o.OnFatalError
	if o.Attempts != nil {
		log := o.Logger
		if log == nil {
			log = slog.New(slog.DiscardHandler)
		}
		opts.Interceptors = append(opts.Interceptors, &attempts{r: o.Attempts, log: log})
	}
	w := sdkworker.New(c, kinds.SiteTaskQueue(siteID), opts)
	if err := acts.Register(w, o.Steps); err != nil {
		return nil, err
	}
	return w, nil
}
