package worker

import (
	"time"

	"go.temporal.io/sdk/interceptor"
	"go.temporal.io/sdk/workflow"
)

// VerbObserver learns that a verb's workflow started and how it ended.
type VerbObserver interface {
	VerbStarted(verb string)
	VerbEnded(verb string, err error, took time.Duration)
}

// verbs counts each verb's workflow once, although a worker runs a
// workflow's code again from its start whenever it replays the history (a
// worker that restarted, a workflow evicted from the cache): the start is
// counted only when the first workflow task runs for the first time, and
// the end only when the workflow returns while not replaying, which is
// the task that closes it; nothing replays a closed workflow but a query,
// and a query's task is all replay. The duration is workflow time, from
// the start the history records to the closing task.
type verbs struct {
	interceptor.WorkerInterceptorBase
	o VerbObserver
}

func (v *verbs) InterceptWorkflow(ctx workflow.Context, next interceptor.WorkflowInboundInterceptor) interceptor.WorkflowInboundInterceptor {
	i := &verbsWorkflow{o: v.o}
	i.Next = next
	return i
}

type verbsWorkflow struct {
	interceptor.WorkflowInboundInterceptorBase
	o VerbObserver
}

func (i *verbsWorkflow) ExecuteWorkflow(ctx workflow.Context, in *interceptor.ExecuteWorkflowInput) (any, error) {
	info := workflow.GetInfo(ctx)
	verb := info.WorkflowType.Name
	if !workflow.IsReplaying(ctx) {
		i.o.VerbStarted(verb)
	}
	out, err := i.Next.ExecuteWorkflow(ctx, in)
	if !workflow.IsReplaying(ctx) {
		i.o.VerbEnded(verb, err, workflow.Now(ctx).Sub(info.WorkflowStartTime))
	}
	return out, err
}
